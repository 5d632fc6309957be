// WGSL backend over any GPUDevice (the browser shares onnxruntime-web's; Node uses Dawn). Tensors are lists of
// segments (gpu/segments.ts) so no binding exceeds the device's limits; every kernel runs per segment.
import type { AggregatedTensor } from '../aggregate.ts';
import type { DistroBackend, DistroTensor } from '../backend.ts';
import { dctBasis32 } from '../dct.ts';
import type { UpdateScalars } from '../exact-update.ts';
import { integerDctBasis } from '../int-basis.ts';
import { coefficientOffset, DistroShapeError, sameShape, tensorLayout, type BlockLayout } from '../layout.ts';
import { checkResult, effectiveTopk, type TensorResult } from '../result.ts';
import type { SparseDomain } from '../sparseloco/outer.ts';
import { planSegments, type Segment } from './segments.ts';
import { gpuSparseLoCoOps } from './sparseloco.ts';
import * as W from './wgsl.ts';

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

export interface WebGpuBackendOptions {
  chunk: number;
  /** Overrides the device's maxStorageBufferBindingSize (tests use tiny values to exercise splitting). */
  maxBindingBytes?: number;
  /** Shown in bench output, e.g. the adapter name; "software adapter" is appended when known. */
  description?: string;
}

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

export interface WebGpuDistroBackend extends DistroBackend {
  /** The device every tensor of this backend lives on. */
  readonly device: GPUDevice;
  /**
   * Bytes copied from the GPU to the host so far: `readbackBytes` by kernels (compressed results, norm partial
   * sums), `tensorReadBytes` by `read` (whole tensors, e.g. parameters hashed at an epoch end).
   */
  readonly stats: GpuStats;
  /** An external buffer (e.g. onnxruntime-web's) as a tensor; its segments are aligned ranges of it. */
  wrap(buffer: GPUBuffer, shape: readonly number[]): DistroTensor;
  /**
   * The tensor as one contiguous float32 buffer at offset 0 (what another library, e.g. onnxruntime-web,
   * binds as an input). A single-segment tensor is returned as is; a split one is copied, on the GPU, into a
   * new buffer that the caller destroys once the work reading it is submitted (`temporary`).
   */
  bufferOf(t: DistroTensor): { buffer: GPUBuffer; temporary: boolean };
}

const STORAGE = 0x80; // GPUBufferUsage.STORAGE, spelled out so this module loads before `globals` exist
const COPY_SRC = 0x04;
const COPY_DST = 0x08;
const MAP_READ = 0x01;
const UNIFORM = 0x40;

const pad16 = (bytes: number): number => Math.max(16, Math.ceil(bytes / 16) * 16);

export function createWebGpuBackend(device: GPUDevice, options: WebGpuBackendOptions): WebGpuDistroBackend {
  const chunk = options.chunk;
  tensorLayout([1], chunk);
  const maxBinding = Math.min(
    options.maxBindingBytes ?? Infinity,
    device.limits.maxStorageBufferBindingSize,
    device.limits.maxBufferSize,
  );
  const align = device.limits.minStorageBufferOffsetAlignment;
  const stats: GpuStats = {
    readbackBytes: 0,
    tensorReadBytes: 0,
    dispatches: 0,
    submits: 0,
    readbacks: 0,
    buffersCreated: 0,
  };
  const newBuffer = (d: GPUBufferDescriptor): GPUBuffer => {
    stats.buffersCreated++;
    return device.createBuffer(d);
  };
  const submit = (cmds: GPUCommandBuffer[]): void => {
    stats.submits++;
    device.queue.submit(cmds);
  };
  const pipelines = new Map<string, GPUComputePipeline>();
  const pipeline = (code: string): GPUComputePipeline => {
    let p = pipelines.get(code);
    if (!p) {
      p = device.createComputePipeline({
        layout: 'auto',
        compute: { module: device.createShaderModule({ code }), entryPoint: 'main' },
      });
      pipelines.set(code, p);
    }
    return p;
  };
  let temps: GPUBuffer[] = [];
  const floatBases = new Map<string, { buffer: GPUBuffer; off2: number }>();
  const intBases = new Map<string, { buffer: GPUBuffer; off2: number }>();

  function upload(data: ArrayBufferView, usage = STORAGE, temp = true): GPUBuffer {
    const buffer = newBuffer({
      size: pad16(data.byteLength),
      usage: usage | COPY_DST,
      mappedAtCreation: true,
    });
    new Uint8Array(buffer.getMappedRange()).set(
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    );
    buffer.unmap();
    if (temp) temps.push(buffer);
    return buffer;
  }
  function uniform(words: number[], floats: Record<number, number> = {}): GPUBuffer {
    const u = new Uint32Array(Math.ceil(words.length / 4) * 4);
    u.set(words);
    const f = new Float32Array(u.buffer);
    for (const [i, v] of Object.entries(floats)) f[Number(i)] = v;
    return upload(u, UNIFORM);
  }
  function basisPair(n1: number, n2: number, kind: 'float' | 'int'): { buffer: GPUBuffer; off2: number } {
    const cache = kind === 'float' ? floatBases : intBases;
    const key = `${n1}x${n2}`;
    let b = cache.get(key);
    if (!b) {
      const t1 = kind === 'float' ? dctBasis32(n1) : integerDctBasis(n1);
      const t2 = kind === 'float' ? dctBasis32(n2) : integerDctBasis(n2);
      const both =
        kind === 'float' ? new Float32Array(t1.length + t2.length) : new Int32Array(t1.length + t2.length);
      both.set(t1);
      both.set(t2, t1.length);
      b = { buffer: upload(both, STORAGE, false), off2: t1.length };
      cache.set(key, b);
    }
    return b;
  }
  /** 2-D grid for `groups` workgroups; `stride` = invocations (or groups) per grid row. */
  function grid(groups: number): { x: number; y: number } {
    const x = Math.min(groups, 65535);
    return { x: Math.max(1, x), y: Math.max(1, Math.ceil(groups / Math.max(1, x))) };
  }
  function run(code: string, buffers: GPUBindingResource[], groups: { x: number; y: number }): void {
    const p = pipeline(code);
    const bind = device.createBindGroup({
      layout: p.getBindGroupLayout(0),
      entries: buffers.map((resource, binding) => ({ binding, resource })),
    });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(p);
    pass.setBindGroup(0, bind);
    pass.dispatchWorkgroups(groups.x, groups.y);
    stats.dispatches++;
    pass.end();
    submit([enc.finish()]);
  }
  const bind = (p: Part): GPUBufferBinding => ({
    buffer: p.buffer,
    offset: p.byteOffset,
    size: p.seg.elements * 4,
  });
  const whole = (buffer: GPUBuffer): GPUBufferBinding => ({ buffer });
  /** Elementwise dispatch over one segment: uniform words start with (count, stride). */
  function elementwise(
    code: string,
    part: Part,
    words: number[],
    floats: Record<number, number>,
    extra: GPUBindingResource[],
  ): void {
    const g = grid(Math.ceil(part.seg.elements / W.ELEMENTWISE_WG));
    const u = uniform([part.seg.elements, g.x * W.ELEMENTWISE_WG, ...words], floats);
    run(code, [whole(u), ...extra], g);
  }

  function gpu(t: DistroTensor): GpuTensor {
    if (!(t instanceof GpuTensor)) throw new TypeError('tensor belongs to another backend');
    return t;
  }
  function same(a: DistroTensor, b: DistroTensor): void {
    if (!sameShape(a.shape, b.shape))
      throw new DistroShapeError(`shape mismatch [${a.shape}] vs [${b.shape}]`);
  }
  async function readBuffer(
    src: GPUBuffer,
    offset: number,
    bytes: number,
    counter: 'readbackBytes' | 'tensorReadBytes' = 'readbackBytes',
  ): Promise<ArrayBuffer> {
    stats[counter] += bytes;
    const staging = newBuffer({ size: pad16(bytes), usage: MAP_READ | COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(src, offset, staging, 0, Math.ceil(bytes / 4) * 4);
    submit([enc.finish()]);
    stats.readbacks++;
    await staging.mapAsync(MAP_READ);
    const out = staging.getMappedRange(0, Math.ceil(bytes / 4) * 4).slice(0, bytes);
    staging.unmap();
    staging.destroy();
    return out;
  }
  async function finish(): Promise<void> {
    await device.queue.onSubmittedWorkDone();
    for (const b of temps) b.destroy();
    temps = [];
  }

  /** Per-chunk top-k of the DCT coefficients ('dct': what compress does) or of the entries themselves. */
  async function selectTopk(delta: DistroTensor, topk: number, domain: SparseDomain): Promise<TensorResult> {
    if (domain !== 'dct' && domain !== 'raw') throw new DistroShapeError(`unknown domain ${String(domain)}`);
    const dct = domain === 'dct';
    const t = gpu(delta);
    const l = t.layout;
    const k = effectiveTopk(topk, l.totalk);
    const largest = Math.max(...t.parts.map((p) => p.seg.elements));
    const scratch = dct ? [0, 1].map(() => newBuffer({ size: pad16(largest * 4), usage: STORAGE })) : [];
    const outIdx = newBuffer({ size: pad16(l.blocks * k * 4), usage: STORAGE | COPY_SRC });
    const outVal = newBuffer({ size: pad16(l.blocks * k * 4), usage: STORAGE | COPY_SRC });
    for (const p of t.parts) {
      const n = p.seg.elements;
      let source: GPUBufferBinding = bind(p);
      if (dct) {
        const basis = basisPair(l.n1, l.n2, 'float');
        const g = grid(Math.ceil(n / W.ELEMENTWISE_WG));
        const stride = g.x * W.ELEMENTWISE_WG;
        const Tb = { buffer: scratch[0] as GPUBuffer, size: n * 4 };
        const Yb = { buffer: scratch[1] as GPUBuffer, size: n * 4 };
        run(
          W.DCT_ROWS,
          [whole(uniform([n, stride, l.cols, l.n2, basis.off2])), bind(p), Tb, whole(basis.buffer)],
          g,
        );
        run(W.DCT_COLS, [whole(uniform([n, stride, l.cols, l.n1, 0])), Tb, Yb, whole(basis.buffer)], g);
        source = Yb;
      }
      const blocks = (p.seg.rowCount / l.n1) * l.blocksX;
      const firstBlock = (p.seg.firstRow / l.n1) * l.blocksX;
      const tg = grid(blocks);
      const u = uniform([blocks, tg.x, l.cols, l.n1, l.n2, l.blocksX, k, firstBlock * k]);
      run(W.TOPK, [whole(u), source, whole(outIdx), whole(outVal)], tg);
    }
    const indices = new Uint32Array(await readBuffer(outIdx, 0, l.blocks * k * 4));
    const values = new Float32Array(await readBuffer(outVal, 0, l.blocks * k * 4));
    for (const b of [...scratch, outIdx, outVal]) b.destroy();
    await finish();
    return { xshape: l.xshape, totalk: l.totalk, k, indices, values, quantized: false };
  }

  /** DCT of every block of one segment into a new scratch buffer (what compress transforms). */
  function segmentDct(l: BlockLayout, p: Part): GPUBuffer {
    const n = p.seg.elements;
    const basis = basisPair(l.n1, l.n2, 'float');
    const g = grid(Math.ceil(n / W.ELEMENTWISE_WG));
    const stride = g.x * W.ELEMENTWISE_WG;
    const tmp = newBuffer({ size: pad16(n * 4), usage: STORAGE });
    const out = newBuffer({ size: pad16(n * 4), usage: STORAGE });
    temps.push(tmp, out);
    run(
      W.DCT_ROWS,
      [whole(uniform([n, stride, l.cols, l.n2, basis.off2])), bind(p), whole(tmp), whole(basis.buffer)],
      g,
    );
    run(
      W.DCT_COLS,
      [whole(uniform([n, stride, l.cols, l.n1, 0])), whole(tmp), whole(out), whole(basis.buffer)],
      g,
    );
    return out;
  }

  const backend: WebGpuDistroBackend = {
    kind: 'webgpu',
    description: options.description ?? 'WebGPU',
    chunk,
    device,
    stats,
    tensor(shape, data) {
      const layout = tensorLayout(shape, chunk);
      if (data && data.length !== layout.size)
        throw new DistroShapeError(`data has ${data.length} values, shape [${shape}] needs ${layout.size}`);
      const parts = planSegments(layout.rows, layout.cols, layout.n1, maxBinding).map((seg) => {
        const buffer = newBuffer({
          size: pad16(seg.elements * 4),
          usage: STORAGE | COPY_SRC | COPY_DST,
        });
        if (data) device.queue.writeBuffer(buffer, 0, data, seg.offset, seg.elements);
        return { seg, buffer, byteOffset: 0 };
      });
      return new GpuTensor(layout, parts, true);
    },
    wrap(buffer, shape) {
      const layout = tensorLayout(shape, chunk);
      const parts = planSegments(layout.rows, layout.cols, layout.n1, maxBinding, align).map((seg) => ({
        seg,
        buffer,
        byteOffset: seg.offset * 4,
      }));
      return new GpuTensor(layout, parts, false);
    },
    bufferOf(t) {
      const g = gpu(t);
      const only = g.parts[0];
      if (g.parts.length === 1 && only && only.byteOffset === 0)
        return { buffer: only.buffer, temporary: false };
      const buffer = newBuffer({ size: pad16(g.size * 4), usage: STORAGE | COPY_SRC | COPY_DST });
      const enc = device.createCommandEncoder();
      for (const p of g.parts)
        enc.copyBufferToBuffer(p.buffer, p.byteOffset, buffer, p.seg.offset * 4, p.seg.elements * 4);
      submit([enc.finish()]);
      return { buffer, temporary: true };
    },
    async read(t) {
      const out = new Float32Array(t.size);
      for (const p of gpu(t).parts)
        out.set(
          new Float32Array(await readBuffer(p.buffer, p.byteOffset, p.seg.elements * 4, 'tensorReadBytes')),
          p.seg.offset,
        );
      return out;
    },
    async gather(t, offsets) {
      const out = new Float32Array(offsets.length);
      for (const p of gpu(t).parts) {
        const mine: number[] = [];
        const local: number[] = [];
        offsets.forEach((o, i) => {
          if (o >= p.seg.offset && o < p.seg.offset + p.seg.elements) {
            mine.push(i);
            local.push(o - p.seg.offset);
          }
        });
        if (mine.length === 0) continue;
        const n = mine.length;
        const idx = upload(Uint32Array.from(local));
        const dst = newBuffer({ size: pad16(n * 4), usage: STORAGE | COPY_SRC });
        const g = grid(Math.ceil(n / W.ELEMENTWISE_WG));
        run(W.GATHER, [whole(uniform([n, g.x * W.ELEMENTWISE_WG])), bind(p), whole(idx), whole(dst)], g);
        const got = new Float32Array(await readBuffer(dst, 0, n * 4));
        dst.destroy();
        mine.forEach((i, j) => (out[i] = got[j] as number));
      }
      await finish();
      return out;
    },
    async coefficientsAt(t, indices, k) {
      const g = gpu(t);
      const l = g.layout;
      if (indices.length !== l.blocks * k)
        throw new DistroShapeError(`${indices.length} indices for ${l.blocks} blocks of ${k}`);
      const out = new Float32Array(indices.length);
      for (const p of g.parts) {
        const firstBlock = (p.seg.firstRow / l.n1) * l.blocksX;
        const blocks = (p.seg.rowCount / l.n1) * l.blocksX;
        const n = blocks * k;
        const local = new Uint32Array(n);
        for (let i = 0; i < n; i++) {
          const at = firstBlock * k + i;
          local[i] = coefficientOffset(l, Math.floor(at / k), indices[at] as number) - p.seg.offset;
        }
        const coef = segmentDct(l, p);
        const dst = newBuffer({ size: pad16(n * 4), usage: STORAGE | COPY_SRC });
        const gg = grid(Math.ceil(n / W.ELEMENTWISE_WG));
        run(
          W.GATHER,
          [whole(uniform([n, gg.x * W.ELEMENTWISE_WG])), whole(coef), whole(upload(local)), whole(dst)],
          gg,
        );
        out.set(new Float32Array(await readBuffer(dst, 0, n * 4)), firstBlock * k);
        dst.destroy();
      }
      await finish();
      return out;
    },
    write(t, data) {
      if (data.length !== t.size)
        throw new DistroShapeError(`write of ${data.length} values into a tensor of ${t.size}`);
      for (const p of gpu(t).parts)
        device.queue.writeBuffer(p.buffer, p.byteOffset, data, p.seg.offset, p.seg.elements);
    },
    release(t) {
      const g = gpu(t);
      if (g.owned) for (const p of g.parts) p.buffer.destroy();
    },
    momentum(delta, grad, decay, lr) {
      same(delta, grad);
      const gp = gpu(grad).parts;
      gpu(delta).parts.forEach((p, i) =>
        elementwise(W.MOMENTUM, p, [], { 2: decay, 3: lr }, [bind(p), bind(gp[i] as Part)]),
      );
    },
    async sumOfSquares(t) {
      let total = 0;
      for (const p of gpu(t).parts) {
        const groups = Math.ceil(p.seg.elements / 1024);
        const g = grid(groups);
        const partial = newBuffer({ size: pad16(groups * 4), usage: STORAGE | COPY_SRC });
        run(W.SUM_SQUARES, [whole(uniform([p.seg.elements, g.x])), bind(p), whole(partial)], g);
        for (const v of new Float32Array(await readBuffer(partial, 0, groups * 4))) total += v;
        partial.destroy();
      }
      return total;
    },
    scale(t, factor) {
      for (const p of gpu(t).parts) elementwise(W.SCALE, p, [], { 2: factor }, [bind(p)]);
    },
    signStep(out, params, delta, lr) {
      same(out, params);
      same(params, delta);
      const pp = gpu(params).parts;
      const dp = gpu(delta).parts;
      gpu(out).parts.forEach((p, i) =>
        elementwise(W.SIGN_STEP, p, [], { 2: lr }, [bind(p), bind(pp[i] as Part), bind(dp[i] as Part)]),
      );
    },
    compress(delta, topk) {
      return selectTopk(delta, topk, 'dct');
    },
    selectTopk,
    subtractResidual(delta, own) {
      const t = gpu(delta);
      const l = t.layout;
      checkResult(own, l, 'own result');
      const idx = upload(own.indices);
      const val = upload(own.values);
      const basis = basisPair(l.n1, l.n2, 'float');
      for (const p of t.parts)
        elementwise(
          W.RESIDUAL,
          p,
          [l.cols, l.n1, l.n2, l.blocksX, own.k, p.seg.firstRow, 0, basis.off2],
          {},
          [bind(p), whole(idx), whole(val), whole(basis.buffer)],
        );
    },
    applyAggregated(param, agg: AggregatedTensor, u: UpdateScalars) {
      const t = gpu(param);
      const l = t.layout;
      if (!sameShape(agg.layout.xshape, l.xshape))
        throw new DistroShapeError('aggregate was built for another layout');
      const starts = upload(agg.blockStart);
      const coef = upload(agg.coef);
      const mean = upload(agg.mean);
      const basis = basisPair(l.n1, l.n2, 'int');
      const bits = new Uint32Array(new Float32Array([u.factor, u.step]).buffer);
      for (const p of t.parts)
        elementwise(
          W.APPLY,
          p,
          [
            l.cols,
            l.n1,
            l.n2,
            l.blocksX,
            p.seg.firstRow,
            0,
            basis.off2,
            bits[0] as number,
            bits[1] as number,
          ],
          {},
          [bind(p), whole(starts), whole(coef), whole(mean), whole(basis.buffer)],
        );
    },
    ...gpuSparseLoCoOps({
      device,
      submit,
      gpu,
      upload: (data) => upload(data),
      uniform: (words) => uniform(words),
      run,
      grid,
      bind,
      basisPair,
    }),
    finish,
    destroy() {
      for (const b of [...floatBases.values(), ...intBases.values()]) b.buffer.destroy();
      floatBases.clear();
      intBases.clear();
      for (const b of temps) b.destroy();
      temps = [];
    },
  };
  return backend;
}
