// What every operation of the WGSL backend shares: the device, the work counters, compiled pipelines, the DCT
// bases, and buffers kept and reused across calls (scratch, inputs, staging). An operation records all its
// dispatches (every segment) into one compute pass and submits once (gpu/op.ts); one that returns data copies
// it into one staging buffer in that same submit and maps it once.
import { basisPairData, type BasisKind } from './bases.ts';
import type { GpuOp } from './op.ts';
import * as W from './wgsl.ts';

/** Work this backend has issued so far; callers diff two snapshots to count one call's cost. */
export interface GpuStats {
  readbackBytes: number;
  tensorReadBytes: number;
  /** Compute dispatches recorded. */
  dispatches: number;
  /** queue.submit calls. */
  submits: number;
  /** mapAsync calls: each is one host↔GPU round trip the caller waits for. */
  readbacks: number;
  /** GPU buffers created (uniforms, uploads, scratch, staging). */
  buffersCreated: number;
}

export const STORAGE = 0x80; // GPUBufferUsage.STORAGE, spelled out so this module loads before `globals` exist
export const COPY_SRC = 0x04;
export const COPY_DST = 0x08;
const MAP_READ = 0x01;
const UNIFORM = 0x40;

export const pad16 = (bytes: number): number => Math.max(16, Math.ceil(bytes / 16) * 16);

/** 2-D grid for `groups` workgroups (WebGPU caps each dimension at 65 535). */
export function grid(groups: number): { x: number; y: number } {
  const x = Math.min(groups, 65535);
  return { x: Math.max(1, x), y: Math.max(1, Math.ceil(groups / Math.max(1, x))) };
}

/** Byte offsets for consecutive ranges of `bytes` in one buffer, each at a multiple of `align`. */
export function slots(bytes: readonly number[], align: number): { at: number[]; total: number } {
  let total = 0;
  const at = bytes.map((b) => {
    const o = Math.ceil(total / align) * align;
    total = o + b;
    return o;
  });
  return { at, total };
}

/** A range of a buffer the host reads back. */
export interface ReadRange {
  buffer: GPUBuffer;
  offset: number;
  bytes: number;
}

interface Recorded {
  code: string;
  words: number[];
  bindings: GPUBindingResource[];
  groups: { x: number; y: number };
}

export class GpuContext {
  readonly stats: GpuStats = {
    readbackBytes: 0,
    tensorReadBytes: 0,
    dispatches: 0,
    submits: 0,
    readbacks: 0,
    buffersCreated: 0,
  };
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly bases = new Map<string, { buffer: GPUBuffer; off2: number }>();
  // Buffers kept across calls, grown to the largest size asked for. Reusing one from an earlier operation is
  // safe: queue order puts this operation's writeBuffer and dispatches after every submitted command that
  // reads it, and destroying a grown-out buffer leaves already submitted work intact.
  private readonly kept = new Map<string, GPUBuffer>();
  // Mappable staging buffers, one per readback in flight (concurrent reads each take their own).
  private readonly idleStaging: GPUBuffer[] = [];

  /** The storage-binding offset alignment: where a binding into a shared buffer may start. */
  readonly align: number;

  readonly device: GPUDevice;

  constructor(device: GPUDevice) {
    this.device = device;
    this.align = device.limits.minStorageBufferOffsetAlignment;
  }

  newBuffer(d: GPUBufferDescriptor): GPUBuffer {
    this.stats.buffersCreated++;
    return this.device.createBuffer(d);
  }

  submit(cmds: GPUCommandBuffer[]): void {
    this.stats.submits++;
    this.device.queue.submit(cmds);
  }

  private pipeline(code: string): GPUComputePipeline {
    let p = this.pipelines.get(code);
    if (!p) {
      p = this.device.createComputePipeline({
        layout: 'auto',
        compute: { module: this.device.createShaderModule({ code }), entryPoint: 'main' },
      });
      this.pipelines.set(code, p);
    }
    return p;
  }

  /** The kept buffer `name`, at least `bytes` long. */
  keep(name: string, bytes: number, usage: number): GPUBuffer {
    const old = this.kept.get(name);
    if (old && old.size >= bytes) return old;
    old?.destroy();
    const b = this.newBuffer({ size: pad16(Math.max(bytes, old?.size ?? 0)), usage });
    this.kept.set(name, b);
    return b;
  }

  /** `data` in the kept input buffer `name` (queued before the next submit). */
  input(name: string, data: ArrayBufferView): GPUBuffer {
    const b = this.keep(name, data.byteLength, STORAGE | COPY_DST);
    if (data.byteLength > 0)
      this.device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength);
    return b;
  }

  private staging(bytes: number): GPUBuffer {
    const i = this.idleStaging.findIndex((b) => b.size >= bytes);
    if (i >= 0) return this.idleStaging.splice(i, 1)[0] as GPUBuffer;
    return this.newBuffer({ size: pad16(bytes), usage: MAP_READ | COPY_DST });
  }

  /**
   * Copies the ranges into one staging buffer (concatenated, each at a 4-byte multiple) after `op`'s work,
   * submits once and maps once: one host↔GPU round trip however many ranges.
   */
  async readRanges(
    op: GpuOp,
    ranges: readonly ReadRange[],
    counter: 'readbackBytes' | 'tensorReadBytes' = 'readbackBytes',
  ): Promise<ArrayBuffer> {
    const { at, total } = slots(
      ranges.map((r) => Math.ceil(r.bytes / 4) * 4),
      1,
    );
    this.stats[counter] += ranges.reduce((a, r) => a + r.bytes, 0);
    const st = this.staging(total);
    op.submit((enc) =>
      ranges.forEach((r, i) => {
        if (r.bytes > 0)
          enc.copyBufferToBuffer(r.buffer, r.offset, st, at[i] as number, Math.ceil(r.bytes / 4) * 4);
      }),
    );
    this.stats.readbacks++;
    await st.mapAsync(MAP_READ, 0, pad16(total));
    const out = st.getMappedRange(0, pad16(total)).slice(0, total);
    st.unmap();
    this.idleStaging.push(st);
    return out;
  }

  /** A new buffer holding `data`. */
  private upload(data: ArrayBufferView, usage = STORAGE): GPUBuffer {
    const buffer = this.newBuffer({
      size: pad16(data.byteLength),
      usage: usage | COPY_DST,
      mappedAtCreation: true,
    });
    new Uint8Array(buffer.getMappedRange()).set(
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    );
    buffer.unmap();
    return buffer;
  }

  /** The DCT bases of an n1×n2 block (gpu/bases.ts), uploaded once per block shape and kind. */
  basisPair(n1: number, n2: number, kind: BasisKind): { buffer: GPUBuffer; off2: number } {
    const key = `${kind}:${n1}x${n2}`;
    let b = this.bases.get(key);
    if (!b) {
      const { data, off2 } = basisPairData(n1, n2, kind);
      b = { buffer: this.upload(data), off2 };
      this.bases.set(key, b);
    }
    return b;
  }

  /** A new operation: its dispatches go out in one submit. */
  op(): GpuOp {
    const recorded: Recorded[] = [];
    return {
      add: (code, words, bindings, groups) => {
        recorded.push({ code, words, bindings, groups });
      },
      submit: (after) => {
        const enc = this.device.createCommandEncoder();
        if (recorded.length > 0) this.recordPass(enc, recorded);
        after?.(enc);
        this.submit([enc.finish()]);
      },
    };
  }

  /** One compute pass of the recorded dispatches, their uniforms in one buffer at aligned slots. */
  private recordPass(enc: GPUCommandEncoder, recorded: readonly Recorded[]): void {
    const uniformAlign = this.device.limits.minUniformBufferOffsetAlignment;
    const slot = Math.ceil(Math.max(...recorded.map((r) => pad16(r.words.length * 4))) / uniformAlign);
    const slotBytes = slot * uniformAlign;
    const words = new Uint32Array((recorded.length * slotBytes) / 4);
    recorded.forEach((r, i) => words.set(r.words, (i * slotBytes) / 4));
    const ubuf = this.keep('uniforms', words.byteLength, UNIFORM | COPY_DST);
    this.device.queue.writeBuffer(ubuf, 0, words);
    const pass = enc.beginComputePass();
    recorded.forEach((r, i) => {
      const p = this.pipeline(r.code);
      const u = { buffer: ubuf, offset: i * slotBytes, size: pad16(r.words.length * 4) };
      pass.setPipeline(p);
      pass.setBindGroup(
        0,
        this.device.createBindGroup({
          layout: p.getBindGroupLayout(0),
          entries: [u, ...r.bindings].map((resource, binding) => ({ binding, resource })),
        }),
      );
      pass.dispatchWorkgroups(r.groups.x, r.groups.y);
      this.stats.dispatches++;
    });
    pass.end();
  }

  /** Elementwise dispatch of `count` invocations: uniform words start with (count, stride). */
  elementwise(o: GpuOp, code: string, count: number, words: number[], bindings: GPUBindingResource[]): void {
    if (count === 0) return;
    const g = grid(Math.ceil(count / W.ELEMENTWISE_WG));
    o.add(code, [count, g.x * W.ELEMENTWISE_WG, ...words], bindings, g);
  }

  destroy(): void {
    for (const b of this.bases.values()) b.buffer.destroy();
    this.bases.clear();
    for (const b of [...this.kept.values(), ...this.idleStaging]) b.destroy();
    this.kept.clear();
    this.idleStaging.length = 0;
  }
}
