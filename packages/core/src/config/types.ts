// The typed form of a run config file. It mirrors the TOML document key for key (Psyche's snake_case names
// and serde's externally tagged enums: a unit variant is a string, a variant with data is a one-key table),
// so `stringifyRunConfig` can write it back and a Psyche user recognises every path.
import type { CoordinatorConfig } from '../state/coordinator-config.ts';

export type Architecture = 'HfLlama' | 'HfDeepseek' | 'HfAuto' | 'Torchtitan';
export type DataType = 'Pretraining' | 'Finetuning';
export type TokenSize = 'TwoBytes' | 'FourBytes';

export interface HubRepo {
  repo_id: string;
  revision?: string;
}

export interface GcsRepo {
  bucket: string;
  prefix?: string;
}

export type Checkpoint =
  | 'Ephemeral'
  | { Dummy: HubRepo }
  | { Hub: HubRepo }
  | { P2P: HubRepo }
  | { Gcs: GcsRepo }
  | { P2PGcs: GcsRepo };

export type Shuffle = 'DontShuffle' | { Seeded: number[] };

export type HttpLocation =
  | { SingleUrl: string }
  | {
      NumberedFiles: {
        url_template: string;
        start_index: number;
        n_left_pad_zeros: number;
        num_files: number;
      };
    }
  | { Gcp: { bucket_name: string; filter_directory: string } };

export interface HttpDataLocation {
  location: HttpLocation;
  token_size_in_bytes: TokenSize;
  shuffle: Shuffle;
}

/** meshtrain's own variant: token shards the relay serves by dataset name. */
export interface RelayDataLocation {
  dataset: string;
  token_size_in_bytes: TokenSize;
  /**
   * The order the run reads the training split in, as Http's: DontShuffle (corpus order, the default when the
   * key is absent) or a 32-byte seed for a seeded permutation per pass (@meshtrain/model's sample-order.ts).
   */
  shuffle: Shuffle;
}

export type DataLocation =
  | 'Dummy'
  | { Server: string }
  | { Local: string }
  | { Http: HttpDataLocation }
  | { WeightedHttp: string }
  | { Preprocessed: string }
  | { Relay: RelayDataLocation };

export interface ConstantLrTable {
  base_lr: number;
  warmup_steps: number;
  warmup_init_lr: number;
}

export interface LinearLrTable extends ConstantLrTable {
  total_steps: number;
  final_lr: number;
}

export type CosineLrTable = LinearLrTable;

export interface WarmupStableDecayLrTable extends ConstantLrTable {
  stable_steps: number;
  cosine_decay_steps: number;
  cosine_decay_final_lr: number;
  linear_decay_steps: number;
  linear_decay_final_lr: number;
}

export type LrScheduleTable =
  | { Constant: ConstantLrTable }
  | { Linear: LinearLrTable }
  | { Cosine: CosineLrTable }
  | { WarmupStableDecay: WarmupStableDecayLrTable };

export interface DistroOptimizer {
  clip_grad_norm?: number;
  weight_decay?: number;
  compression_decay: number;
  compression_topk: number;
  compression_chunk: number;
  quantize_1bit: boolean;
}

export interface AdamWOptimizer {
  betas: [number, number];
  weight_decay: number;
  eps: number;
  clip_grad_norm?: number;
}

/**
 * meshtrain's SparseLoCo (docs/protocol.md "SparseLoCo rounds"): every round each trainer takes
 * `inner_steps` local AdamW steps from the shared parameters, adds the pseudo-gradient to its error-feedback
 * buffer and sends the top-k of every chunk of it quantised to `quantization_bits`; every replica applies the
 * same exact outer step. After parsing every key is set (config/sparseloco.ts holds the defaults).
 */
export interface SparseLoCoOptimizer {
  /** H: inner AdamW steps per round, each on `global_batch_size` sequences of the run. */
  inner_steps: number;
  /** Inner AdamW's (β1, β2). */
  betas: [number, number];
  eps: number;
  /** Inner AdamW's decoupled weight decay (the outer step has none). */
  weight_decay: number;
  /** Clip each inner step's gradients to this global L2 norm; 0 = off. */
  clip_grad_norm: number;
  /** β of the error-feedback buffer: ef ← β·ef + Δ. */
  error_decay: number;
  /** Entries sent per chunk (at most the chunk's entry count, chunk²). */
  compression_topk: number;
  compression_chunk: number;
  /** Bits per sent entry, 1..8: a sign bit and a level of a per-chunk table of 2^(bits−1) magnitudes. */
  quantization_bits: number;
  /** Top-k over the chunk's raw entries or over its DCT-II coefficients. */
  domain: 'raw' | 'dct';
  /** The outer step's learning rate: θ ← θ − outer_lr · aggregate. */
  outer_lr: number;
}

/** Psyche's `"Dummy"` optimizer is rejected at parse time, as Psyche's `Model::check` rejects it. */
export type Optimizer =
  { Distro: DistroOptimizer } | { SparseLoCo: SparseLoCoOptimizer } | { AdamW: AdamWOptimizer };

export interface LlmModel {
  architecture: Architecture;
  data_type: DataType;
  max_seq_len: number;
  cold_start_warmup_steps: number;
  checkpoint: Checkpoint;
  data_location: DataLocation;
  lr_schedule: LrScheduleTable;
  optimizer: Optimizer;
}

/** `[config]`: the coordinator's keys. `max_seq_len` and `cold_start_warmup_steps` live in `[model.LLM]`. */
export type ConfigTable = Omit<CoordinatorConfig, 'max_seq_len' | 'cold_start_warmup_steps'>;

export const PRESET_NAMES = ['micro', 'tiny', '20m', '125m'] as const;
export type ModelPreset = (typeof PRESET_NAMES)[number];

/** Hugging Face LlamaConfig field names, so overrides read like a `config.json`. */
export interface ModelOverrides {
  hidden_size?: number;
  intermediate_size?: number;
  num_hidden_layers?: number;
  num_attention_heads?: number;
  num_key_value_heads?: number;
  vocab_size?: number;
  max_position_embeddings?: number;
  rms_norm_eps?: number;
  rope_theta?: number;
  tie_word_embeddings?: boolean;
}

/** `[meshtrain]`: what Psyche has no key for. */
export interface MeshtrainTable {
  preset?: ModelPreset;
  /** Run seed: model init and everything else a run derives deterministically. */
  seed: number;
  micro_batch_size: number;
  model?: ModelOverrides;
}

export interface RunConfig {
  run_id?: string;
  config: ConfigTable;
  model: { LLM: LlmModel };
  meshtrain: MeshtrainTable;
}

/** A key path and why it matters: an unsupported feature, a conversion or a default that was applied. */
export interface ConfigNote {
  path: string;
  reason: string;
}

export interface ParsedRunConfig {
  config: RunConfig;
  /** Recognised keys or variants meshtrain cannot run yet; the caller decides whether that is fatal. */
  unsupported: ConfigNote[];
  /** What the parser did on the user's behalf (older keys converted, Psyche keys defaulted). */
  notes: ConfigNote[];
  /** One line: run id, model, steps, batch size, optimizer, schedule. */
  summary: string;
}
