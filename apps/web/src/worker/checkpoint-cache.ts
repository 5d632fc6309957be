// Checkpoints cached in this browser (IndexedDB via Dexie), in front of the relay's checkpoint store. The
// worker saves the parameters it holds at every epoch end; when the client later asks for that step (a reload,
// a resume), the cached copy is used if its hash equals the one the relay publishes for that step (a small
// JSON request instead of the safetensors download). The client verifies the parameters against that hash.
import { bytesToHex, hexToBytes } from '@meshtrain/core';
import { fetchCheckpointSummary, RelayApiError } from '@meshtrain/client';
import type { Checkpoint, CheckpointSource } from '@meshtrain/client';
import { meshtrainDb } from '../lib/db.ts';

/** Epoch checkpoints kept per run (the newest ones). */
const KEEP = 2;

export interface CachedCheckpoints extends CheckpointSource {
  /** Stores this tab's own parameters at an epoch boundary. */
  save(ck: Checkpoint): Promise<void>;
  /** Bytes downloaded from the relay (cache misses), and steps served from the cache. */
  readonly stats: { downloadedBytes: number; cacheHits: number };
}

export function cachedCheckpoints(
  relay: CheckpointSource & { bytes: number },
  o: { relayUrl: string; runId: string; log: (line: string) => void },
): CachedCheckpoints {
  const db = meshtrainDb();
  /** Steps whose cached copy was already handed out: asked again means the client refused it. */
  const served = new Set<number>();
  const stats = { downloadedBytes: 0, cacheHits: 0 };

  /** The hash the relay publishes for `step`; 'none' when it has no checkpoint, null when unknown (failed). */
  async function publishedHash(step: number): Promise<string | null | 'none'> {
    try {
      const summary = await fetchCheckpointSummary(o.relayUrl, o.runId, step);
      if (summary === null) return 'none';
      return summary.step === step ? summary.paramHash : null;
    } catch (e) {
      // An error reply: the hash is unknown, so the cached copy is not used. No answer at all: the load fails.
      if (e instanceof RelayApiError && e.status !== 0) return null;
      throw e;
    }
  }

  return {
    stats,
    async load(step: number): Promise<Checkpoint | null> {
      const cached = await db.checkpoints.get([o.runId, step]);
      if (cached && !served.has(step)) {
        const published = await publishedHash(step);
        if (published === cached.paramHash) {
          served.add(step);
          stats.cacheHits++;
          o.log(
            `checkpoint for step ${step} loaded from this browser's cache (hash ${cached.paramHash.slice(0, 16)}…)`,
          );
          return {
            step,
            epoch: cached.epoch,
            paramHash: hexToBytes(cached.paramHash),
            params: cached.params,
          };
        }
        if (published === 'none') return null; // not uploaded yet: the client asks again shortly
        o.log(`cached checkpoint for step ${step} differs from the relay's; downloading`);
        await db.checkpoints.delete([o.runId, step]);
      } else if (cached) {
        await db.checkpoints.delete([o.runId, step]);
      }
      const before = relay.bytes;
      const ck = await relay.load(step);
      stats.downloadedBytes += relay.bytes - before;
      if (ck) o.log(`checkpoint for step ${step} downloaded from the relay (${relay.bytes - before} bytes)`);
      return ck;
    },
    async upload(ck: Checkpoint): Promise<void> {
      await relay.upload?.(ck);
    },
    async has(step: number): Promise<boolean> {
      return (await publishedHash(step)) !== 'none';
    },
    async save(ck: Checkpoint): Promise<void> {
      await db.checkpoints.put({
        runId: o.runId,
        step: ck.step,
        epoch: ck.epoch,
        paramHash: bytesToHex(ck.paramHash),
        params: ck.params,
        savedAt: Date.now(),
      });
      const all = await db.checkpoints.where('runId').equals(o.runId).sortBy('step');
      for (const old of all.slice(0, Math.max(0, all.length - KEEP)))
        await db.checkpoints.delete([old.runId, old.step]);
      o.log(`saved the parameters at step ${ck.step} (end of epoch ${ck.epoch}) in this browser`);
    },
  };
}
