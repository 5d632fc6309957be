// Watches the run through the relay's API (GET /api/runs/:id?state=1, once a second) and keeps what the
// summary needs beyond the final answer: the round history merged across polls (the API returns the newest
// 50 rounds), each epoch's confirmed cheats (the coordinator forgets them when the next epoch starts), and
// every client's epoch states as they were seen.
import { fetchRunInfo, type RunDetail } from '@meshtrain/client/relay-api';
import type { RoundHistoryRow } from './accounting.ts';

/** A trainer whose cheating two verifiers confirmed in `epoch`, at round height `height`. */
export interface ObservedCheat {
  epoch: number;
  id: string;
  height: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class RunWatcher {
  runState = 'unknown';
  progressStep = 0;
  /** The newest answer (round history, hashes, state). */
  latest: RunDetail | null = null;
  readonly rounds = new Map<number, RoundHistoryRow>();
  readonly cheats: ObservedCheat[] = [];
  /** Ids ever seen Dropped or Ejected in an epoch. */
  readonly dropped = new Set<string>();
  /** Ids ever seen as members or epoch clients: who got in. */
  readonly seen = new Set<string>();
  /** Per epoch end seen (Cooldown), its designated checkpoint uploader: the first voter (Healthy client). */
  readonly uploaders = new Map<number, string>();
  private readonly relayUrl: string;
  private readonly runId: string;

  constructor(relayUrl: string, runId: string) {
    this.relayUrl = relayUrl;
    this.runId = runId;
  }

  get ejected(): Set<string> {
    return new Set(this.latest?.state?.ejected ?? []);
  }

  /** Asks the relay once; false when it did not answer (busy or restarting). */
  async poll(): Promise<boolean> {
    let r: RunDetail;
    try {
      r = await fetchRunInfo(this.relayUrl, this.runId, { withState: true });
    } catch {
      return false;
    }
    this.latest = r;
    this.runState = r.run.run_state;
    this.progressStep = r.run.step;
    for (const row of r.rounds) this.rounds.set(row.step, row);
    const s = r.state;
    if (s) {
      for (const m of s.members) this.seen.add(m.id);
      for (const c of s.epoch.clients) this.seen.add(c.id);
      for (const c of s.epoch.clients)
        if (c.state === 'Dropped' || c.state === 'Ejected') this.dropped.add(c.id);
      const first = s.epoch.clients.find((c) => c.state === 'Healthy');
      if (s.run_state === 'Cooldown' && first && !this.uploaders.has(s.progress.epoch))
        this.uploaders.set(s.progress.epoch, first.id);
      for (const c of s.epoch.cheats ?? []) {
        const id = s.epoch.clients[c.client_index]?.id;
        if (id && !this.cheats.some((x) => x.epoch === s.progress.epoch && x.id === id))
          this.cheats.push({ epoch: s.progress.epoch, id, height: c.height });
      }
    }
    return true;
  }

  /** Polls once a second until `done()` holds or `deadline` (ms since the epoch) passes; true if it held. */
  async until(done: (w: RunWatcher) => boolean, deadline: number): Promise<boolean> {
    for (;;) {
      await this.poll();
      if (done(this)) return true;
      if (Date.now() > deadline) return false;
      await sleep(1000);
    }
  }

  /** The round history, oldest first, as merged across polls. */
  history(): RoundHistoryRow[] {
    return [...this.rounds.values()].sort((a, b) => a.step - b.step);
  }
}
