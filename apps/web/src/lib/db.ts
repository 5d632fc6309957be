// The browser's own storage (IndexedDB through Dexie): identity keys, and the training worker's cached
// checkpoints, data blocks and local metrics. One database, versioned schema.
import { Dexie } from 'dexie';
import type { EntityTable } from 'dexie';
import type { SavedStats } from '../worker/protocol.ts';

/** An Ed25519 key kept in this browser: `seed` is the 32-byte secret (hex), `publicKey` its public key (hex). */
export interface StoredKey {
  /** 'admin' (the main-authority key of the admin console) or 'volunteer' (the training client's identity). */
  role: 'admin' | 'volunteer';
  seed: string;
  publicKey: string;
  createdAt: number;
}

/**
 * A run's parameters at an epoch boundary, kept by the training worker so a reload rejoins without
 * downloading the checkpoint again. `step` is the step the next epoch starts at (core's `progress.step`).
 */
export interface StoredCheckpoint {
  runId: string;
  step: number;
  epoch: number;
  /** SHA-256 of the parameters (client's parameterHash), hex. */
  paramHash: string;
  params: Map<string, Float32Array>;
  savedAt: number;
}

/**
 * An aligned block of training samples kept by the training worker's data cache (worker/data-cache.ts): samples
 * `block × samplesPerBlock … (block + 1) × samplesPerBlock − 1` of the data identified by `datasetKey`, as the int32
 * rows the relay serves. `lastUsed` orders eviction (least recently used first); `bytes` is the rows' byte length.
 */
export interface StoredDataBlock {
  runId: string;
  datasetKey: string;
  block: number;
  /** Samples in the block (the cache's samplesPerBlock when it was written). */
  count: number;
  rows: Int32Array;
  bytes: number;
  lastUsed: number;
}

/**
 * This browser's own record of its contribution to a run (worker/local-metrics.ts), so a reload shows the
 * batches, bytes and loss history the tab had, and keeps counting from there. Keyed by run and volunteer id.
 */
export type StoredMetrics = SavedStats & {
  runId: string;
  clientId: string;
  updatedAt: number;
};

export type MeshtrainDb = Dexie & {
  keys: EntityTable<StoredKey, 'role'>;
  checkpoints: Dexie.Table<StoredCheckpoint, [string, number]>;
  dataBlocks: Dexie.Table<StoredDataBlock, [string, string, number]>;
  metrics: Dexie.Table<StoredMetrics, [string, string]>;
};

let db: MeshtrainDb | undefined;

export function meshtrainDb(): MeshtrainDb {
  if (!db) {
    db = new Dexie('meshtrain') as MeshtrainDb;
    db.version(1).stores({ keys: 'role' });
    db.version(2).stores({ keys: 'role', checkpoints: '[runId+step], runId' });
    db.version(3).stores({
      keys: 'role',
      checkpoints: '[runId+step], runId',
      dataBlocks: '[runId+datasetKey+block], lastUsed, bytes',
    });
    db.version(4).stores({
      keys: 'role',
      checkpoints: '[runId+step], runId',
      dataBlocks: '[runId+datasetKey+block], lastUsed, bytes',
      metrics: '[runId+clientId]',
    });
  }
  return db;
}
