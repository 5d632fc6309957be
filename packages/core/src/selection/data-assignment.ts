// Which sample indices each trainer trains on in a round (docs/protocol.md "Data assignment"): trainers in
// epoch order are shuffled with Psyche's LCG Fisher–Yates, then handed consecutive closed intervals starting
// at the round's data index, the first `B mod n` trainers getting one sample more than the rest.
import { SelectionError } from './errors.ts';
import { seedToBigInt } from './hex.ts';

/** A closed interval [start, end] of sample indices. Indices stay below 2^53, far beyond any dataset. */
export interface BatchId {
  start: number;
  end: number;
}

const LCG_A = 6364136223846793005n;
const LCG_C = 1442695040888963407n;
const U64 = (1n << 64n) - 1n;

/** Psyche's deterministic_shuffle: a copy of `items` permuted by Fisher–Yates driven by the 64-bit LCG. */
export function lcgShuffle<T>(items: readonly T[], seed: bigint): T[] {
  const out = items.slice();
  let state = seed & U64;
  for (let i = out.length - 1; i >= 1; i--) {
    state = (state * LCG_A + LCG_C) & U64;
    const j = Number(state % BigInt(i + 1));
    const tmp = out[i] as T;
    out[i] = out[j] as T;
    out[j] = tmp;
  }
  return out;
}

function checkCounts(dataIndex: number, batchSize: number): void {
  if (!Number.isSafeInteger(dataIndex) || dataIndex < 0)
    throw new SelectionError(
      'BadArgument',
      `data index must be a non-negative safe integer, got ${dataIndex}`,
    );
  if (!Number.isSafeInteger(batchSize) || batchSize < 0)
    throw new SelectionError('BadArgument', `batch size must be a non-negative integer, got ${batchSize}`);
}

/**
 * The intervals of a round in assignment order, without identities: the k-th of `trainerCount` intervals has
 * `floor(B/n) + (k < B mod n)` samples; empty ones are omitted, so with B < n only B intervals exist.
 */
export function batchIdsForRound(dataIndex: number, batchSize: number, trainerCount: number): BatchId[] {
  checkCounts(dataIndex, batchSize);
  if (trainerCount <= 0) return [];
  const base = Math.floor(batchSize / trainerCount);
  const rem = batchSize % trainerCount;
  const out: BatchId[] = [];
  let next = dataIndex;
  for (let k = 0; k < trainerCount; k++) {
    const size = base + (k < rem ? 1 : 0);
    if (size === 0) break;
    out.push({ start: next, end: next + size - 1 });
    next += size;
  }
  return out;
}

export interface BatchAssignment<T> {
  trainer: T;
  batch: BatchId;
}

/**
 * Assigns the round's samples to `trainers` (given in epoch order); trainers that get nothing are left out.
 * `retries` are intervals of earlier rounds whose results no witness quorum attested (coordinator/retries.ts):
 * the first trainers of the shuffled order take them, one whole interval each, and the trainers after them
 * split the fresh interval [dataIndex, dataIndex + batchSize) as Psyche does. With no retries this is exactly
 * Psyche's assignment. Retries beyond the trainer count are ignored here (the coordinator never stores more).
 */
export function assignBatches<T>(
  trainers: readonly T[],
  randomSeed: string,
  dataIndex: number,
  batchSize: number,
  retries: readonly BatchId[] = [],
): BatchAssignment<T>[] {
  const taken = Math.min(retries.length, trainers.length);
  const batches = [
    ...retries.slice(0, taken),
    ...batchIdsForRound(dataIndex, batchSize, trainers.length - taken),
  ];
  if (batches.length === 0) return [];
  const shuffled = lcgShuffle(trainers, seedToBigInt(randomSeed));
  return batches.map((batch, k) => ({
    trainer: shuffled[k] as T,
    batch: { start: batch.start, end: batch.end },
  }));
}
