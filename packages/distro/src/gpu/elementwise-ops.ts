// DisTrO's per-element float kernels on the WGSL backend (momentum, scale, the sign step) and the norm's
// partial sums, one dispatch per segment, all of an operation in one submit.
import type { DistroTensor } from '../backend.ts';
import { checkSameShapes } from '../layout.ts';
import { COPY_SRC, grid, STORAGE, type GpuContext } from './context.ts';
import { bitsOf } from './op.ts';
import { asGpu, bind, whole, type Part } from './tensor.ts';
import * as W from './wgsl.ts';

export function momentum(
  ctx: GpuContext,
  delta: DistroTensor,
  grad: DistroTensor,
  decay: number,
  lr: number,
): void {
  checkSameShapes(delta, grad);
  const gp = asGpu(grad).parts;
  const o = ctx.op();
  asGpu(delta).parts.forEach((p, i) =>
    ctx.elementwise(
      o,
      W.MOMENTUM,
      p.seg.elements,
      [bitsOf(decay), bitsOf(lr)],
      [bind(p), bind(gp[i] as Part)],
    ),
  );
  o.submit();
}

export function scale(ctx: GpuContext, t: DistroTensor, factor: number): void {
  const o = ctx.op();
  for (const p of asGpu(t).parts) ctx.elementwise(o, W.SCALE, p.seg.elements, [bitsOf(factor)], [bind(p)]);
  o.submit();
}

export function signStep(
  ctx: GpuContext,
  out: DistroTensor,
  params: DistroTensor,
  delta: DistroTensor,
  lr: number,
): void {
  checkSameShapes(out, params);
  checkSameShapes(params, delta);
  const pp = asGpu(params).parts;
  const dp = asGpu(delta).parts;
  const o = ctx.op();
  asGpu(out).parts.forEach((p, i) =>
    ctx.elementwise(
      o,
      W.SIGN_STEP,
      p.seg.elements,
      [bitsOf(lr)],
      [bind(p), bind(pp[i] as Part), bind(dp[i] as Part)],
    ),
  );
  o.submit();
}

export async function sumOfSquares(ctx: GpuContext, t: DistroTensor): Promise<number> {
  const parts = asGpu(t).parts;
  const groups = parts.map((p) => Math.ceil(p.seg.elements / 1024));
  const partial = ctx.keep('sum-squares', groups.reduce((a, b) => a + b, 0) * 4, STORAGE | COPY_SRC);
  const o = ctx.op();
  let base = 0;
  parts.forEach((p, i) => {
    const n = groups[i] as number;
    const g = grid(n);
    o.add(W.SUM_SQUARES, [p.seg.elements, g.x, base, 0], [bind(p), whole(partial)], g);
    base += n;
  });
  // Added in segment order, then group order: a fixed order, whatever the segmentation's submits.
  let total = 0;
  for (const v of new Float32Array(
    await ctx.readRanges(o, [{ buffer: partial, offset: 0, bytes: base * 4 }]),
  ))
    total += v;
  return total;
}
