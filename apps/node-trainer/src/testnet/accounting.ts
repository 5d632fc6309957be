// What the relay's round history says about the data (pure: rows in, numbers out). Rows are those of
// GET /api/runs/:id: one per coordinator round, with the result core accepted for each batch.

import type { AcceptedBatch, RoundRow } from '@meshtrain/client/relay-api';

/**
 * The fields of the relay's round history rows (RoundRow of GET /api/runs/:id, newest first, at most 50) that
 * the accounting reads: the API's own field types, so a change there fails here; a subset, so tests build rows.
 */
export type RoundHistoryRow = Pick<
  RoundRow,
  'step' | 'epoch' | 'height' | 'data_index' | 'training' | 'quorum_reached'
> & {
  accepted: (Pick<AcceptedBatch, 'batch' | 'commitment'> & Partial<Pick<AcceptedBatch, 'client'>>)[] | null;
};

export interface DataAccounting {
  /** Batches the coordinator handed out again because no witness quorum attested their first result. */
  batches_retried: number;
  /** Batches of applied rounds whose samples no applied result ever covered; null without full history. */
  batches_lost: number | null;
  /** Sample indices applied more than once; null without full history. */
  samples_applied_twice: number | null;
}

/** Rows of rounds whose results peers applied: every round of an epoch but its last two. */
export function appliedRounds(rows: readonly RoundHistoryRow[]): RoundHistoryRow[] {
  const lastHeight = new Map<number, number>();
  for (const r of rows) lastHeight.set(r.epoch, Math.max(lastHeight.get(r.epoch) ?? -1, r.height));
  return rows.filter((r) => r.height < (lastHeight.get(r.epoch) ?? 0) - 1);
}

/**
 * Retried and lost batches from the relay's round history. A round's accepted rows are core's
 * acceptedCommitments for it (retries included); an interval that starts before the round's data_index is a
 * retry (core assigns retries, always older samples, ahead of the fresh data). Peers apply every round of an
 * epoch but its last two (their fresh samples are rewound, their retries requeued), so counting the accepted
 * results of the other rounds says whether each sample was applied exactly once.
 */
export function dataAccounting(rows: readonly RoundHistoryRow[]): DataAccounting {
  const applied = appliedRounds(rows);
  let retried = 0;
  for (const r of rows) for (const a of r.accepted ?? []) if (a.batch.start < r.data_index) retried++;
  // Without the run's first round the samples before the history are unknown.
  if (!rows.some((r) => r.step === 1))
    return { batches_retried: retried, batches_lost: null, samples_applied_twice: null };
  const count = new Map<number, number>();
  for (const r of applied)
    for (const a of r.accepted ?? [])
      if (a.commitment !== null)
        for (let i = a.batch.start; i <= a.batch.end; i++) count.set(i, (count.get(i) ?? 0) + 1);
  let lost = 0;
  for (const r of applied)
    for (const a of r.accepted ?? []) {
      if (a.commitment !== null) continue;
      for (let i = a.batch.start; i <= a.batch.end; i++)
        if (!count.has(i)) {
          lost++;
          break;
        }
    }
  let twice = 0;
  for (const n of count.values()) if (n > 1) twice++;
  return { batches_retried: retried, batches_lost: lost, samples_applied_twice: twice };
}

export interface CheaterAccounting {
  /** Adversaries' results core accepted in rounds that peers applied. */
  accepted: number;
  /** Of those, the ones still applied at the end (not removed by a confirmed cheat's replay). */
  applied: number;
}

/**
 * What the adversaries' results finally did to the model. Core accepts a result of round h for everyone to
 * apply at the start of round h+2 unless its trainer is a confirmed cheat by then (queries.excludedClients);
 * a cheat confirmed later is removed from every round of its epoch that was applied before, by a replay from
 * the epoch's start (queries.replayExclusions) — which happens when the round before the confirmation is
 * applied, so only for a confirmation at height ≤ the epoch's last height − 1 (its last two rounds are never
 * applied). So an adversary's accepted result in an applied round stays applied unless the same identity was
 * confirmed a cheat in that epoch early enough. An adversary ejected for something else (equivocation) is not
 * a confirmed cheat: its results admitted before the ejection stay accepted.
 */
export function cheaterAccounting(
  rows: readonly RoundHistoryRow[],
  adversaries: ReadonlySet<string>,
  cheats: readonly { epoch: number; id: string; height: number }[],
): CheaterAccounting {
  const lastHeight = new Map<number, number>();
  for (const r of rows) lastHeight.set(r.epoch, Math.max(lastHeight.get(r.epoch) ?? -1, r.height));
  const removed = (epoch: number, id: string) =>
    cheats.some((c) => c.epoch === epoch && c.id === id && c.height <= (lastHeight.get(epoch) ?? 0) - 1);
  let accepted = 0;
  let applied = 0;
  for (const r of appliedRounds(rows))
    for (const a of r.accepted ?? []) {
      if (a.commitment === null || !a.client || !adversaries.has(a.client)) continue;
      accepted++;
      if (!removed(r.epoch, a.client)) applied++;
    }
  return { accepted, applied };
}
