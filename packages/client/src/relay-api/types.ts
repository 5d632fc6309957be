// The relay's HTTP API replies (apps/relay/PROTOCOL.md "HTTP API"), defined once for every side: the relay's
// route handlers are typed against these shapes (`satisfies` or explicit return types), and node-trainer, the
// browser worker, the web pages, the testnet, e2e and bench read them through this module.
//
// Why one types module and not Hono's typed client (`hc` from 'hono/client'): the relay's routes are plain
// `Hono` instances composed with app.route(), and the data, checkpoint and web modules are passed in at run
// time (apps/relay/src/app.ts), so `typeof app` carries none of their routes unless that composition is
// retyped; and importing the relay's app type would pull its Node-typed modules (node:sqlite, Buffer, ws) into
// the browser's type check (apps/web's svelte-check has no Node types). This module is types only, imports
// nothing at run time, and costs the browser bundle nothing.
import type { ClientState, CoordinatorState, RunConfig, RunState } from '@meshtrain/core';
import type { DataManifest } from '@meshtrain/model';

/**
 * Every non-2xx JSON reply: `{"error": {"code", "message", …}}`. `code` is stable for programs, `message` says
 * what to do; some errors add fields (`issues` of an invalid config, a data route's `limit` or `samples`).
 */
export interface ApiErrorBody {
  error: { code: string; message: string; issues?: unknown; [extra: string]: unknown };
}

/** The round the coordinator is in, as `RunSummary.round` shows it. */
export interface RoundProgress {
  height: number;
  step: number;
  /** Witness submissions so far, and how many witnesses the round has. */
  witnesses: number;
  witness_count: number;
}

/** What lists and admin replies show about a run. */
export interface RunSummary {
  run_id: string;
  run_state: RunState;
  run_state_index: number;
  pending_pause: boolean;
  epoch: number;
  step: number;
  total_steps: number;
  round: RoundProgress | null;
  members: number;
  epoch_clients: number;
  healthy_clients: number;
  /** Coordinator sessions open on this relay now. */
  connected: number;
  permissioned: boolean;
  main_authority: string;
  join_authority: string;
  /** Unix ms. */
  created_at: number;
  seq: number;
  /** The newest agreed epoch parameter hash (hex). */
  param_hash: { epoch: number; hash: string } | null;
  /** The keys of the run's trusted verifiers (`[config] trusted_verifiers`), hex; empty when it names none. */
  trusted_verifiers: string[];
  /**
   * Core's run-level warning (trustWarning): why identities without a verified record could control the results
   * the run applies — it may be attacker-controlled; null when trust is anchored and taking part.
   */
  trust_warning: string | null;
}

/** GET /api/runs. */
export interface RunList {
  runs: RunSummary[];
  /** The relay's libp2p addresses (empty without libp2p). */
  p2p_multiaddrs: string[];
}

/** One client the relay has seen in a run, with what it last reported as a witness. */
export interface ClientRow {
  /** Ed25519 public key, hex. */
  id: string;
  device_kind: string;
  p2p_id: string;
  /** Unix ms. */
  first_seen: number;
  last_seen: number;
  points: number;
  connected: boolean;
  member: boolean;
  /** Its state in the current epoch, null when it is not in it. */
  epoch_state: ClientState | null;
  /**
   * Its newest witness report among the relay's recent ones (WitnessMetadata, measured by the client): the
   * step, tokens per second of its last train step, and bytes per second it moved. null: none recently.
   */
  report: WitnessReport | null;
}

/** Figures a witness measured and reported with its attestation (docs/protocol.md "Witnesses and quorum"). */
export interface WitnessReport {
  step: number;
  tokens_per_sec: number;
  /** Bytes per second. */
  bandwidth: number;
}

/** The result core accepted for one batch of a round (null commitment: none of its results was). */
export interface AcceptedBatch {
  batch: { start: number; end: number };
  client: string | null;
  commitment: string | null;
  votes: number;
}

/** One coordinator round (the relay's round history, newest first). */
export interface RoundRow {
  step: number;
  epoch: number;
  height: number;
  random_seed: string;
  data_index: number;
  batch_size: number;
  training: boolean;
  clients: number;
  /** Unix seconds (the coordinator's clock), unlike the other timestamps (ms). */
  started_at: number;
  ended_at: number | null;
  witnesses: number | null;
  quorum: number | null;
  quorum_reached: boolean | null;
  /** Set once a later round's witnesses attested this one. */
  accepted: AcceptedBatch[] | null;
  /** Mean loss the witnesses reported for this step. */
  loss: number | null;
}

/**
 * The witnesses' measured figures for one step: means over the clients that reported them (each reports its
 * own tokens/s and bandwidth; only witnesses report, so a sum would count a varying subset of the clients).
 */
export interface StepReports {
  step: number;
  /** Witnesses that reported for this step. */
  reports: number;
  tokens_per_sec: number;
  /** Bytes per second. */
  bandwidth: number;
}

export interface GrantRow {
  grantee: string;
  grantor: string;
  active: boolean;
  delegates: string[];
  /** Unix ms. */
  updated_at: number;
}

/** One recorded epoch end with core's verdict over its clients' parameter-hash reports. */
export interface ParamHashReport {
  epoch: number;
  step: number;
  voters: number;
  /** The agreed hash (hex), or null while no strict majority of the voters reported one. */
  majority: string | null;
  reports: number;
  mismatched: string[];
}

/** A coordinator transition as the relay recorded it (attestations summarised). */
export interface TransitionRow {
  seq: number;
  /** Unix ms. */
  at: number;
  event: unknown;
  effects: unknown;
}

/** GET /api/runs/:id. */
export interface RunDetail {
  run: RunSummary;
  p2p_multiaddrs: string[];
  /** The run's TOML, and core's parse of it (null if it no longer parses). */
  config: { toml: string; parsed: RunConfig | null };
  clients: ClientRow[];
  /** At most 50, newest first. */
  rounds: RoundRow[];
  /** Witness reports per step over the relay's recent reports, newest step first. */
  reports: StepReports[];
  grants: GrantRow[];
  param_hashes: ParamHashReport[];
  /** At most 20, newest first. */
  transitions: TransitionRow[];
  /** Only with `?state=1`. */
  state?: CoordinatorState;
}

/** Replies of the admin routes that change a run (create, pause, resume, config). */
export interface RunReply {
  run: RunSummary;
}

/** Replies of the admin grant routes. */
export interface GrantReply {
  grant: GrantRow | null;
}

/** GET /api/runs/:id/checkpoint[?step=S]. `files` maps file name → URL pinned to that step. */
export interface CheckpointSummary {
  step: number;
  epoch: number;
  /** parameterHash of its parameters, hex. */
  paramHash: string;
  /** Download URLs (relay-relative) by file name: model.safetensors, config.json. */
  files: Record<string, string>;
  sha256: Record<string, string>;
  bytes: Record<string, number>;
  /** 'init': the run's seeded initial parameters; 'upload': an epoch end's agreed parameters. */
  source: 'init' | 'upload';
  createdAt: string;
  /** Present when an earlier checkpoint stands in for parameters lost with their epoch's last clients. */
  rolledBackFrom?: number;
}

/** The two splits of a run's dataset. */
export type DataSplit = 'train' | 'val';

/**
 * The order a run reads its train split in. `corpus`: a /samples range is samples of the split in corpus order,
 * inside [0, n), and run sample id i is sample i mod n. `seeded` (the run's `shuffle = { Seeded = … }`): a
 * /samples range of the train split is run sample ids, any non-negative integer, and the relay maps id i to
 * sample π_p(i mod n), p = ⌊i/n⌋ — one permutation per pass (@meshtrain/model's sample-order.ts). The val
 * split is always in corpus order.
 */
export type DataOrder = 'corpus' | 'seeded';

/** GET /api/runs/:id/data/manifest. */
export interface DataManifestResponse {
  run_id: string;
  dataset: string;
  seq_len: number;
  /** Tokens per sample in /samples answers: seq_len + 1 (inputs and shifted targets). */
  sample_tokens: number;
  token_bytes: number;
  vocab_size: number;
  tokenizer: string;
  samples: Record<DataSplit, number>;
  /** The train split's order (see DataOrder). */
  order: DataOrder;
  max_samples_per_request: number;
  /** URL of each shard, by file name (relative to this relay). */
  shard_urls: Record<string, string>;
  /** The dataset's manifest.json as prepared (shards with token counts and SHA-256). */
  manifest: DataManifest;
}
