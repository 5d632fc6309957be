// Watches the run through the relay's API (GET /api/runs/:id?state=1, once a second) and keeps what the
// summary needs beyond the final answer: the round history merged across polls (the API returns the newest
// 50 rounds), each epoch's confirmed cheats (the coordinator forgets them when the next epoch starts), and
// every client's epoch states as they were seen, and every verdict (the state keeps a round's verdicts only
// while the round is in its ring of four).
import { fetchRunInfo, type RunDetail } from '@meshtrain/client/relay-api';
import { currentRound, roundAssignments, roundAtHeight, type CoordinatorState } from '@meshtrain/core';
import type { RoundHistoryRow } from './accounting.ts';

/** A trainer whose cheating two verifiers confirmed in `epoch`, at round height `height`. */
export interface ObservedCheat {
  epoch: number;
  id: string;
  height: number;
}

/** One verifier's verdict on one result, as the coordinator recorded it. */
export interface ObservedVerdict {
  epoch: number;
  step: number;
  /** The result's trainer and its verifier (ids). */
  trainer: string;
  verifier: string;
  pass: boolean;
  conclusive: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The verdicts recorded in the current epoch's rounds that `s` still holds (the ring may keep older epochs'
 * rounds, whose slots name other clients), keyed by step, slot and verifier so repeated polls count each once.
 */
export function verdictsOf(s: CoordinatorState): Map<string, ObservedVerdict> {
  const out = new Map<string, ObservedVerdict>();
  // Between epochs the ring's head is the last epoch's round while epoch.clients may be the next one's.
  if (s.run_state !== 'RoundTrain' && s.run_state !== 'RoundWitness' && s.run_state !== 'Cooldown')
    return out;
  const cur = currentRound(s);
  if (!cur) return out;
  for (let h = Math.max(0, cur.height - 3); h <= cur.height; h++) {
    const round = roundAtHeight(s, h);
    if (!round?.verdicts?.length) continue;
    const slots = roundAssignments(s, round);
    for (const v of round.verdicts) {
      const trainer = slots[v.slot]?.id;
      const verifier = s.epoch.clients[v.by]?.id;
      if (!trainer || !verifier) continue;
      out.set(`${round.step}/${v.slot}/${verifier}`, {
        epoch: s.progress.epoch,
        step: round.step,
        trainer,
        verifier,
        pass: v.pass,
        conclusive: v.conclusive === true,
      });
    }
  }
  return out;
}

export class RunWatcher {
  runState = 'unknown';
  progressStep = 0;
  /** The newest answer (round history, hashes, state). */
  latest: RunDetail | null = null;
  readonly rounds = new Map<number, RoundHistoryRow>();
  readonly cheats: ObservedCheat[] = [];
  /** Ids ever seen Dropped or Ejected in an epoch. */
  readonly dropped = new Set<string>();
  /** The epoch each id was first seen Dropped or Ejected in, and the epoch each id was seen ejected at. */
  readonly droppedIn = new Map<string, number>();
  readonly ejectedIn = new Map<string, number>();
  /** Every verdict seen (verdictsOf's keys). */
  readonly verdicts = new Map<string, ObservedVerdict>();
  /** Ids ever seen as members or epoch clients: who got in. */
  readonly seen = new Set<string>();
  /** Every distinct run-level trust warning the relay gave (core's trustWarning), in the order first seen. */
  readonly trustWarnings: string[] = [];
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
    const warning = r.run.trust_warning;
    if (warning && !this.trustWarnings.includes(warning)) this.trustWarnings.push(warning);
    const s = r.state;
    if (s) {
      for (const m of s.members) this.seen.add(m.id);
      for (const c of s.epoch.clients) this.seen.add(c.id);
      for (const c of s.epoch.clients)
        if (c.state === 'Dropped' || c.state === 'Ejected') {
          this.dropped.add(c.id);
          if (!this.droppedIn.has(c.id)) this.droppedIn.set(c.id, s.progress.epoch);
        }
      for (const id of s.ejected) if (!this.ejectedIn.has(id)) this.ejectedIn.set(id, s.progress.epoch);
      for (const [k, v] of verdictsOf(s)) if (!this.verdicts.has(k)) this.verdicts.set(k, v);
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
