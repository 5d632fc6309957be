// This browser's record of its contribution to a run, in IndexedDB (Dexie table `metrics`): the worker restores it
// when the volunteer comes back (a reload, a new visit) so the page keeps showing the batches, bytes and loss
// history the tab had, and keeps counting from there. Writes are coalesced (at most one in flight, the newest
// stats win); an IndexedDB failure logs one line and turns saving off, never training.
import type { StoredMetrics } from '../lib/db.ts';
import { meshtrainDb } from '../lib/db.ts';
import { SAVED_STATS } from './protocol.ts';
import type { SavedStats, TrainerStats } from './protocol.ts';

/** Loss points kept (the page's chart shows the newest 500 too). */
const KEEP_LOSSES = 500;

export interface LocalMetrics {
  load(): Promise<SavedStats | null>;
  /** Queues a write of these stats (coalesced with writes already queued). */
  save(stats: TrainerStats): void;
}

export function localMetrics(runId: string, clientId: string, log: (line: string) => void): LocalMetrics {
  let disabled = false;
  let pending: StoredMetrics | null = null;
  let writing: Promise<void> | null = null;
  let lastWritten = '';

  function fail(e: unknown): void {
    if (disabled) return;
    disabled = true;
    log(
      `local metrics not saved in this browser (IndexedDB failed: ${e instanceof Error ? e.message : String(e)})`,
    );
  }

  async function drain(): Promise<void> {
    while (pending && !disabled) {
      const row = pending;
      pending = null;
      const key = JSON.stringify({ ...row, updatedAt: 0 });
      if (key === lastWritten) continue;
      try {
        await meshtrainDb().metrics.put(row);
        lastWritten = key;
      } catch (e) {
        fail(e);
      }
    }
  }

  /** One writer at a time; `writing` is cleared only after the writer settled, then restarted if needed. */
  function kick(): void {
    if (writing || disabled) return;
    writing = drain().finally(() => {
      writing = null;
      if (pending) kick();
    });
  }

  return {
    async load() {
      try {
        const row = await meshtrainDb().metrics.get([runId, clientId]);
        if (!row) return null;
        const { runId: _r, clientId: _c, updatedAt: _u, ...saved } = row;
        return saved;
      } catch (e) {
        fail(e);
        return null;
      }
    },
    save(stats) {
      if (disabled) return;
      const saved = Object.fromEntries(SAVED_STATS.map((k) => [k, stats[k]])) as SavedStats;
      pending = {
        ...saved,
        losses: stats.losses.slice(-KEEP_LOSSES),
        runId,
        clientId,
        updatedAt: Date.now(),
      };
      kick();
    },
  };
}
