// Chart data shapes and the series the pages derive from relay data.
import type { RoundRow, StepReports } from './api.ts';

export interface Series {
  label: string;
  color: string;
  points: readonly (readonly [number, number])[];
}

/** (step, loss) of rounds that reported a loss, oldest first. */
export function lossPoints(rounds: readonly RoundRow[]): [number, number][] {
  return rounds
    .filter((r) => r.loss !== null && Number.isFinite(r.loss))
    .map((r) => [r.step, r.loss as number] as [number, number])
    .sort((a, b) => a[0] - b[0]);
}

/**
 * (step, tokens per second) of finished training rounds: batch × seq_len tokens over the round's duration
 * (the relay records round times in whole unix seconds, so short rounds are coarse).
 */
export function throughputPoints(rounds: readonly RoundRow[], seqLen: number): [number, number][] {
  return rounds
    .filter((r) => r.training && r.ended_at !== null && r.ended_at > r.started_at)
    .map(
      (r) => [r.step, (r.batch_size * seqLen) / ((r.ended_at as number) - r.started_at)] as [number, number],
    )
    .sort((a, b) => a[0] - b[0]);
}

/**
 * (step, figure) of the witnesses' measured reports, oldest first: `tokens_per_sec`, or `bandwidth` in KiB/s.
 * Each point is the mean over the clients that reported for that step.
 */
export function reportPoints(
  reports: readonly StepReports[],
  figure: 'tokens_per_sec' | 'bandwidth',
): [number, number][] {
  const scale = figure === 'bandwidth' ? 1 / 1024 : 1;
  return reports
    .filter((r) => Number.isFinite(r[figure]))
    .map((r) => [r.step, r[figure] * scale] as [number, number])
    .sort((a, b) => a[0] - b[0]);
}
