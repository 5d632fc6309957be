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

/**
 * Σ x² of each tensor, in one submit and one readback for all of them: per-workgroup partial sums on the GPU,
 * added on the host in float64 in segment order, then group order — a fixed order, whatever the
 * segmentation's submits, so a tensor's sum is the same alone or in a list.
 */
export async function sumsOfSquares(ctx: GpuContext, ts: readonly DistroTensor[]): Promise<number[]> {
  const plan = ts.map((t) => asGpu(t).parts.map((p) => ({ p, groups: Math.ceil(p.seg.elements / 1024) })));
  const count = plan.flat().reduce((a, x) => a + x.groups, 0);
  if (count === 0) return ts.map(() => 0);
  const partial = ctx.keep('sum-squares', count * 4, STORAGE | COPY_SRC);
  const o = ctx.op();
  let base = 0;
  for (const { p, groups } of plan.flat()) {
    const g = grid(groups);
    o.add(W.SUM_SQUARES, [p.seg.elements, g.x, base, 0], [bind(p), whole(partial)], g);
    base += groups;
  }
  const values = new Float32Array(await ctx.readRanges(o, [{ buffer: partial, offset: 0, bytes: base * 4 }]));
  let at = 0;
  return plan.map((parts) => {
    let total = 0;
    for (const { groups } of parts) for (let k = 0; k < groups; k++) total += values[at++] as number;
    return total;
  });
}

export async function sumOfSquares(ctx: GpuContext, t: DistroTensor): Promise<number> {
  return (await sumsOfSquares(ctx, [t]))[0] as number;
}
