// The arithmetic of bench:quality, kept pure so a unit test can hold it: what a peer sent per token it
// trained on and against fp32 gradients, and the data order every method trains in (the union of the
// samples the coordinator assigned the run's peers, optimizer step by optimizer step: a DisTrO round is one
// step, a SparseLoCo round H inner steps, each the union of the trainers' h-th inner batches).
import { innerBatches, roundBatchSize, type BatchId, type BatchRampConfig } from '@meshtrain/core';

/** Bytes per fp32 value: what data-parallel training sends per parameter per step. */
export const FP32_BYTES = 4;

/** What one peer trained and sent: one entry per result it published. */
export interface PeerResult {
  step: number;
  batch: BatchId;
  /** Bytes of the result frame it sent for that batch. */
  bytes: number;
  /**
   * Optimizer steps the result covers: 1 for DisTrO, SparseLoCo's inner steps (H, fewer for an interval of
   * fewer than H samples). An fp32 data-parallel peer would have sent one gradient per step.
   */
  innerSteps: number;
}

export interface PeerTraffic {
  results: number;
  /** Optimizer steps the results cover (the sum of their innerSteps). */
  optimizer_steps: number;
  /** Predicted tokens trained on: rows × seqLen (each row holds seqLen + 1 ids). */
  tokens: number;
  bytes_sent: number;
  bytes_per_token: number;
  /**
   * fp32 data-parallel bytes for the same optimizer steps (4 × parameters per step) over the bytes actually
   * sent. The tokens are those of the result's interval, all H inner batches of it, so bytes_per_token needs
   * no such factor.
   */
  ratio_vs_fp32: number;
}

export function bytesPerToken(bytes: number, tokens: number): number {
  if (!(tokens > 0)) throw new RangeError(`no tokens trained (${tokens})`);
  return bytes / tokens;
}

/** 4 bytes × `parameters` for each of `steps` steps, divided by `bytesSent`. */
export function fp32Ratio(parameters: number, steps: number, bytesSent: number): number {
  if (!(bytesSent > 0)) throw new RangeError(`nothing sent (${bytesSent} bytes)`);
  return (FP32_BYTES * parameters * steps) / bytesSent;
}

export function peerTraffic(results: readonly PeerResult[], seqLen: number, parameters: number): PeerTraffic {
  let tokens = 0;
  let bytes = 0;
  let steps = 0;
  for (const r of results) {
    tokens += (r.batch.end - r.batch.start + 1) * seqLen;
    bytes += r.bytes;
    steps += r.innerSteps;
  }
  return {
    results: results.length,
    optimizer_steps: steps,
    tokens,
    bytes_sent: bytes,
    bytes_per_token: bytesPerToken(bytes, tokens),
    ratio_vs_fp32: fp32Ratio(parameters, steps, bytes),
  };
}

/**
 * The global batch of every trained step: the union of the intervals the peers trained in that step, as
 * sorted sample ids, steps in ascending order. Throws if two peers trained the same sample in one step.
 */
export function globalBatches(trained: readonly { step: number; batch: BatchId }[]): number[][] {
  const bySteps = new Map<number, number[]>();
  for (const { step, batch } of trained) {
    const ids = bySteps.get(step) ?? [];
    for (let i = batch.start; i <= batch.end; i++) ids.push(i);
    bySteps.set(step, ids);
  }
  return [...bySteps.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([step, ids]) => {
      ids.sort((a, b) => a - b);
      for (let i = 1; i < ids.length; i++)
        if (ids[i] === ids[i - 1]) throw new Error(`step ${step}: sample ${ids[i]} was trained twice`);
      return ids;
    });
}

/**
 * The global batch of every optimizer step of a SparseLoCo run with `innerSteps` = H: each trained round
 * step's intervals cut into their inner batches (core's innerBatches), inner step h's batch the union of the
 * trainers' h-th inner batches, as sorted sample ids; rounds in ascending order, inner steps in order. This is
 * what the trainers trained in parallel at each inner step (bench/sparseloco.ts compares AdamW the same way:
 * its step takes every peer's batch of that inner step). With H = 1 it is globalBatches.
 */
export function innerStepBatches(
  trained: readonly { step: number; batch: BatchId }[],
  innerSteps: number,
): number[][] {
  const cut = trained.flatMap(({ step, batch }) =>
    innerBatches(batch, innerSteps).map((b, h) => ({ step: step * innerSteps + h, batch: b })),
  );
  return globalBatches(cut);
}

/**
 * The global batches of the first `rounds` training rounds of a run in which every round's batch was
 * trained and attested: consecutive intervals from sample 0, each of the round's size at its data index
 * (the ramp's, × inner_steps for SparseLoCo; drain rounds at epoch ends consume no data, so the order does
 * not depend on where epochs end).
 */
export function plannedBatches(ramp: BatchRampConfig, rounds: number): number[][] {
  const out: number[][] = [];
  let index = 0;
  for (let r = 0; r < rounds; r++) {
    const size = roundBatchSize(ramp, index);
    out.push(Array.from({ length: size }, (_, i) => index + i));
    index += size;
  }
  return out;
}

export function sameBatches(a: readonly (readonly number[])[], b: readonly (readonly number[])[]): boolean {
  return (
    a.length === b.length && a.every((x, i) => x.length === b[i]!.length && x.every((v, j) => v === b[i]![j]))
  );
}

/**
 * `batches` as steps of exactly `size` samples each, for single-process AdamW (its train step takes one batch
 * size): unchanged when every batch already has that size. Otherwise (a retried interval trained in a later
 * round, or SparseLoCo trainers whose intervals are not multiples of H, so inner steps differ by a sample or
 * two) the same samples in the same sequence, cut anew every `size`: each sample moves by at most the size
 * difference, and a tail of fewer than `size` samples is left out (`dropped`).
 */
export function equalBatches(
  batches: readonly (readonly number[])[],
  size: number,
): { batches: number[][]; recut: boolean; dropped: number } {
  if (batches.every((b) => b.length === size))
    return { batches: batches.map((b) => [...b]), recut: false, dropped: 0 };
  const all = batches.flat();
  const out: number[][] = [];
  for (let i = 0; i + size <= all.length; i += size) out.push(all.slice(i, i + size));
  return { batches: out, recut: true, dropped: all.length % size };
}
