// Peers' results aggregated on the device (aggregate-wgsl.ts) into the per-block lists the exact apply kernels
// read, recorded into the caller's operation so aggregate and apply go out in one submit. The host's
// aggregate (aggregate.ts) becomes the same lists through `hostBounds`.
import type { BlockLayout } from '../layout.ts';
import type { TensorResult } from '../result.ts';
import { FUSED_MAX_PEERS, FUSED_TOTALK } from './aggregate-wgsl.ts';
import * as A from './aggregate-wgsl.ts';
import { COPY_DST, grid, STORAGE, type GpuContext } from './context.ts';
import type { GpuOp } from './op.ts';
import { whole } from './tensor.ts';

/** The per-block lists an apply kernel binds: entries [bounds[2b], bounds[2b + 1]) of coef/mean are block b's. */
export interface BlockLists {
  bounds: GPUBuffer;
  coef: GPUBuffer;
  mean: GPUBuffer;
  /** Per block, the fixed point's shift (value = mean·2^−shift). */
  shift: GPUBuffer;
}

/**
 * Whether the device can aggregate `results` for a tensor of layout `l`: a block within workgroup memory, at
 * most FUSED_MAX_PEERS results of one k, each naming a coordinate at most once per chunk (so no coordinate
 * gets more entries than there are results, which the kernels' integer fields are sized for; top-k never
 * repeats one, a hostile peer may), and their entries (kept several times over) within one binding.
 */
export function deviceAggregateFits(
  ctx: GpuContext,
  l: BlockLayout,
  results: readonly TensorResult[],
): boolean {
  const k = results[0]?.k ?? 0;
  if (results.length === 0 || results.length > FUSED_MAX_PEERS || l.totalk > FUSED_TOTALK) return false;
  if (results.some((r) => r.k !== k || r.indices.length !== l.blocks * k || r.values.length !== l.blocks * k))
    return false;
  const lim = ctx.device.limits;
  if (2 * results.length * l.blocks * k * 4 > Math.min(lim.maxStorageBufferBindingSize, lim.maxBufferSize))
    return false;
  const seen = new Int32Array(l.totalk).fill(-1);
  let chunk = 0;
  for (const r of results)
    for (let b = 0; b < l.blocks; b++, chunk++)
      for (let j = b * k; j < (b + 1) * k; j++) {
        const c = r.indices[j] as number;
        if (seen[c] === chunk) return false;
        seen[c] = chunk;
      }
  return true;
}

/**
 * The peers' entries in two kept buffers, peer-major (entry t of peer p for block b at p·blocks·k + b·k + t):
 * in-block indices and value bits.
 */
export function uploadEntries(
  ctx: GpuContext,
  results: readonly TensorResult[],
): { idx: GPUBuffer; val: GPUBuffer; perPeer: number } {
  const perPeer = results[0]?.indices.length ?? 0;
  const bytes = results.length * perPeer * 4;
  const idx = ctx.keep('peers-idx', bytes, STORAGE | COPY_DST);
  const val = ctx.keep('peers-val', bytes, STORAGE | COPY_DST);
  results.forEach((r, p) => {
    ctx.device.queue.writeBuffer(idx, p * perPeer * 4, r.indices.buffer, r.indices.byteOffset, perPeer * 4);
    ctx.device.queue.writeBuffer(val, p * perPeer * 4, r.values.buffer, r.values.byteOffset, perPeer * 4);
  });
  return { idx, val, perPeer };
}

/**
 * Records aggregate.ts's aggregateTensor of `results` (checked by the caller, `deviceAggregateFits` true) into
 * `o`: one workgroup per block, every block of the tensor. The lists stay on the device for the apply kernel
 * recorded after it.
 */
export function recordBlockAggregate(
  ctx: GpuContext,
  o: GpuOp,
  l: BlockLayout,
  results: readonly TensorResult[],
  divideBy: 'senders' | 'results',
): BlockLists {
  const k = (results[0] as TensorResult).k;
  const { idx, val, perPeer } = uploadEntries(ctx, results);
  const entries = results.length * perPeer;
  const lists: BlockLists = {
    bounds: ctx.keep('agg-bounds', 8 * l.blocks, STORAGE),
    coef: ctx.keep('agg-coef', 4 * entries, STORAGE),
    mean: ctx.keep('agg-mean', 4 * entries, STORAGE),
    shift: ctx.keep('agg-shift', 4 * l.blocks, STORAGE),
  };
  const scratch = ctx.keep('agg-scratch', 4 * entries, STORAGE);
  const g = grid(l.blocks);
  const quantized = results[0]?.quantized ? 1 : 0;
  o.add(
    A.AGGREGATE_BLOCKS,
    [0, l.blocks, g.x, k, results.length, perPeer, quantized, divideBy === 'results' ? 1 : 0],
    [idx, val, scratch, lists.coef, lists.mean, lists.bounds, lists.shift].map(whole),
    g,
  );
  return lists;
}

/** The host's aggregate as the same lists: CSR offsets become (first, end) per block. */
export function hostBounds(blockStart: Uint32Array): Uint32Array {
  const blocks = blockStart.length - 1;
  const out = new Uint32Array(2 * blocks);
  for (let b = 0; b < blocks; b++) {
    out[2 * b] = blockStart[b] as number;
    out[2 * b + 1] = blockStart[b + 1] as number;
  }
  return out;
}
