// Zod schemas for the run config TOML: shapes, types and ranges only. Rules that relate keys to each other
// live in sanity.ts; defaults and the rounds_per_epoch conversion in normalize.ts, where they can be reported.
// Every table is strict: an unknown key is an error, so a typo never silently falls back to a default.
import { MAX_TRUSTED_VERIFIERS } from '../coordinator/trust.ts';
import { z } from 'zod';
import {
  MAX_COMPRESSION_CHUNK,
  MAX_INNER_STEPS,
  MAX_QUANTIZATION_BITS,
  SPARSE_DOMAINS,
} from './sparseloco.ts';
import { PRESET_NAMES } from './types.ts';

const utf8 = new TextEncoder();

function int(min: number, max: number) {
  return z.number().int().min(min).max(max);
}
const u8 = int(0, 0xff);
const u16 = int(0, 0xffff);
const u32 = int(0, 0xffff_ffff);
const u64 = int(0, Number.MAX_SAFE_INTEGER);
/** A learning rate or similar: finite and not negative. */
const rate = z.number().min(0);
const positive = z.number().positive();

/** Psyche stores strings in fixed-size on-chain buffers; keep its caps so configs stay portable. */
function text(maxBytes: number) {
  return z
    .string()
    .min(1, { message: 'must not be empty' })
    .refine((s) => utf8.encode(s).length <= maxBytes, {
      message: `must be at most ${maxBytes} bytes of UTF-8`,
    });
}
export const SHORT_STRING_BYTES = 64;
export const URL_STRING_BYTES = 192;
export const RUN_ID_BYTES = 32;

type OneOf<T> = { [K in keyof T]-?: { [P in K]: Exclude<T[K], undefined> } }[keyof T];

/**
 * serde's externally tagged enum with data: a table holding exactly one variant key, e.g.
 * `[model.LLM.checkpoint.Hub]`. Unknown variant keys fail as unknown keys, with their full path.
 */
function tagged<S extends z.core.$ZodLooseShape>(variants: S) {
  return z
    .strictObject(variants)
    .partial()
    .transform((table, ctx) => {
      const present = Object.keys(table).filter((k) => (table as Record<string, unknown>)[k] !== undefined);
      if (present.length !== 1) {
        ctx.addIssue({
          code: 'custom',
          message:
            present.length === 0
              ? `must name one variant: ${Object.keys(variants).join(' | ')}`
              : `names ${present.length} variants (${present.join(', ')}); give exactly one`,
        });
        return z.NEVER;
      }
      return table as unknown as OneOf<z.output<z.ZodObject<S>>>;
    });
}

const hubRepo = z.strictObject({
  repo_id: text(SHORT_STRING_BYTES),
  revision: text(SHORT_STRING_BYTES).optional(),
});
const gcsRepo = z.strictObject({
  bucket: text(SHORT_STRING_BYTES),
  prefix: text(SHORT_STRING_BYTES).optional(),
});

const checkpoint = z.union([
  z.literal('Ephemeral'),
  tagged({ Dummy: hubRepo, Hub: hubRepo, P2P: hubRepo, Gcs: gcsRepo, P2PGcs: gcsRepo }),
]);

const tokenSize = z.enum(['TwoBytes', 'FourBytes']);

const shuffle = z.union([z.literal('DontShuffle'), tagged({ Seeded: z.array(u8).length(32) })]);

const httpLocation = tagged({
  SingleUrl: text(URL_STRING_BYTES),
  NumberedFiles: z.strictObject({
    url_template: text(SHORT_STRING_BYTES),
    start_index: u32,
    n_left_pad_zeros: u8,
    num_files: u32.min(1),
  }),
  Gcp: z.strictObject({ bucket_name: text(SHORT_STRING_BYTES), filter_directory: z.string() }),
});

const datasetName = text(SHORT_STRING_BYTES).regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, {
  message: 'must be a dataset name: letters, digits, ".", "_" or "-"',
});

const dataLocation = z.union([
  z.literal('Dummy'),
  tagged({
    Server: text(SHORT_STRING_BYTES),
    Local: text(URL_STRING_BYTES),
    Http: z.strictObject({ location: httpLocation, token_size_in_bytes: tokenSize, shuffle }),
    WeightedHttp: text(URL_STRING_BYTES),
    Preprocessed: text(URL_STRING_BYTES),
    Relay: z.strictObject({
      dataset: datasetName,
      token_size_in_bytes: tokenSize.optional(),
      shuffle: shuffle.optional(),
    }),
  }),
]);

const warmup = { base_lr: rate, warmup_steps: u32, warmup_init_lr: rate };
const lrSchedule = tagged({
  Constant: z.strictObject(warmup),
  Linear: z.strictObject({ ...warmup, total_steps: u32, final_lr: rate }),
  Cosine: z.strictObject({ ...warmup, total_steps: u32, final_lr: rate }),
  WarmupStableDecay: z.strictObject({
    ...warmup,
    stable_steps: u32,
    cosine_decay_steps: u32,
    cosine_decay_final_lr: rate,
    linear_decay_steps: u32,
    linear_decay_final_lr: rate,
  }),
});

const optimizer = z.union([
  z.literal('Dummy'),
  tagged({
    Distro: z.strictObject({
      clip_grad_norm: positive.optional(),
      weight_decay: rate.optional(),
      compression_decay: z.number().min(0).max(1),
      compression_topk: u16.min(1),
      compression_chunk: u16.min(1),
      quantize_1bit: z.boolean(),
    }),
    // meshtrain's second optimizer (docs/protocol.md "SparseLoCo rounds"); every key is optional, defaults in
    // sparseloco.ts. Ranges here; the rules relating keys (topk ≤ chunk², lr·weight_decay ≤ 1) in sanity.ts.
    SparseLoCo: z.strictObject({
      inner_steps: int(1, MAX_INNER_STEPS).optional(),
      betas: z.tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)]).optional(),
      eps: positive.optional(),
      weight_decay: rate.optional(),
      clip_grad_norm: rate.optional(),
      error_decay: z.number().min(0).max(1).optional(),
      compression_topk: u32.min(1).optional(),
      compression_chunk: int(1, MAX_COMPRESSION_CHUNK).optional(),
      quantization_bits: int(1, MAX_QUANTIZATION_BITS).optional(),
      domain: z.enum(SPARSE_DOMAINS).optional(),
      outer_lr: positive.optional(),
    }),
    AdamW: z.strictObject({
      betas: z.tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)]),
      weight_decay: rate,
      eps: positive,
      clip_grad_norm: positive.optional(),
    }),
  }),
]);

const llm = z.strictObject({
  architecture: z.enum(['HfLlama', 'HfDeepseek', 'HfAuto', 'Torchtitan']),
  data_type: z.enum(['Pretraining', 'Finetuning']),
  max_seq_len: u32,
  cold_start_warmup_steps: u32.optional(),
  checkpoint,
  data_location: dataLocation,
  lr_schedule: lrSchedule,
  optimizer,
});

// Client counts are u16 in Psyche; we lift them to u32 because meshtrain has no 256-client cap.
const config = z.strictObject({
  warmup_time: u64,
  cooldown_time: u64,
  epoch_time: u64.optional(),
  rounds_per_epoch: u32.optional(),
  max_round_train_time: u64,
  round_witness_time: u64,
  min_clients: u32,
  init_min_clients: u32,
  verification_percent: int(0, 100),
  witness_nodes: u32,
  global_batch_size_start: u32,
  global_batch_size_end: u32,
  global_batch_size_warmup_tokens: u64,
  total_steps: u32,
  waiting_for_members_extra_time: u8.optional(),
  max_clients: u32.optional(),
  max_witnesses: u32.optional(),
  // Ours: Ed25519 public keys (64 lowercase hex digits) of the verifiers the run creator trusts.
  trusted_verifiers: z
    .array(z.string().regex(/^[0-9a-f]{64}$/, 'must be an Ed25519 public key as 64 lowercase hex digits'))
    .max(MAX_TRUSTED_VERIFIERS)
    .optional(),
});

const modelOverrides = z.strictObject({
  hidden_size: u32.min(1).optional(),
  intermediate_size: u32.min(1).optional(),
  num_hidden_layers: u32.min(1).optional(),
  num_attention_heads: u32.min(1).optional(),
  num_key_value_heads: u32.min(1).optional(),
  vocab_size: u32.min(1).optional(),
  max_position_embeddings: u32.min(1).optional(),
  rms_norm_eps: positive.optional(),
  rope_theta: positive.optional(),
  tie_word_embeddings: z.boolean().optional(),
});

const meshtrain = z.strictObject({
  preset: z.enum(PRESET_NAMES).optional(),
  seed: u64.optional(),
  micro_batch_size: u32.min(1).optional(),
  model: modelOverrides.optional(),
});

export const runConfigDocument = z.strictObject({
  run_id: text(RUN_ID_BYTES).optional(),
  /** Psyche's centralized state.toml carries it; the relay keeps run state itself. */
  run_state: z.string().optional(),
  config,
  model: z.strictObject({ LLM: llm }),
  meshtrain: meshtrain.optional(),
});

export type RunConfigDocument = z.output<typeof runConfigDocument>;
