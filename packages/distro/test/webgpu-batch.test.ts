// The WGSL backend's selection kernel on awkward blocks, and its cost per call: one submit per operation and
// one readback per result, whatever the number of chunks and segments. Real WGSL on whatever adapter Dawn
// finds (SwiftShader in CI), against the CPU reference.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  aggregateTensor,
  applyResults,
  clipByGlobalNorm,
  createCpuBackend,
  createWebGpuBackend,
  quantize1bit,
  tensorLayout,
  updateScalars,
  type GpuStats,
  type TensorResult,
  type WebGpuDistroBackend,
} from '../src/index.ts';
import { dawnDevice, type Dawn } from '../src/node/index.ts';
import { rng } from './rng.ts';

let dawn: Dawn | undefined;
beforeAll(async () => {
  dawn = await dawnDevice();
});
afterAll(() => dawn?.device.destroy());

const rand = rng(23);
const randn = (n: number, scale = 1): Float32Array =>
  Float32Array.from({ length: n }, () => (rand() - 0.5) * scale);
const bits = (x: Float32Array): Uint32Array => new Uint32Array(x.buffer, x.byteOffset, x.length);

function gpuBackend(chunk: number, maxBindingBytes?: number): WebGpuDistroBackend {
  if (!dawn)
    throw new Error('no WebGPU adapter (install chromium for SwiftShader, or set MESHTRAIN_SKIP_WEBGPU=1)');
  return createWebGpuBackend(dawn.device, maxBindingBytes ? { chunk, maxBindingBytes } : { chunk });
}

/** Work issued by `fn` on `be`: dispatches, submits, readbacks and buffers created. */
async function cost(
  be: WebGpuDistroBackend,
  fn: () => unknown,
): Promise<Omit<GpuStats, 'readbackBytes' | 'tensorReadBytes'>> {
  const s0 = { ...be.stats };
  await fn();
  const s = be.stats;
  return {
    dispatches: s.dispatches - s0.dispatches,
    submits: s.submits - s0.submits,
    readbacks: s.readbacks - s0.readbacks,
    buffersCreated: s.buffersCreated - s0.buffersCreated,
  };
}

describe.runIf(process.env.MESHTRAIN_SKIP_WEBGPU !== '1')('WGSL top-k and batching', () => {
  it('raw top-k is the CPU selection bit for bit: blocks smaller than the workgroup and larger, heavy ties, k = 1 and k = all, NaN, ±inf, ±0', async () => {
    for (const [shape, chunk] of [
      [[3, 5], 64], // one block of 15, smaller than a chunk and than the workgroup
      [[7, 300], 64], // 7 × 60 blocks
      [[58, 29], 29], // 29 × 29 blocks: not a multiple of the workgroup size
      [[1000], 64], // 1-D: chunks of 50, the largest divisor of 1000 not above 64
      [[256, 256], 256], // one block of 65 536: 256 elements per invocation
    ] as [number[], number][]) {
      const cpu = createCpuBackend({ chunk });
      const gpu = gpuBackend(chunk);
      const n = shape.reduce((a, b) => a * b, 1);
      const l = tensorLayout(shape, chunk);
      // Quarter steps make many equal magnitudes, so the k-th magnitude is usually tied.
      const x = randn(n, 4).map((v, i) => {
        if (i % 97 === 5) return NaN;
        if (i % 89 === 7) return i % 2 ? Infinity : -Infinity;
        if (i % 31 === 3) return i % 2 ? -0 : 0;
        return Math.round(v * 4) / 4;
      });
      for (const topk of [1, 3, 17, l.totalk]) {
        const rc = await cpu.selectTopk(cpu.tensor(shape, x), topk, 'raw');
        const rg = await gpu.selectTopk(gpu.tensor(shape, x), topk, 'raw');
        expect(rg.k).toBe(rc.k);
        expect(rg.indices).toEqual(rc.indices);
        expect(bits(rg.values)).toEqual(bits(rc.values));
      }
      gpu.destroy();
    }
  });

  it('raw top-k of a block whose magnitudes are all equal keeps the first k indices', async () => {
    const gpu = gpuBackend(16);
    const x = Float32Array.from({ length: 16 * 16 }, (_, i) => (i % 3 ? 0.5 : -0.5));
    const r = await gpu.selectTopk(gpu.tensor([16, 16], x), 10, 'raw');
    expect([...r.indices]).toEqual([...Array(10).keys()]);
    gpu.destroy();
  });

  it('compress on blocks whose sides are and are not multiples of 4 agrees with the CPU (values 1e-5, sets up to near-ties)', async () => {
    for (const [shape, chunk, topk] of [
      [[3, 5], 64, 4], // scalar rows and columns
      [[7, 300], 64, 6], // 7 rows (scalar columns pass), 60 columns (four outputs per invocation)
      [[12, 58], 4, 3], // 4 rows (four per invocation), 2 columns
      [[24, 87], 29, 5], // 24 rows (four per invocation), 29 columns (one per invocation)
    ] as [number[], number, number][]) {
      const cpu = createCpuBackend({ chunk });
      const gpu = gpuBackend(chunk);
      const n = shape.reduce((a, b) => a * b, 1);
      const l = tensorLayout(shape, chunk);
      const x = randn(n);
      const all = await cpu.compress(cpu.tensor(shape, x), l.totalk);
      const rc = await cpu.compress(cpu.tensor(shape, x), topk);
      const rg = await gpu.compress(gpu.tensor(shape, x), topk);
      expect(rg.k).toBe(rc.k);
      for (let b = 0; b < l.blocks; b++) {
        const coef = new Map<number, number>();
        for (let j = 0; j < l.totalk; j++)
          coef.set(all.indices[b * l.totalk + j]!, all.values[b * l.totalk + j]!);
        const kth = Math.min(
          ...Array.from(rc.indices.subarray(b * rc.k, (b + 1) * rc.k), (e) => Math.abs(coef.get(e)!)),
        );
        const picked = rg.indices.subarray(b * rg.k, (b + 1) * rg.k);
        expect(new Set(picked).size).toBe(rg.k);
        for (let j = 0; j < rg.k; j++) {
          const ref = coef.get(picked[j]!)!;
          if (j > 0) expect(picked[j]!).toBeGreaterThan(picked[j - 1]!); // ascending
          expect(Math.abs(rg.values[b * rg.k + j]! - ref)).toBeLessThanOrEqual(
            1e-5 * Math.max(1, Math.abs(ref)),
          );
          expect(Math.abs(ref)).toBeGreaterThanOrEqual(kth - 1e-6);
        }
      }
      gpu.destroy();
    }
  });

  it('each operation is one submit and each result one readback, whatever the number of chunks, segments and tensors', async () => {
    const chunk = 8;
    // 3 block rows per binding: a [96, 40] tensor is 4 segments, [8, 40] one.
    const gpu = gpuBackend(chunk, chunk * 40 * 4 * 3);
    const cpu = createCpuBackend({ chunk });
    const shapes = [[96, 40], [8, 40], [40], [24, 40], [5, 40]];
    const data = shapes.map((s) => randn(s.reduce((a, b) => a * b, 1)));
    const params = shapes.map((s, i) => gpu.tensor(s, data[i]));
    const segments = (s: number[]): number => {
      const l = tensorLayout(s, chunk);
      return Math.ceil(l.rows / l.n1 / 3);
    };
    // Warm-up: pipelines, each block shape's bases, kept buffers at their largest.
    for (const p of params) await gpu.compress(p, 4);
    for (const [i, s] of shapes.entries()) {
      const p = params[i]!;
      const c = await cost(gpu, () => gpu.compress(p, 4));
      expect(c).toEqual({ dispatches: 3 * segments(s), submits: 1, readbacks: 1, buffersCreated: 0 });
      expect(await cost(gpu, () => gpu.read(p))).toMatchObject({ submits: 1, readbacks: 1 });
      expect(await cost(gpu, () => gpu.sumOfSquares(p))).toMatchObject({ submits: 1, readbacks: 1 });
      expect(await cost(gpu, () => gpu.gather(p, Uint32Array.of(0, p.size - 1)))).toMatchObject({
        submits: 1,
        readbacks: 1,
      });
      const r = await gpu.compress(p, 4);
      expect(await cost(gpu, () => gpu.coefficientsAt(p, r.indices, r.k))).toMatchObject({
        submits: 1,
        readbacks: 1,
      });
    }
    // A round's apply over every tensor: one submit per tensor (the peers aggregated on the device by one
    // dispatch, then one apply dispatch per segment), nothing read back, the GPU still bit-identical.
    const peers: TensorResult[][] = [];
    for (let peer = 0; peer < 3; peer++) {
      const row: TensorResult[] = [];
      for (const s of shapes)
        row.push(quantize1bit(await cpu.compress(cpu.tensor(s, randn(s.reduce((a, b) => a * b, 1))), 4)));
      peers.push(row);
    }
    const cparams = shapes.map((s, i) => cpu.tensor(s, data[i]));
    applyResults(cpu, cparams, peers, { lr: 1e-3, weightDecay: 0.1 });
    applyResults(gpu, params, peers, { lr: 1e-3, weightDecay: 0.1 }); // warm-up: kept input buffers grow
    applyResults(cpu, cparams, peers, { lr: 1e-3, weightDecay: 0.1 });
    const c = await cost(gpu, () => applyResults(gpu, params, peers, { lr: 1e-3, weightDecay: 0.1 }));
    expect(c).toEqual({
      dispatches: shapes.reduce((a, s) => a + 1 + segments(s), 0),
      submits: shapes.length,
      readbacks: 0,
      buffersCreated: 0,
    });
    for (const [i, p] of params.entries())
      expect(bits(await gpu.read(p))).toEqual(bits(await cpu.read(cparams[i]!)));
    gpu.destroy();
  });

  it('sumsOfSquares and clipByGlobalNorm: every tensor (split ones too) in one submit and one readback, the same sums as one by one', async () => {
    const chunk = 8;
    const gpu = gpuBackend(chunk, chunk * 40 * 4 * 3);
    const cpu = createCpuBackend({ chunk });
    const shapes = [[3, 5], [40], [96, 40], [8, 40], [24, 40]];
    const data = shapes.map((s) =>
      randn(
        s.reduce((a, b) => a * b, 1),
        4,
      ),
    );
    const ts = shapes.map((s, i) => gpu.tensor(s, data[i]));
    const one: number[] = [];
    for (const t of ts) one.push(await gpu.sumOfSquares(t));
    const all = await gpu.sumsOfSquares(ts);
    expect(all).toEqual(one);
    // Float32 partial sums on the GPU, float64 on the CPU: close, not equal.
    const ref = await cpu.sumsOfSquares(shapes.map((s, i) => cpu.tensor(s, data[i])));
    all.forEach((v, i) => expect(Math.abs(v - ref[i]!)).toBeLessThanOrEqual(1e-5 * ref[i]!));
    expect(await cost(gpu, () => gpu.sumsOfSquares(ts))).toMatchObject({ submits: 1, readbacks: 1 });
    // Clipping reads the norm once and scales on the GPU: the norm is the sums' root, the result has norm `clip`.
    const norm = Math.sqrt(one.reduce((a, b) => a + b, 0));
    const c = await cost(gpu, async () => expect(await clipByGlobalNorm(gpu, ts, norm / 2)).toBe(norm));
    expect(c).toMatchObject({ readbacks: 1 });
    const after = Math.sqrt((await gpu.sumsOfSquares(ts)).reduce((a, b) => a + b, 0));
    expect(after).toBeCloseTo(norm / 2, 3);
    expect(await clipByGlobalNorm(gpu, ts, 0)).toBeCloseTo(after, 6);
    expect(await gpu.sumsOfSquares([])).toEqual([]);
    gpu.destroy();
  });

  it('compressAll: every tensor of a step (split ones too) in one submit and one readback, the same results as compress', async () => {
    const chunk = 8;
    const gpu = gpuBackend(chunk, chunk * 40 * 4 * 3);
    // Smallest first, so the kept scratch must be sized for the largest before anything is recorded.
    const shapes = [[3, 5], [40], [8, 40], [96, 40], [7, 13], [24, 40]];
    const ts = shapes.map((s) => gpu.tensor(s, randn(s.reduce((a, b) => a * b, 1))));
    const all = await gpu.compressAll(ts, 4);
    expect(all).toHaveLength(shapes.length);
    for (const [i, t] of ts.entries()) {
      const one = await gpu.compress(t, 4);
      expect(all[i]!.k).toBe(one.k);
      expect(all[i]!.xshape).toEqual(one.xshape);
      expect(all[i]!.indices).toEqual(one.indices);
      expect(bits(all[i]!.values)).toEqual(bits(one.values));
    }
    const c = await cost(gpu, () => gpu.compressAll(ts, 4));
    expect(c).toMatchObject({ submits: 1, readbacks: 1, buffersCreated: 0 });
    expect(await cost(gpu, () => gpu.compressAll([], 4))).toMatchObject({ dispatches: 0 });
    gpu.destroy();
  });

  it('kept buffers grow for a larger tensor and are reused after it; results stay right across sizes', async () => {
    const chunk = 16;
    const gpu = gpuBackend(chunk);
    const cpu = createCpuBackend({ chunk });
    const u = updateScalars(1e-3, 0);
    for (const shape of [
      [16, 32],
      [64, 64],
      [16, 32],
    ]) {
      const n = shape.reduce((a, b) => a * b, 1);
      const x = randn(n);
      const rc = await cpu.selectTopk(cpu.tensor(shape, x), 5, 'raw');
      const rg = await gpu.selectTopk(gpu.tensor(shape, x), 5, 'raw');
      expect(rg.indices).toEqual(rc.indices);
      const agg = aggregateTensor(tensorLayout(shape, chunk), [rc]);
      const [pc, pg] = [cpu.tensor(shape, x), gpu.tensor(shape, x)];
      cpu.applyAggregated(pc, agg, u);
      gpu.applyAggregated(pg, agg, u);
      expect(bits(await gpu.read(pg))).toEqual(bits(await cpu.read(pc)));
    }
    gpu.destroy();
  });

  it('concurrent reads each get their own staging buffer', async () => {
    const gpu = gpuBackend(16);
    const xs = [randn(256), randn(512), randn(128)];
    const ts = xs.map((x) => gpu.tensor([x.length], x));
    const got = await Promise.all(ts.map((t) => gpu.read(t)));
    got.forEach((g, i) => expect(bits(g)).toEqual(bits(xs[i]!)));
    gpu.destroy();
  });
});
