// The relay's HTTP API (apps/relay/PROTOCOL.md "HTTP API") as zod schemas, defined once for every side: the
// types in types.ts are inferred from them, the clients in this folder validate each JSON reply against them,
// and the relay's route handlers are typed with the inferred types (`satisfies`), so a handler that drifts
// from a schema fails its type check. Fields callers index or count with are non-negative integers; free-form
// parts (a transition's event and effects, the parsed config, the coordinator state, the dataset's own
// manifest) are taken as they come.
//
// Why schemas and not Hono's typed client (`hc` from 'hono/client'): the relay's routes are plain `Hono`
// instances composed with app.route(), and the data, checkpoint and web modules are passed in at run time
// (apps/relay/src/app.ts), so `typeof app` carries none of their routes unless that composition is retyped;
// and importing the relay's app type would pull its Node-typed modules (node:sqlite, Buffer, ws) into the
// browser's type check (apps/web's svelte-check has no Node types).
import { CLIENT_STATE_NAMES, RUN_STATE_NAMES, type CoordinatorState, type RunConfig } from '@meshtrain/core';
import type { DataManifest } from '@meshtrain/model';
import { z } from 'zod';

const count = z.int().nonnegative();
const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Every non-2xx JSON reply: `{"error": {"code", "message", …}}`. `code` is stable for programs, `message` says
 * what to do; some errors add fields (`issues` of an invalid config, a data route's `limit` or `samples`).
 */
export const ApiErrorBodySchema = z.object({
  error: z.looseObject({ code: z.string(), message: z.string(), issues: z.unknown().optional() }),
});

/** The round the coordinator is in, as `RunSummary.round` shows it. */
export const RoundProgressSchema = z.object({
  height: z.number(),
  step: count,
  /** Witness submissions so far, and how many witnesses the round has. */
  witnesses: z.number(),
  witness_count: z.number(),
});

/** What lists and admin replies show about a run. */
export const RunSummarySchema = z.object({
  run_id: z.string(),
  run_state: z.enum(RUN_STATE_NAMES),
  run_state_index: z.number(),
  pending_pause: z.boolean(),
  epoch: count,
  step: count,
  total_steps: count,
  round: RoundProgressSchema.nullable(),
  members: z.number(),
  epoch_clients: z.number(),
  healthy_clients: z.number(),
  /** Coordinator sessions open on this relay now. */
  connected: z.number(),
  permissioned: z.boolean(),
  main_authority: z.string(),
  join_authority: z.string(),
  /** Unix ms. */
  created_at: z.number(),
  seq: z.number(),
  /** The newest agreed epoch parameter hash (hex). */
  param_hash: z.object({ epoch: count, hash: z.string() }).nullable(),
  /** The keys of the run's trusted verifiers (`[config] trusted_verifiers`), hex; empty when it names none. */
  trusted_verifiers: z.array(z.string()),
  /**
   * Core's run-level warning (trustWarning): why identities without a verified record could control the results
   * the run applies — it may be attacker-controlled; null when trust is anchored and taking part.
   */
  trust_warning: z.string().nullable(),
});

/** GET /api/runs. */
export const RunListSchema = z.object({
  runs: z.array(RunSummarySchema),
  /** The relay's libp2p addresses (empty without libp2p). */
  p2p_multiaddrs: z.array(z.string()),
});

/** Figures a witness measured and reported with its attestation (docs/protocol.md "Witnesses and quorum"). */
export const WitnessReportSchema = z.object({
  step: count,
  tokens_per_sec: z.number(),
  /** Bytes per second. */
  bandwidth: z.number(),
});

/** One client the relay has seen in a run, with what it last reported as a witness. */
export const ClientRowSchema = z.object({
  /** Ed25519 public key, hex. */
  id: z.string(),
  device_kind: z.string(),
  p2p_id: z.string(),
  /** Unix ms. */
  first_seen: z.number(),
  last_seen: z.number(),
  points: z.number(),
  connected: z.boolean(),
  member: z.boolean(),
  /** Its state in the current epoch, null when it is not in it. */
  epoch_state: z.enum(CLIENT_STATE_NAMES).nullable(),
  /**
   * Its newest witness report among the relay's recent ones (WitnessMetadata, measured by the client): the
   * step, tokens per second of its last train step, and bytes per second it moved. null: none recently.
   */
  report: WitnessReportSchema.nullable(),
});

/** The result core accepted for one batch of a round (null commitment: none of its results was). */
export const AcceptedBatchSchema = z.object({
  batch: z.object({ start: count, end: count }),
  client: z.string().nullable(),
  commitment: z.string().nullable(),
  votes: z.number(),
});

/** One coordinator round (the relay's round history, newest first). */
export const RoundRowSchema = z.object({
  step: count,
  epoch: count,
  height: z.number(),
  random_seed: z.string(),
  data_index: z.number(),
  batch_size: z.number(),
  training: z.boolean(),
  clients: z.number(),
  /** Unix seconds (the coordinator's clock), unlike the other timestamps (ms). */
  started_at: z.number(),
  ended_at: z.number().nullable(),
  witnesses: z.number().nullable(),
  quorum: z.number().nullable(),
  quorum_reached: z.boolean().nullable(),
  /** Set once a later round's witnesses attested this one. */
  accepted: z.array(AcceptedBatchSchema).nullable(),
  /** Mean loss the witnesses reported for this step. */
  loss: z.number().nullable(),
});

/**
 * The witnesses' measured figures for one step: means over the clients that reported them (each reports its
 * own tokens/s and bandwidth; only witnesses report, so a sum would count a varying subset of the clients).
 */
export const StepReportsSchema = z.object({
  step: count,
  /** Witnesses that reported for this step. */
  reports: z.number(),
  tokens_per_sec: z.number(),
  /** Bytes per second. */
  bandwidth: z.number(),
});

export const GrantRowSchema = z.object({
  grantee: z.string(),
  grantor: z.string(),
  active: z.boolean(),
  delegates: z.array(z.string()),
  /** Unix ms. */
  updated_at: z.number(),
});

/** One recorded epoch end with core's verdict over its clients' parameter-hash reports. */
export const ParamHashReportSchema = z.object({
  epoch: count,
  step: count,
  voters: z.number(),
  /** The agreed hash (hex), or null while no strict majority of the voters reported one. */
  majority: z.string().nullable(),
  reports: z.number(),
  mismatched: z.array(z.string()),
});

/** A coordinator transition as the relay recorded it (attestations summarised). */
export const TransitionRowSchema = z.object({
  seq: z.number(),
  /** Unix ms. */
  at: z.number(),
  event: z.unknown(),
  effects: z.unknown(),
});

/** GET /api/runs/:id. */
export const RunDetailSchema = z.object({
  run: RunSummarySchema,
  p2p_multiaddrs: z.array(z.string()),
  /** The run's TOML, and core's parse of it (null if it no longer parses). */
  config: z.object({ toml: z.string(), parsed: z.custom<RunConfig>(isObject).nullable() }),
  clients: z.array(ClientRowSchema),
  /** At most 50, newest first. */
  rounds: z.array(RoundRowSchema),
  /** Witness reports per step over the relay's recent reports, newest step first. */
  reports: z.array(StepReportsSchema),
  grants: z.array(GrantRowSchema),
  param_hashes: z.array(ParamHashReportSchema),
  /** At most 20, newest first. */
  transitions: z.array(TransitionRowSchema),
  /** Only with `?state=1`. */
  state: z.custom<CoordinatorState>(isObject).optional(),
});

/** Replies of the admin routes that change a run (create, pause, resume, config). */
export const RunReplySchema = z.object({ run: RunSummarySchema });

/** Replies of the admin grant routes. */
export const GrantReplySchema = z.object({ grant: GrantRowSchema.nullable() });

/** POST /api/admin/runs/:id/grants: grant (or revoke) `grantee` the right to join. */
export const GrantRequestSchema = z.object({ grantee: z.string(), active: z.boolean() });

/** POST /api/admin/runs/:id/grants/:grantee/delegates: the keys that may join on the grant. */
export const DelegatesRequestSchema = z.object({ delegates: z.array(z.string()) });

/** GET /api/runs/:id/checkpoint[?step=S]. `files` maps file name → URL pinned to that step. */
export const CheckpointSummarySchema = z.object({
  step: count,
  epoch: count,
  /** parameterHash of its parameters, hex. */
  paramHash: z.string(),
  /** Download URLs (relay-relative) by file name: model.safetensors, config.json. */
  files: z.record(z.string(), z.string()),
  sha256: z.record(z.string(), z.string()),
  bytes: z.record(z.string(), z.number()),
  /** 'init': the run's seeded initial parameters; 'upload': an epoch end's agreed parameters. */
  source: z.enum(['init', 'upload']),
  createdAt: z.string(),
  /** Present when an earlier checkpoint stands in for parameters lost with their epoch's last clients. */
  rolledBackFrom: count.optional(),
});

/** The two splits of a run's dataset. */
export const DataSplitSchema = z.enum(['train', 'val']);

/**
 * The order a run reads its train split in. `corpus`: a /samples range is samples of the split in corpus order,
 * inside [0, n), and run sample id i is sample i mod n. `seeded` (the run's `shuffle = { Seeded = … }`): a
 * /samples range of the train split is run sample ids, any non-negative integer, and the relay maps id i to
 * sample π_p(i mod n), p = ⌊i/n⌋ — one permutation per pass (@meshtrain/model's sample-order.ts). The val
 * split is always in corpus order. Clients fold run ids into the split or not by it: an order they do not know
 * is an error, not a guess.
 */
export const DataOrderSchema = z.enum(['corpus', 'seeded']);

/** GET /api/runs/:id/data/manifest. */
export const DataManifestResponseSchema = z.object({
  run_id: z.string(),
  dataset: z.string(),
  seq_len: count,
  /** Tokens per sample in /samples answers: seq_len + 1 (inputs and shifted targets). */
  sample_tokens: count,
  token_bytes: count,
  vocab_size: count,
  tokenizer: z.string(),
  samples: z.object({ train: count, val: count }),
  /** The train split's order (see DataOrderSchema). */
  order: DataOrderSchema,
  max_samples_per_request: count,
  /** URL of each shard, by file name (relative to this relay). */
  shard_urls: z.record(z.string(), z.string()),
  /** The dataset's manifest.json as prepared (shards with token counts and SHA-256). */
  manifest: z.custom<DataManifest>(isObject),
});

/**
 * Null when `body` fits `schema`, else its first problem, named by where it is (`reply.runs[0].step`), e.g.
 * `reply is not an object`.
 */
export function mismatch(schema: z.ZodType, body: unknown): string | null {
  const r = schema.safeParse(body);
  if (r.success) return null;
  const issue = r.error.issues[0];
  if (!issue) return 'reply does not fit';
  let at = 'reply';
  for (const k of issue.path) at += typeof k === 'number' ? `[${k}]` : `.${String(k)}`;
  if (issue.code === 'invalid_type') {
    const want = issue.expected;
    return `${at} is not ${/^[aeiou]/.test(want) ? 'an' : 'a'} ${want}`;
  }
  return `${at}: ${issue.message}`;
}
