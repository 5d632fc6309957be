// A tensor of the WGSL backend: its block layout and the segments (gpu/segments.ts) it is stored in, each a
// range of some GPU buffer. Every kernel runs per part, so no binding exceeds the device's limits.
import type { DistroTensor } from '../backend.ts';
import type { BlockLayout } from '../layout.ts';
import type { Segment } from './segments.ts';

export interface Part {
  readonly seg: Segment;
  readonly buffer: GPUBuffer;
  readonly byteOffset: number;
}

export class GpuTensor implements DistroTensor {
  readonly shape: readonly number[];
  readonly size: number;
  readonly layout: BlockLayout;
  readonly parts: readonly Part[];
  readonly owned: boolean;
  constructor(layout: BlockLayout, parts: Part[], owned: boolean) {
    this.shape = [...layout.shape];
    this.size = layout.size;
    this.layout = layout;
    this.parts = parts;
    this.owned = owned;
  }
}

/** `t` as this backend's tensor; a tensor of another backend is a caller's error. */
export function asGpu(t: DistroTensor): GpuTensor {
  if (!(t instanceof GpuTensor)) throw new TypeError('tensor belongs to another backend');
  return t;
}

/** The part's elements as a storage binding. */
export const bind = (p: Part): GPUBufferBinding => ({
  buffer: p.buffer,
  offset: p.byteOffset,
  size: p.seg.elements * 4,
});

/** A whole buffer as a binding. */
export const whole = (buffer: GPUBuffer): GPUBufferBinding => ({ buffer });

/** The block range [first, end) of a segment (segments are whole block rows). */
export function blocksOf(t: GpuTensor, p: Part): { first: number; end: number } {
  const l = t.layout;
  const first = (p.seg.firstRow / l.n1) * l.blocksX;
  return { first, end: first + (p.seg.rowCount / l.n1) * l.blocksX };
}
