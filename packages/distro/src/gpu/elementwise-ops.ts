// DisTrO's per-element float kernels on the WGSL backend (momentum, scale, the sign step) and the norm's
// partial sums, one dispatch per segment, all of an operation in one submit.
import type { DistroTensor } from '../backend.ts';
import { checkSameShapes } from '../layout.ts';
import { COPY_SRC, grid, STORAGE, type GpuContext } from './context.ts';
import { bitsOf } from './op.ts';
import { perSegment } from './dispatch.ts';
import { asGpu, bind, whole } from './tensor.ts';
import * as W from './wgsl.ts';

export function momentum(
  ctx: GpuContext,
  delta: DistroTensor,
  grad: DistroTensor,
  decay: number,
  lr: number,
): void {
  checkSameShapes(delta, grad);
  perSegment(ctx, W.MOMENTUM, [bitsOf(decay), bitsOf(lr)], [delta, grad]);
}

export function scale(ctx: GpuContext, t: DistroTensor, factor: number): void {
  perSegment(ctx, W.SCALE, [bitsOf(factor)], [t]);
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
  perSegment(ctx, W.SIGN_STEP, [bitsOf(lr)], [out, params, delta]);
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
