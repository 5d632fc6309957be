// What the relay's round history says about the data (pure: rows in, numbers out). Rows are those of
// GET /api/runs/:id: one per coordinator round, with the result core accepted for each batch.

/** A row of the relay's round history (GET /api/runs/:id, newest first, at most 50). */
export interface RoundHistoryRow {
  step: number;
  epoch: number;
  height: number;
  data_index: number;
  training: boolean;
  quorum_reached: boolean | null;
  accepted:
    { batch: { start: number; end: number }; commitment: string | null; client?: string | null }[] | null;
}

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
