// Decoding results into tensors on the WGSL backend: the peer's own residual (a float kernel) and the exact
// integer apply of an aggregate (bit-identical to the CPU reference on every device).
import type { AggregatedTensor } from '../aggregate.ts';
import type { DistroTensor } from '../backend.ts';
import type { UpdateScalars } from '../exact-update.ts';
import { DistroShapeError, sameShape } from '../layout.ts';
import { checkResult, type TensorResult } from '../result.ts';
import type { GpuContext } from './context.ts';
import { bitsOf } from './op.ts';
import { perSegmentWith } from './dispatch.ts';
import { asGpu } from './tensor.ts';
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

export function applyAggregated(
  ctx: GpuContext,
  param: DistroTensor,
  agg: AggregatedTensor,
  u: UpdateScalars,
): void {
  const t = asGpu(param);
  const l = t.layout;
  if (!sameShape(agg.layout.xshape, l.xshape))
    throw new DistroShapeError('aggregate was built for another layout');
  const starts = ctx.input('apply-starts', agg.blockStart);
  const coef = ctx.input('apply-coef', agg.coef);
  const mean = ctx.input('apply-mean', agg.mean);
  const basis = ctx.basisPair(l.n1, l.n2, 'int');
  perSegmentWith(
    ctx,
    W.APPLY,
    t,
    (p) => [l.cols, l.n1, l.n2, l.blocksX, p.seg.firstRow, 0, basis.off2, bitsOf(u.factor), bitsOf(u.step)],
    [starts, coef, mean, basis.buffer],
  );
}
