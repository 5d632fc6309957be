// The two shapes most operations of the WGSL backend take: one elementwise dispatch per segment, all of them in
// one submit.
import type { DistroTensor } from '../backend.ts';
import type { GpuContext } from './context.ts';
import type { GpuOp } from './op.ts';
import { asGpu, bind, whole, type GpuTensor, type Part } from './tensor.ts';

/**
 * `code` over every element of `ts` (tensors of one shape, so of one segmentation), segment by segment: each
 * dispatch binds the same segment of every tensor, in order, after the uniform words (count, stride, ...words).
 */
export function perSegment(
  ctx: GpuContext,
  code: string,
  words: number[],
  ts: readonly DistroTensor[],
): void {
  const parts = ts.map((t) => asGpu(t).parts);
  const o = ctx.op();
  parts[0]!.forEach((p, i) =>
    ctx.elementwise(
      o,
      code,
      p.seg.elements,
      words,
      parts.map((ps) => bind(ps[i] as Part)),
    ),
  );
  o.submit();
}

/** `code` over every element of `t`, segment by segment, binding the segment and then `buffers` whole. */
export function perSegmentWith(
  ctx: GpuContext,
  code: string,
  t: GpuTensor,
  words: (p: Part) => number[],
  buffers: readonly GPUBuffer[],
): void {
  const o = ctx.op();
  recordPerSegment(ctx, o, code, t, words, buffers);
  o.submit();
}

/** perSegmentWith's dispatches recorded into `o`, after whatever it already holds. */
export function recordPerSegment(
  ctx: GpuContext,
  o: GpuOp,
  code: string,
  t: GpuTensor,
  words: (p: Part) => number[],
  buffers: readonly GPUBuffer[],
): void {
  for (const p of t.parts)
    ctx.elementwise(o, code, p.seg.elements, words(p), [bind(p), ...buffers.map(whole)]);
}
