// What a Client is given (ClientOptions) and what it reports (ClientEvent, ClientPhase, ClientStats).
import type { BatchId, RunConfig } from '@meshtrain/core';
import type { DistroBackend } from '@meshtrain/distro';
import type {
  CheckpointSource,
  CoordinatorLink,
  DataSource,
  ParameterMap,
  PeerNetwork,
  TrainingBackend,
} from '../interfaces.ts';

export type ClientPhase =
  | 'NotYetInitialized'
  | 'Initializing'
  | 'Warmup'
  | 'Training'
  | 'Witness'
  | 'Cooldown'
  | 'Resyncing'
  | 'Stopped';

export type ClientEvent =
  | { type: 'phase'; phase: ClientPhase; epoch: number; step: number }
  /** `hash`: parameterHash of the parameters the epoch starts from (hex), also for a kept model. */
  | { type: 'model'; source: 'init' | 'checkpoint' | 'kept'; step: number; hash: string; via?: string }
  | { type: 'applied'; step: number; height: number; results: number; skipped: number }
  | {
      type: 'trained';
      epoch: number;
      step: number;
      batch: BatchId;
      loss: number;
      lr: number;
      bytes: number;
      seconds: number;
      /**
       * Optimizer steps the result covers: 1 for DisTrO, SparseLoCo's inner steps (H, fewer for an interval
       * of fewer than H samples). An fp32 data-parallel peer would have sent one gradient per step.
       */
      innerSteps: number;
    }
  | { type: 'witness'; step: number; results: number }
  /** This client verified a sampled result of `step` (docs/protocol.md "Verification of work"). */
  | {
      type: 'verified';
      step: number;
      trainer: string;
      pass: boolean;
      fingerprintAgreement: number;
      updateAgreement: number;
    }
  /**
   * Applied results were removed (a confirmed cheat's, or, in a SparseLoCo run, results applied at once that
   * the round's final accepted set lacks): the parameters were rebuilt from the epoch's start.
   */
  | { type: 'replayed'; height: number; rounds: number; excluded: number }
  | { type: 'healthCheck'; step: number; reported: number }
  | { type: 'paramHash'; epoch: number; step: number; hash: string }
  | { type: 'resync'; reason: string }
  | { type: 'warning'; message: string }
  | { type: 'error'; message: string };

export interface ClientOptions {
  run: RunConfig;
  runId: string;
  /** Ed25519 secret key (32 bytes); its public key must equal `link.clientId`. */
  secretKey: Uint8Array;
  link: CoordinatorLink;
  backend: TrainingBackend;
  /** DisTrO on the host (CPU reference) or a GPU device; its chunk must be the run's compression_chunk. */
  distro: DistroBackend;
  data: DataSource;
  /** Deterministic init for a run's first epoch: parameters from the run seed. */
  initParams: () => ParameterMap;
  checkpoints: CheckpointSource;
  peers?: PeerNetwork;
  /** Milliseconds since some fixed origin, for deadlines and rates (defaults to Date.now). */
  now?: () => number;
  /** Waits `ms` milliseconds (defaults to setTimeout); retries, backoff and polling all wait through it. */
  sleep?: (ms: number) => Promise<void>;
  onEvent?: (e: ClientEvent) => void;
  /** How long to retry a missing accepted result before re-syncing (ms; default FETCH_PATIENCE_MS). */
  fetchPatienceMs?: number;
}

/** What the client counted since it started (result frames, not the coordinator session's other traffic). */
export interface ClientStats {
  /** Bytes of this client's own SignedResult frames submitted. */
  bytesSent: number;
  /** Bytes of other trainers' result frames received (relay and peers). */
  bytesReceived: number;
  /** The part of `bytesReceived` that came from peers. */
  bytesFromPeers: number;
  resultsSent: number;
  resultsApplied: number;
  resyncs: number;
}
