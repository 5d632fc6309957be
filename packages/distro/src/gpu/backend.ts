// WGSL backend over any GPUDevice (the browser shares onnxruntime-web's; Node uses Dawn). Tensors are lists of
// segments (gpu/segments.ts) so no binding exceeds the device's limits; every kernel runs per segment. Each
// operation records all its dispatches (every segment) into one compute pass and submits once (gpu/op.ts);
// an operation that returns data copies it into one staging buffer in that same submit and maps it once.
// Scratch, input and staging buffers are kept and reused across calls.
import type { AggregatedTensor } from '../aggregate.ts';
import type { DistroBackend, DistroTensor } from '../backend.ts';
import { dctBasis32 } from '../dct.ts';
import type { UpdateScalars } from '../exact-update.ts';
import { integerDctBasis } from '../int-basis.ts';
import { coefficientOffset, DistroShapeError, sameShape, tensorLayout, type BlockLayout } from '../layout.ts';
import { checkResult, effectiveTopk, type TensorResult } from '../result.ts';
import type { SparseDomain } from '../sparseloco/outer.ts';
import { planSegments, type Segment } from './segments.ts';
import { bitsOf, type GpuOp } from './op.ts';
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
  /**
   * `compress` of every tensor, in order, with the same results: one submit and one host↔GPU round trip for
   * the whole list (a step's parameters) instead of one per tensor.
   */
  compressAll(deltas: readonly DistroTensor[], topk: number): Promise<TensorResult[]>;
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
  const uniformAlign = device.limits.minUniformBufferOffsetAlignment;
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
  const bases = new Map<string, { buffer: GPUBuffer; off2: number }>();

  // Buffers kept across calls, grown to the largest size asked for. Reusing one from an earlier operation is
  // safe: queue order puts this operation's writeBuffer and dispatches after every submitted command that
  // reads it, and destroying a grown-out buffer leaves already submitted work intact.
  const kept = new Map<string, GPUBuffer>();
  function keep(name: string, bytes: number, usage: number): GPUBuffer {
    const old = kept.get(name);
    if (old && old.size >= bytes) return old;
    old?.destroy();
    const b = newBuffer({ size: pad16(Math.max(bytes, old?.size ?? 0)), usage });
    kept.set(name, b);
    return b;
  }
  /** `data` in the kept input buffer `name` (queued before the next submit). */
  function input(name: string, data: ArrayBufferView): GPUBuffer {
    const b = keep(name, data.byteLength, STORAGE | COPY_DST);
    if (data.byteLength > 0) device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength);
    return b;
  }
  // Mappable staging buffers, one per readback in flight (concurrent reads each take their own).
  const idleStaging: GPUBuffer[] = [];
  function staging(bytes: number): GPUBuffer {
    const i = idleStaging.findIndex((b) => b.size >= bytes);
    if (i >= 0) return idleStaging.splice(i, 1)[0] as GPUBuffer;
    return newBuffer({ size: pad16(bytes), usage: MAP_READ | COPY_DST });
  }
  /**
   * Copies the ranges into one staging buffer (concatenated, each at a 4-byte multiple) after `op`'s work,
   * submits once and maps once: one host↔GPU round trip however many ranges.
   */
  async function readRanges(
    op: GpuOp,
    ranges: readonly { buffer: GPUBuffer; offset: number; bytes: number }[],
    counter: 'readbackBytes' | 'tensorReadBytes' = 'readbackBytes',
  ): Promise<ArrayBuffer> {
    let total = 0;
    const at = ranges.map((r) => {
      const o = total;
      total += Math.ceil(r.bytes / 4) * 4;
      return o;
    });
    stats[counter] += ranges.reduce((a, r) => a + r.bytes, 0);
    const st = staging(total);
    op.submit((enc) =>
      ranges.forEach((r, i) => {
        if (r.bytes > 0)
          enc.copyBufferToBuffer(r.buffer, r.offset, st, at[i] as number, Math.ceil(r.bytes / 4) * 4);
      }),
    );
    stats.readbacks++;
    await st.mapAsync(MAP_READ, 0, pad16(total));
    const out = st.getMappedRange(0, pad16(total)).slice(0, total);
    st.unmap();
    idleStaging.push(st);
    return out;
  }

  /** A new buffer holding `data` (the DCT bases, made once per block shape). */
  function upload(data: ArrayBufferView, usage = STORAGE): GPUBuffer {
    const buffer = newBuffer({
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
  /**
   * The DCT bases of an n1×n2 block in one buffer, F1 then F2 (each [row][col] as dct.ts gives them):
   * 'float' float32, 'floatT' float32 with both transposed (what the DCT passes read, F2ᵀ starting at a
   * multiple of 4 for vec4 reads), 'int' the integer bases the exact decoders use. off2 is where F2 starts.
   */
  function basisPair(
    n1: number,
    n2: number,
    kind: 'float' | 'floatT' | 'int',
  ): { buffer: GPUBuffer; off2: number } {
    const key = `${kind}:${n1}x${n2}`;
    let b = bases.get(key);
    if (!b) {
      const t1 = kind === 'int' ? integerDctBasis(n1) : dctBasis32(n1);
      const t2 = kind === 'int' ? integerDctBasis(n2) : dctBasis32(n2);
      const off2 = kind === 'floatT' ? Math.ceil((n1 * n1) / 4) * 4 : n1 * n1;
      const both = kind === 'int' ? new Int32Array(off2 + n2 * n2) : new Float32Array(off2 + n2 * n2);
      if (kind === 'floatT') {
        for (let h = 0; h < n1; h++) for (let b = 0; b < n1; b++) both[h * n1 + b] = t1[b * n1 + h] as number;
        for (let w = 0; w < n2; w++)
          for (let d = 0; d < n2; d++) both[off2 + w * n2 + d] = t2[d * n2 + w] as number;
      } else {
        both.set(t1);
        both.set(t2, off2);
      }
      b = { buffer: upload(both), off2 };
      bases.set(key, b);
    }
    return b;
  }
  /** 2-D grid for `groups` workgroups; `stride` = invocations (or groups) per grid row. */
  function grid(groups: number): { x: number; y: number } {
    const x = Math.min(groups, 65535);
    return { x: Math.max(1, x), y: Math.max(1, Math.ceil(groups / Math.max(1, x))) };
  }
  function op(): GpuOp {
    const recorded: {
      code: string;
      words: number[];
      bindings: GPUBindingResource[];
      groups: { x: number; y: number };
    }[] = [];
    return {
      add(code, words, bindings, groups) {
        recorded.push({ code, words, bindings, groups });
      },
      submit(after) {
        const enc = device.createCommandEncoder();
        if (recorded.length > 0) {
          const slot = Math.ceil(Math.max(...recorded.map((r) => pad16(r.words.length * 4))) / uniformAlign);
          const slotBytes = slot * uniformAlign;
          const words = new Uint32Array((recorded.length * slotBytes) / 4);
          recorded.forEach((r, i) => words.set(r.words, (i * slotBytes) / 4));
          const ubuf = keep('uniforms', words.byteLength, UNIFORM | COPY_DST);
          device.queue.writeBuffer(ubuf, 0, words);
          const pass = enc.beginComputePass();
          recorded.forEach((r, i) => {
            const p = pipeline(r.code);
            const u = { buffer: ubuf, offset: i * slotBytes, size: pad16(r.words.length * 4) };
            pass.setPipeline(p);
            pass.setBindGroup(
              0,
              device.createBindGroup({
                layout: p.getBindGroupLayout(0),
                entries: [u, ...r.bindings].map((resource, binding) => ({ binding, resource })),
              }),
            );
            pass.dispatchWorkgroups(r.groups.x, r.groups.y);
            stats.dispatches++;
          });
          pass.end();
        }
        after?.(enc);
        submit([enc.finish()]);
      },
    };
  }
  const bind = (p: Part): GPUBufferBinding => ({
    buffer: p.buffer,
    offset: p.byteOffset,
    size: p.seg.elements * 4,
  });
  const whole = (buffer: GPUBuffer): GPUBufferBinding => ({ buffer });
  /** Elementwise dispatch of `count` invocations: uniform words start with (count, stride). */
  function elementwise(
    o: GpuOp,
    code: string,
    count: number,
    words: number[],
    bindings: GPUBindingResource[],
  ): void {
    if (count === 0) return;
    const g = grid(Math.ceil(count / W.ELEMENTWISE_WG));
    o.add(code, [count, g.x * W.ELEMENTWISE_WG, ...words], bindings, g);
  }

  function gpu(t: DistroTensor): GpuTensor {
    if (!(t instanceof GpuTensor)) throw new TypeError('tensor belongs to another backend');
    return t;
  }
  function same(a: DistroTensor, b: DistroTensor): void {
    if (!sameShape(a.shape, b.shape))
      throw new DistroShapeError(`shape mismatch [${a.shape}] vs [${b.shape}]`);
  }
  async function finish(): Promise<void> {
    await device.queue.onSubmittedWorkDone();
  }

  /** Byte offsets for consecutive ranges of `bytes` in one buffer, each at a storage-binding alignment. */
  function slots(bytes: readonly number[]): { at: number[]; total: number } {
    let total = 0;
    const at = bytes.map((b) => {
      const o = Math.ceil(total / align) * align;
      total = o + b;
      return o;
    });
    return { at, total };
  }

  /**
   * Makes the kept DCT scratch ('dct-rows', 'dct': one segment each) large enough for the largest segment of
   * `ts`. Called before recording: a buffer grown mid-recording would be destroyed under dispatches already
   * recorded.
   */
  function reserveDct(ts: readonly GpuTensor[]): void {
    const bytes = Math.max(0, ...ts.flatMap((t) => t.parts.map((p) => p.seg.elements * 4)));
    keep('dct-rows', bytes, STORAGE);
    keep('dct', bytes, STORAGE);
  }

  /**
   * The chunked DCT of segment `p` of `t`, recorded into `o`; the coefficients are bound as returned until the
   * next segment's DCT is recorded (segments reuse one scratch, so no buffer spans a whole split tensor).
   */
  function recordDct(o: GpuOp, t: GpuTensor, p: Part): GPUBufferBinding {
    const l = t.layout;
    const basis = basisPair(l.n1, l.n2, 'floatT');
    const n = p.seg.elements;
    reserveDct([t]);
    const T = { buffer: kept.get('dct-rows') as GPUBuffer, offset: 0, size: n * 4 };
    const Y = { buffer: kept.get('dct') as GPUBuffer, offset: 0, size: n * 4 };
    // Four outputs per invocation where the block side allows it (every chunk that is a multiple of 4).
    const rows4 = l.n2 % 4 === 0;
    const cols4 = l.n1 % 4 === 0;
    const pass = (code: string, count: number, words: number[], bindings: GPUBindingResource[]): void => {
      const g = grid(Math.ceil(count / W.ELEMENTWISE_WG));
      o.add(code, [count, g.x * W.ELEMENTWISE_WG, ...words], bindings, g);
    };
    pass(
      rows4 ? W.DCT_ROWS4 : W.DCT_ROWS,
      rows4 ? n / 4 : n,
      [l.cols, l.n2, basis.off2],
      [bind(p), T, whole(basis.buffer)],
    );
    pass(cols4 ? W.DCT_COLS4 : W.DCT_COLS, cols4 ? n / 4 : n, [l.cols, l.n1, 0], [T, Y, whole(basis.buffer)]);
    return Y;
  }

  /**
   * Per-chunk top-k of the DCT coefficients ('dct': what compress does) or of the entries themselves, for
   * every tensor of `ts`: one submit and one readback (all indices and values in one buffer) whatever the
   * number of tensors, chunks and segments. Segments are transformed and selected one after another in one
   * compute pass, reusing the same scratch (dispatches in a pass see their predecessors' writes).
   */
  async function selectMany(
    ts: readonly DistroTensor[],
    topk: number,
    domain: SparseDomain,
  ): Promise<TensorResult[]> {
    if (domain !== 'dct' && domain !== 'raw') throw new DistroShapeError(`unknown domain ${String(domain)}`);
    const plans = ts.map((d) => {
      const t = gpu(d);
      const k = effectiveTopk(topk, t.layout.totalk);
      return { t, k, entries: t.layout.blocks * k };
    });
    let words = 0;
    const starts = plans.map((p) => {
      words += 2 * p.entries;
      return words - 2 * p.entries;
    });
    if (domain === 'dct') reserveDct(plans.map((p) => p.t));
    const out = keep('topk', words * 4, STORAGE | COPY_SRC);
    const o = op();
    plans.forEach(({ t, k, entries }, ti) => {
      const l = t.layout;
      const base = starts[ti] as number;
      t.parts.forEach((p) => {
        const blocks = (p.seg.rowCount / l.n1) * l.blocksX;
        const firstBlock = (p.seg.firstRow / l.n1) * l.blocksX;
        const g = grid(blocks);
        const source = domain === 'dct' ? recordDct(o, t, p) : bind(p);
        o.add(
          W.TOPK,
          [
            blocks,
            g.x,
            l.cols,
            l.n1,
            l.n2,
            l.blocksX,
            k,
            base + firstBlock * k,
            base + entries + firstBlock * k,
          ],
          [source, whole(out)],
          g,
        );
      });
    });
    const got = await readRanges(o, [{ buffer: out, offset: 0, bytes: words * 4 }]);
    return plans.map(({ t, k, entries }, ti) => {
      const at = (starts[ti] as number) * 4;
      const l = t.layout;
      return {
        xshape: l.xshape,
        totalk: l.totalk,
        k,
        indices: new Uint32Array(got.slice(at, at + entries * 4)),
        values: new Float32Array(got.slice(at + entries * 4, at + entries * 8)),
        quantized: false,
      };
    });
  }
  async function selectTopk(delta: DistroTensor, topk: number, domain: SparseDomain): Promise<TensorResult> {
    return (await selectMany([delta], topk, domain))[0] as TensorResult;
  }

  /** out[i] = src[idx[i]] for each (source, indices) pair, one submit and one readback for all of them. */
  async function gatherAll(
    o: GpuOp,
    jobs: readonly { src: () => GPUBufferBinding; idx: Uint32Array }[],
  ): Promise<Float32Array> {
    const sl = slots(jobs.map((j) => j.idx.byteLength));
    const idx = new Uint32Array(sl.total / 4);
    jobs.forEach((j, i) => idx.set(j.idx, (sl.at[i] as number) / 4));
    const idxBuf = input('gather-idx', idx);
    const out = keep('gather-out', sl.total, STORAGE | COPY_SRC);
    // A job's source is recorded right before its gather (a segment's DCT lives until the next one's).
    jobs.forEach((j, i) => {
      const range = { offset: sl.at[i] as number, size: j.idx.byteLength };
      if (range.size > 0)
        elementwise(
          o,
          W.GATHER,
          j.idx.length,
          [],
          [j.src(), { buffer: idxBuf, ...range }, { buffer: out, ...range }],
        );
    });
    const ranges = jobs.map((j, i) => ({ buffer: out, offset: sl.at[i] as number, bytes: j.idx.byteLength }));
    return new Float32Array(await readRanges(o, ranges));
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
      const parts = gpu(t).parts;
      const got = await readRanges(
        op(),
        parts.map((p) => ({ buffer: p.buffer, offset: p.byteOffset, bytes: p.seg.elements * 4 })),
        'tensorReadBytes',
      );
      // Segments are consecutive ranges of the tensor, each a multiple of 4 bytes: the staging copy is the
      // tensor in order.
      return new Float32Array(got);
    },
    async gather(t, offsets) {
      const parts = gpu(t).parts;
      const picked = parts.map((p) => {
        const mine: number[] = [];
        const local: number[] = [];
        offsets.forEach((o, i) => {
          if (o >= p.seg.offset && o < p.seg.offset + p.seg.elements) {
            mine.push(i);
            local.push(o - p.seg.offset);
          }
        });
        return { mine, src: () => bind(p), idx: Uint32Array.from(local) };
      });
      const got = await gatherAll(op(), picked);
      const out = new Float32Array(offsets.length);
      let j = 0;
      for (const p of picked) for (const i of p.mine) out[i] = got[j++] as number;
      return out;
    },
    async coefficientsAt(t, indices, k) {
      const g = gpu(t);
      const l = g.layout;
      if (indices.length !== l.blocks * k)
        throw new DistroShapeError(`${indices.length} indices for ${l.blocks} blocks of ${k}`);
      const o = op();
      reserveDct([g]);
      const jobs = g.parts.map((p) => {
        const firstBlock = (p.seg.firstRow / l.n1) * l.blocksX;
        const n = (p.seg.rowCount / l.n1) * l.blocksX * k;
        const local = new Uint32Array(n);
        for (let i = 0; i < n; i++) {
          const at = firstBlock * k + i;
          local[i] = coefficientOffset(l, Math.floor(at / k), indices[at] as number) - p.seg.offset;
        }
        return { src: () => recordDct(o, g, p), idx: local };
      });
      // Segments hold consecutive block rows, so their entries are consecutive in chunk-grid order.
      return gatherAll(o, jobs);
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
      const o = op();
      gpu(delta).parts.forEach((p, i) =>
        elementwise(
          o,
          W.MOMENTUM,
          p.seg.elements,
          [bitsOf(decay), bitsOf(lr)],
          [bind(p), bind(gp[i] as Part)],
        ),
      );
      o.submit();
    },
    async sumOfSquares(t) {
      const parts = gpu(t).parts;
      const groups = parts.map((p) => Math.ceil(p.seg.elements / 1024));
      const partial = keep('sum-squares', groups.reduce((a, b) => a + b, 0) * 4, STORAGE | COPY_SRC);
      const o = op();
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
        await readRanges(o, [{ buffer: partial, offset: 0, bytes: base * 4 }]),
      ))
        total += v;
      return total;
    },
    scale(t, factor) {
      const o = op();
      for (const p of gpu(t).parts) elementwise(o, W.SCALE, p.seg.elements, [bitsOf(factor)], [bind(p)]);
      o.submit();
    },
    signStep(out, params, delta, lr) {
      same(out, params);
      same(params, delta);
      const pp = gpu(params).parts;
      const dp = gpu(delta).parts;
      const o = op();
      gpu(out).parts.forEach((p, i) =>
        elementwise(
          o,
          W.SIGN_STEP,
          p.seg.elements,
          [bitsOf(lr)],
          [bind(p), bind(pp[i] as Part), bind(dp[i] as Part)],
        ),
      );
      o.submit();
    },
    compress(delta, topk) {
      return selectTopk(delta, topk, 'dct');
    },
    compressAll(deltas, topk) {
      return selectMany(deltas, topk, 'dct');
    },
    selectTopk,
    selectTopkAll: selectMany,
    subtractResidual(delta, own) {
      const t = gpu(delta);
      const l = t.layout;
      checkResult(own, l, 'own result');
      const idx = input('residual-idx', own.indices);
      const val = input('residual-val', own.values);
      const basis = basisPair(l.n1, l.n2, 'float');
      const o = op();
      for (const p of t.parts)
        elementwise(
          o,
          W.RESIDUAL,
          p.seg.elements,
          [l.cols, l.n1, l.n2, l.blocksX, own.k, p.seg.firstRow, 0, basis.off2],
          [bind(p), whole(idx), whole(val), whole(basis.buffer)],
        );
      o.submit();
    },
    applyAggregated(param, agg: AggregatedTensor, u: UpdateScalars) {
      const t = gpu(param);
      const l = t.layout;
      if (!sameShape(agg.layout.xshape, l.xshape))
        throw new DistroShapeError('aggregate was built for another layout');
      const starts = input('apply-starts', agg.blockStart);
      const coef = input('apply-coef', agg.coef);
      const mean = input('apply-mean', agg.mean);
      const basis = basisPair(l.n1, l.n2, 'int');
      const o = op();
      for (const p of t.parts)
        elementwise(
          o,
          W.APPLY,
          p.seg.elements,
          [l.cols, l.n1, l.n2, l.blocksX, p.seg.firstRow, 0, basis.off2, bitsOf(u.factor), bitsOf(u.step)],
          [bind(p), whole(starts), whole(coef), whole(mean), whole(basis.buffer)],
        );
      o.submit();
    },
    ...gpuSparseLoCoOps({ device, submit, gpu, input, op, grid, bind, basisPair }),
    finish,
    destroy() {
      for (const b of bases.values()) b.buffer.destroy();
      bases.clear();
      for (const b of [...kept.values(), ...idleStaging]) b.destroy();
      kept.clear();
      idleStaging.length = 0;
    },
  };
  return backend;
}
