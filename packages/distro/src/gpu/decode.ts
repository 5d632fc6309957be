// Decoding results into tensors on the WGSL backend: the peer's own residual (a float kernel) and the exact
// integer apply of an aggregate (bit-identical to the CPU reference on every device).
import type { AggregatedTensor } from '../aggregate.ts';
import type { DistroTensor } from '../backend.ts';
import type { UpdateScalars } from '../exact-update.ts';
import { DistroShapeError, sameShape } from '../layout.ts';
import { checkResult, type TensorResult } from '../result.ts';
import type { GpuContext } from './context.ts';
import { perSegmentWith, recordPerSegment } from './dispatch.ts';
import { bitsOf, type GpuOp } from './op.ts';
import { asGpu, type GpuTensor } from './tensor.ts';
import { deviceAggregateFits, hostBounds, recordBlockAggregate, type BlockLists } from './aggregate.ts';
import * as W from './wgsl.ts';

export function subtractResidual(ctx: GpuContext, delta: DistroTensor, own: TensorResult): void {
  const t = asGpu(delta);
  const l = t.layout;
  checkResult(own, l, 'own result');
  const idx = ctx.input('residual-idx', own.indices);
  const val = ctx.input('residual-val', own.values);
  const basis = ctx.basisPair(l.n1, l.n2, 'float');
  perSegmentWith(
    ctx,
    W.RESIDUAL,
    t,
    (p) => [l.cols, l.n1, l.n2, l.blocksX, own.k, p.seg.firstRow, 0, basis.off2],
    [idx, val, basis.buffer],
  );
}

/** The exact apply of per-block lists into every segment of `t`, recorded into `o`. */
function recordApply(
  ctx: GpuContext,
  o: GpuOp,
  t: GpuTensor,
  lists: Omit<BlockLists, 'shift'>,
  u: UpdateScalars,
): void {
  const l = t.layout;
  const basis = ctx.basisPair(l.n1, l.n2, 'int');
  recordPerSegment(
    ctx,
    o,
    W.APPLY,
    t,
    (p) => [l.cols, l.n1, l.n2, l.blocksX, p.seg.firstRow, 0, basis.off2, bitsOf(u.factor), bitsOf(u.step)],
    [lists.bounds, lists.coef, lists.mean, basis.buffer],
  );
}

export function applyAggregated(
  ctx: GpuContext,
  param: DistroTensor,
  agg: AggregatedTensor,
  u: UpdateScalars,
): void {
  const t = asGpu(param);
  if (!sameShape(agg.layout.xshape, t.layout.xshape))
    throw new DistroShapeError('aggregate was built for another layout');
  const lists = {
    bounds: ctx.input('apply-bounds', hostBounds(agg.blockStart)),
    coef: ctx.input('apply-coef', agg.coef),
    mean: ctx.input('apply-mean', agg.mean),
  };
  const o = ctx.op();
  recordApply(ctx, o, t, lists, u);
  o.submit();
}

/**
 * `applyAggregated` of the peers' results (checked by the caller), aggregated on the device in the same
 * submit; false, changing nothing, when they do not fit the device's aggregate (aggregate.ts).
 */
export function applyResultsOnDevice(
  ctx: GpuContext,
  param: DistroTensor,
  results: readonly TensorResult[],
  u: UpdateScalars,
): boolean {
  const t = asGpu(param);
  if (!deviceAggregateFits(ctx, t.layout, results)) return false;
  const o = ctx.op();
  recordApply(ctx, o, t, recordBlockAggregate(ctx, o, t.layout, results, 'senders'), u);
  o.submit();
  return true;
}
