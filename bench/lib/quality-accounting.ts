// The arithmetic of bench:quality, kept pure so a unit test can hold it: what a peer sent per token it
// trained on and against fp32 gradients, and the data order every method trains in (the union of the
// samples the coordinator assigned the run's peers, step by step).
import { globalBatchSize, type BatchId, type BatchRampConfig } from '@meshtrain/core';

/** Bytes per fp32 value: what data-parallel training sends per parameter per step. */
export const FP32_BYTES = 4;

/** What one peer trained and sent: one entry per result it published. */
export interface PeerResult {
  step: number;
  batch: BatchId;
  /** Bytes of the result frame it sent for that batch. */
  bytes: number;
}

export interface PeerTraffic {
  results: number;
  /** Predicted tokens trained on: rows × seqLen (each row holds seqLen + 1 ids). */
  tokens: number;
  bytes_sent: number;
  bytes_per_token: number;
  /** fp32 data-parallel bytes for the same steps (4 × parameters per step) over the bytes actually sent. */
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
  for (const r of results) {
    tokens += (r.batch.end - r.batch.start + 1) * seqLen;
    bytes += r.bytes;
  }
  return {
    results: results.length,
    tokens,
    bytes_sent: bytes,
    bytes_per_token: bytesPerToken(bytes, tokens),
    ratio_vs_fp32: fp32Ratio(parameters, results.length, bytes),
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
 * The global batches of the first `rounds` training rounds of a run in which every round's batch was
 * trained and attested: consecutive intervals from sample 0, each of the ramp's size at its data index
 * (drain rounds at epoch ends consume no data, so the order does not depend on where epochs end).
 */
export function plannedBatches(ramp: BatchRampConfig, rounds: number): number[][] {
  const out: number[][] = [];
  let index = 0;
  for (let r = 0; r < rounds; r++) {
    const size = globalBatchSize(ramp, index);
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
