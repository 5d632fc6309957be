// What attackers did to a testnet run, epoch by epoch (pure: the relay's round history, the verdicts and
// drops the watcher saw, and the adversaries' own `fabricated` events in; numbers out): their share of the
// results peers applied, how many fabricated results stayed applied, which honest identities were dropped
// or ejected, and the attackers' verdicts and the strikes they took. "Applied" is accounting.ts's: results
// core accepted in rounds peers apply, less those a later confirmed cheat's replay removed.
import { VERIFIERS_PER_RESULT } from '@meshtrain/core';
import { appliedRounds, type RoundHistoryRow } from './accounting.ts';
import type { ObservedCheat, ObservedVerdict } from './watch.ts';

export interface EpochIntegrity {
  epoch: number;
  /** Results core accepted in the epoch's applied rounds, and of those the attackers'. */
  results_accepted: number;
  attacker_results_accepted: number;
  /** Of the accepted, those still applied at the end (a confirmed cheat's are replayed away). */
  results_applied: number;
  attacker_results_applied: number;
  /** attacker_results_applied / results_applied; null when nothing was applied. */
  attacker_share: number | null;
  /** Applied results whose sender said it fabricated them (garbage in the model). */
  fabricated_applied: number;
  /** Honest identities first seen Dropped or Ejected in this epoch, and ejected for the run in it. */
  honest_dropped: number;
  honest_ejected: number;
  /** Verdicts attackers sent on others' results: passes, failures, of which conclusive. */
  attacker_verdicts_pass: number;
  attacker_verdicts_fail: number;
  attacker_verdicts_conclusive: number;
  /** Attackers' results that every verdict on them failed (core's strike), and attackers ejected. */
  attacker_strikes: number;
  /**
   * Attackers' conclusive failures of results a trusted verifier passed: accusations core refutes, each a
   * strike on the accuser (three eject it).
   */
  attacker_accusations_refuted: number;
  attackers_ejected: number;
}

export interface IntegrityInput {
  rows: readonly RoundHistoryRow[];
  cheats: readonly ObservedCheat[];
  verdicts: Iterable<ObservedVerdict>;
  attackers: ReadonlySet<string>;
  honest: ReadonlySet<string>;
  /** The run's trusted verifiers (ids); default none. */
  trusted?: ReadonlySet<string>;
  /** Commitments (hex) of the results adversaries fabricated. */
  fabricated: ReadonlySet<string>;
  /** The epoch each id was first seen Dropped/Ejected in, and ejected for the run in. */
  droppedIn: ReadonlyMap<string, number>;
  ejectedIn: ReadonlyMap<string, number>;
  /** Honest identities whose drop is chaos's doing (killed, then restarted), not the attackers'. */
  killed?: ReadonlySet<string>;
}

function blank(epoch: number): EpochIntegrity {
  return {
    epoch,
    results_accepted: 0,
    attacker_results_accepted: 0,
    results_applied: 0,
    attacker_results_applied: 0,
    attacker_share: null,
    fabricated_applied: 0,
    honest_dropped: 0,
    honest_ejected: 0,
    attacker_verdicts_pass: 0,
    attacker_verdicts_fail: 0,
    attacker_verdicts_conclusive: 0,
    attacker_strikes: 0,
    attacker_accusations_refuted: 0,
    attackers_ejected: 0,
  };
}

/** Per epoch of the history (and of any drop, ejection or verdict seen), in epoch order. */
export function integrityByEpoch(x: IntegrityInput): EpochIntegrity[] {
  const epochs = new Map<number, EpochIntegrity>();
  const of = (epoch: number) => {
    let e = epochs.get(epoch);
    if (!e) epochs.set(epoch, (e = blank(epoch)));
    return e;
  };
  for (const r of x.rows) of(r.epoch);
  const lastHeight = new Map<number, number>();
  for (const r of x.rows) lastHeight.set(r.epoch, Math.max(lastHeight.get(r.epoch) ?? -1, r.height));
  // A cheat confirmed at height ≤ the epoch's last − 1 is replayed out of every applied round of its epoch.
  const removed = (epoch: number, id: string) =>
    x.cheats.some((c) => c.epoch === epoch && c.id === id && c.height <= (lastHeight.get(epoch) ?? 0) - 1);
  for (const r of appliedRounds(x.rows))
    for (const a of r.accepted ?? []) {
      if (a.commitment === null) continue;
      const e = of(r.epoch);
      const client = a.client ?? null;
      const attacker = client !== null && x.attackers.has(client);
      e.results_accepted++;
      if (attacker) e.attacker_results_accepted++;
      if (client !== null && removed(r.epoch, client)) continue;
      e.results_applied++;
      if (attacker) e.attacker_results_applied++;
      if (x.fabricated.has(a.commitment)) e.fabricated_applied++;
    }
  for (const [id, epoch] of x.droppedIn)
    if (x.honest.has(id) && !x.killed?.has(id)) of(epoch).honest_dropped++;
  for (const [id, epoch] of x.ejectedIn) {
    if (x.honest.has(id)) of(epoch).honest_ejected++;
    if (x.attackers.has(id)) of(epoch).attackers_ejected++;
  }
  // A round's epoch as the relay's history has it (the watcher saw the verdict maybe after the epoch ended).
  const epochOfStep = new Map(x.rows.map((r) => [r.step, r.epoch]));
  const byResult = new Map<string, ObservedVerdict[]>();
  for (const seen of x.verdicts) {
    const v = { ...seen, epoch: epochOfStep.get(seen.step) ?? seen.epoch };
    const e = of(v.epoch);
    if (x.attackers.has(v.verifier)) {
      if (v.pass) e.attacker_verdicts_pass++;
      else e.attacker_verdicts_fail++;
      if (v.conclusive) e.attacker_verdicts_conclusive++;
    }
    const key = `${v.step}/${v.trainer}`;
    byResult.set(key, [...(byResult.get(key) ?? []), v]);
  }
  for (const vs of byResult.values()) {
    const first = vs[0] as ObservedVerdict;
    // Core counts a strike once every verifier of the result reported, all failing it.
    if (x.attackers.has(first.trainer) && vs.length >= VERIFIERS_PER_RESULT && vs.every((v) => !v.pass))
      of(first.epoch).attacker_strikes++;
    if (vs.some((v) => v.pass && x.trusted?.has(v.verifier)))
      of(first.epoch).attacker_accusations_refuted += vs.filter(
        (v) => x.attackers.has(v.verifier) && !v.pass && v.conclusive,
      ).length;
  }
  for (const e of epochs.values())
    e.attacker_share = e.results_applied > 0 ? e.attacker_results_applied / e.results_applied : null;
  return [...epochs.values()].sort((a, b) => a.epoch - b.epoch);
}

/** The commitments of every `fabricated` event the adversary processes printed. */
export function fabricatedCommitments(events: readonly { e: { type: string; [k: string]: unknown } }[]) {
  return new Set(events.filter((x) => x.e.type === 'fabricated').map((x) => String(x.e.commitment)));
}
