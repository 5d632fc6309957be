// Decoding results into tensors on the WGSL backend: the peer's own residual (a float kernel) and the exact
// integer apply of an aggregate (bit-identical to the CPU reference on every device).
import type { AggregatedTensor } from '../aggregate.ts';
import type { DistroTensor } from '../backend.ts';
import type { UpdateScalars } from '../exact-update.ts';
import { DistroShapeError, sameShape } from '../layout.ts';
import { checkResult, type TensorResult } from '../result.ts';
import type { GpuContext } from './context.ts';
import { bitsOf } from './op.ts';
import { asGpu, bind, whole } from './tensor.ts';
import * as W from './wgsl.ts';

export function subtractResidual(ctx: GpuContext, delta: DistroTensor, own: TensorResult): void {
  const t = asGpu(delta);
  const l = t.layout;
  checkResult(own, l, 'own result');
  const idx = ctx.input('residual-idx', own.indices);
  const val = ctx.input('residual-val', own.values);
  const basis = ctx.basisPair(l.n1, l.n2, 'float');
  const o = ctx.op();
  for (const p of t.parts)
    ctx.elementwise(
      o,
      W.RESIDUAL,
      p.seg.elements,
      [l.cols, l.n1, l.n2, l.blocksX, own.k, p.seg.firstRow, 0, basis.off2],
      [bind(p), whole(idx), whole(val), whole(basis.buffer)],
    );
  o.submit();
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
  const o = ctx.op();
  for (const p of t.parts)
    ctx.elementwise(
      o,
      W.APPLY,
      p.seg.elements,
      [l.cols, l.n1, l.n2, l.blocksX, p.seg.firstRow, 0, basis.off2, bitsOf(u.factor), bitsOf(u.step)],
      [bind(p), whole(starts), whole(coef), whole(mean), whole(basis.buffer)],
    );
  o.submit();
}
