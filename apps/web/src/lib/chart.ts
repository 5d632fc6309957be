// Chart data shapes and the series the pages derive from relay data.
import type { RoundRecord } from './api.ts';

export interface Series {
  label: string;
  color: string;
  points: readonly (readonly [number, number])[];
}

/** (step, loss) of rounds that reported a loss, oldest first. */
export function lossPoints(rounds: readonly RoundRecord[]): [number, number][] {
  return rounds
    .filter((r) => r.loss !== null && Number.isFinite(r.loss))
    .map((r) => [r.step, r.loss as number] as [number, number])
    .sort((a, b) => a[0] - b[0]);
}

/**
 * (step, tokens per second) of finished training rounds: batch × seq_len tokens over the round's duration
 * (the relay records round times in whole unix seconds, so short rounds are coarse).
 */
export function throughputPoints(rounds: readonly RoundRecord[], seqLen: number): [number, number][] {
  return rounds
    .filter((r) => r.training && r.ended_at !== null && r.ended_at > r.started_at)
    .map(
      (r) => [r.step, (r.batch_size * seqLen) / ((r.ended_at as number) - r.started_at)] as [number, number],
    )
    .sort((a, b) => a[0] - b[0]);
}
