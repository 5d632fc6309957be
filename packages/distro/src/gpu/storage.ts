// Making, wrapping, reading and writing tensors of the WGSL backend. A tensor the backend makes owns one buffer
// per segment; a wrapped external buffer (e.g. onnxruntime-web's) is split into aligned ranges of itself.
import type { DistroTensor } from '../backend.ts';
import { DistroShapeError, tensorLayout } from '../layout.ts';
import { COPY_DST, COPY_SRC, pad16, STORAGE, type GpuContext } from './context.ts';
import { planSegments } from './segments.ts';
import { asGpu, GpuTensor } from './tensor.ts';

/** How tensors are cut: the run's chunk and the largest binding the device (or a test) allows. */
export interface TensorPlan {
  chunk: number;
  maxBinding: number;
}

export function newTensor(
  ctx: GpuContext,
  plan: TensorPlan,
  shape: readonly number[],
  data?: Float32Array,
): GpuTensor {
  const layout = tensorLayout(shape, plan.chunk);
  if (data && data.length !== layout.size)
    throw new DistroShapeError(`data has ${data.length} values, shape [${shape}] needs ${layout.size}`);
  const parts = planSegments(layout.rows, layout.cols, layout.n1, plan.maxBinding).map((seg) => {
    const buffer = ctx.newBuffer({ size: pad16(seg.elements * 4), usage: STORAGE | COPY_SRC | COPY_DST });
    if (data) ctx.device.queue.writeBuffer(buffer, 0, data, seg.offset, seg.elements);
    return { seg, buffer, byteOffset: 0 };
  });
  return new GpuTensor(layout, parts, true);
}

export function wrapBuffer(
  ctx: GpuContext,
  plan: TensorPlan,
  buffer: GPUBuffer,
  shape: readonly number[],
): GpuTensor {
  const layout = tensorLayout(shape, plan.chunk);
  const parts = planSegments(layout.rows, layout.cols, layout.n1, plan.maxBinding, ctx.align).map((seg) => ({
    seg,
    buffer,
    byteOffset: seg.offset * 4,
  }));
  return new GpuTensor(layout, parts, false);
}

/** The tensor as one contiguous buffer at offset 0: itself when it is one, else a temporary copy. */
export function bufferOf(ctx: GpuContext, t: DistroTensor): { buffer: GPUBuffer; temporary: boolean } {
  const g = asGpu(t);
  const only = g.parts[0];
  if (g.parts.length === 1 && only && only.byteOffset === 0) return { buffer: only.buffer, temporary: false };
  const buffer = ctx.newBuffer({ size: pad16(g.size * 4), usage: STORAGE | COPY_SRC | COPY_DST });
  const enc = ctx.device.createCommandEncoder();
  for (const p of g.parts)
    enc.copyBufferToBuffer(p.buffer, p.byteOffset, buffer, p.seg.offset * 4, p.seg.elements * 4);
  ctx.submit([enc.finish()]);
  return { buffer, temporary: true };
}

export async function readTensor(ctx: GpuContext, t: DistroTensor): Promise<Float32Array> {
  const parts = asGpu(t).parts;
  const got = await ctx.readRanges(
    ctx.op(),
    parts.map((p) => ({ buffer: p.buffer, offset: p.byteOffset, bytes: p.seg.elements * 4 })),
    'tensorReadBytes',
  );
  // Segments are consecutive ranges of the tensor, each a multiple of 4 bytes: the staging copy is the
  // tensor in order.
  return new Float32Array(got);
}

export function writeTensor(ctx: GpuContext, t: DistroTensor, data: Float32Array): void {
  if (data.length !== t.size)
    throw new DistroShapeError(`write of ${data.length} values into a tensor of ${t.size}`);
  for (const p of asGpu(t).parts)
    ctx.device.queue.writeBuffer(p.buffer, p.byteOffset, data, p.seg.offset, p.seg.elements);
}

export function releaseTensor(t: DistroTensor): void {
  const g = asGpu(t);
  if (g.owned) for (const p of g.parts) p.buffer.destroy();
}
