// SparseLoCo rounds (docs/protocol.md "SparseLoCo rounds"): a trainer's interval holds H inner steps' worth
// of samples and is trained as H consecutive inner batches. Verifiers recompute the first inner step, so
// where the inner batches start is protocol, not a client's choice.
import type { BatchId } from './data-assignment.ts';

/**
 * The inner batches of `batch` for `innerSteps` = H steps: consecutive, in order, covering it exactly, sizes
 * ⌊n/H⌋ + 1 for the first n mod H and ⌊n/H⌋ for the rest (n = its sample count). An interval of fewer than
 * H samples gives n one-sample batches (fewer inner steps); an empty one none.
 */
export function innerBatches(batch: BatchId, innerSteps: number): BatchId[] {
  if (!Number.isSafeInteger(innerSteps) || innerSteps < 1)
    throw new RangeError(`inner steps must be a positive integer, got ${innerSteps}`);
  const n = batch.end - batch.start + 1;
  if (n <= 0) return [];
  const steps = Math.min(innerSteps, n);
  const base = Math.floor(n / steps);
  const longer = n % steps;
  const out: BatchId[] = [];
  let start = batch.start;
  for (let h = 0; h < steps; h++) {
    const size = base + (h < longer ? 1 : 0);
    out.push({ start, end: start + size - 1 });
    start += size;
  }
  return out;
}
