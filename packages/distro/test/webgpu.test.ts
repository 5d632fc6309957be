// WGSL kernels against the CPU reference, on whatever adapter Dawn finds (SwiftShader in CI).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  applyResults,
  createCpuBackend,
  createWebGpuBackend,
  planSegments,
  quantize1bit,
  tensorLayout,
  updateScalars,
  updateValue,
  type DistroBackend,
  type TensorResult,
  type WebGpuDistroBackend,
} from '../src/index.ts';
import { INT64 } from '../src/gpu/wgsl.ts';
import { dawnDevice, type Dawn } from '../src/node/index.ts';
import { bitsOf, fromBits } from './reference.ts';
import { countCalls } from './count-calls.ts';
import { rng } from './rng.ts';

let dawn: Dawn | undefined;
beforeAll(async () => {
  dawn = await dawnDevice();
});
afterAll(() => dawn?.device.destroy());

const rand = rng(11);
const randn = (n: number, scale = 1): Float32Array =>
  Float32Array.from({ length: n }, () => (rand() - 0.5) * scale);

describe('segment planning', () => {
  it('splits at block rows within the byte limit', () => {
    // 10 rows of 8 floats (32 B each), blocks of 2 rows (64 B); 150 B fits 2 block rows.
    expect(planSegments(10, 8, 2, 150).map((s) => [s.firstRow, s.rowCount])).toEqual([
      [0, 4],
      [4, 4],
      [8, 2],
    ]);
    expect(planSegments(10, 8, 2, 1 << 20)).toHaveLength(1);
    expect(() => planSegments(10, 8, 2, 63)).toThrow(/block row/);
  });
  it('honours an offset alignment for ranges of one buffer', () => {
    // rows of 3 floats = 12 B; 256-B alignment means segment starts at multiples of 64 rows.
    const s = planSegments(256, 3, 1, 1000, 256);
    expect(s.map((x) => x.firstRow)).toEqual([0, 64, 128, 192]);
    for (const x of s) expect((x.offset * 4) % 256).toBe(0);
  });
});

describe.runIf(process.env.MESHTRAIN_SKIP_WEBGPU !== '1')('WGSL kernels', () => {
  const backends = (chunk: number, maxBindingBytes?: number): [DistroBackend, DistroBackend] => {
    if (!dawn)
      throw new Error('no WebGPU adapter (install chromium for SwiftShader, or set MESHTRAIN_SKIP_WEBGPU=1)');
    return [
      createCpuBackend({ chunk }),
      createWebGpuBackend(dawn.device, maxBindingBytes ? { chunk, maxBindingBytes } : { chunk }),
    ];
  };

  it('exact_update matches the CPU bit for bit, edge cases included', async () => {
    const device = dawn!.device;
    const cases: number[][] = [];
    const specials = [
      0,
      -0,
      1,
      -1,
      1.5,
      2 ** -149,
      -(2 ** -149),
      2 ** -126,
      -(2 ** -126) * 1.5,
      3.4028234663852886e38,
      -3.4028234663852886e38,
      1e-40,
      65504,
      Infinity,
      NaN,
    ];
    const scalars = [
      updateScalars(1e-3, 0.1),
      updateScalars(1, 0),
      updateScalars(0, 0),
      updateScalars(2 ** -20, 1),
      updateScalars(1e30, 1e-30),
      updateScalars(0.5, 2),
      updateScalars(3e38, 0),
    ];
    for (const p of specials)
      for (const u of scalars)
        for (const s of [-1, 0, 1]) cases.push([bitsOf(p), bitsOf(u.factor), bitsOf(u.step), s]);
    for (let i = 0; i < 40000; i++) {
      const u = updateScalars(2 ** (-30 * rand()) * rand(), rand() < 0.3 ? 0 : rand());
      const p =
        i % 2 ? fromBits((rand() * 2 ** 32) >>> 0) : Math.fround(u.step * (1 + (rand() - 0.5) * 2 ** -18));
      cases.push([bitsOf(p), bitsOf(u.factor), bitsOf(u.step), Math.floor(rand() * 3) - 1]);
    }
    cases.push(
      [bitsOf(1), bitsOf(1), bitsOf(2 ** -24), 1],
      [bitsOf(1 + 2 ** -23), bitsOf(1), bitsOf(2 ** -24), 1],
    );
    const input = new Int32Array(cases.flat());
    const code = `${INT64}
@group(0) @binding(0) var<storage, read> inp: array<vec4<i32>>;
@group(0) @binding(1) var<storage, read_write> outp: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * 65535u * 64u;
  if (i >= arrayLength(&outp)) { return; }
  let c = inp[i];
  outp[i] = exact_update(bitcast<u32>(c.x), bitcast<u32>(c.y), bitcast<u32>(c.z), c.w);
}`;
    const n = cases.length;
    const inBuf = device.createBuffer({
      size: input.byteLength,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    device.queue.writeBuffer(inBuf, 0, input);
    const outBuf = device.createBuffer({
      size: n * 4,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC,
    });
    const read = device.createBuffer({
      size: n * 4,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const pipe = device.createComputePipeline({
      layout: 'auto',
      compute: { module: device.createShaderModule({ code }), entryPoint: 'main' },
    });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(
      0,
      device.createBindGroup({
        layout: pipe.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: inBuf } },
          { binding: 1, resource: { buffer: outBuf } },
        ],
      }),
    );
    pass.dispatchWorkgroups(Math.ceil(n / 64));
    pass.end();
    enc.copyBufferToBuffer(outBuf, 0, read, 0, n * 4);
    device.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    const got = new Uint32Array(read.getMappedRange().slice(0));
    read.unmap();
    let bad = 0;
    for (let i = 0; i < n; i++) {
      const [pb, fb, lb, s] = cases[i] as [number, number, number, number];
      const p = fromBits(pb);
      const want = Number.isFinite(p) ? bitsOf(updateValue(p, fromBits(fb), fromBits(lb), s)) : pb;
      if (got[i] !== want && bad++ < 5)
        expect({ p, f: fromBits(fb), l: fromBits(lb), s, got: got[i]!.toString(16) }).toEqual({
          p,
          f: fromBits(fb),
          l: fromBits(lb),
          s,
          got: want.toString(16),
        });
    }
    expect(bad).toBe(0);
  });

  it('compress agrees with the CPU: same top-k sets up to near-ties, values within 1e-5', async () => {
    for (const [shape, chunk, topk, limit] of [
      [[64, 96], 16, 5, undefined],
      [[300], 64, 8, undefined],
      [[2, 12, 20], 8, 3, undefined],
      [[128, 40], 8, 4, 8 * 40 * 4 * 3], // 3 block rows per binding → 6 segments
      [[50, 29], 64, 7, undefined],
    ] as [number[], number, number, number | undefined][]) {
      const [cpu, gpu] = backends(chunk, limit);
      const x = randn(shape.reduce((a, b) => a * b, 1));
      const rc = await cpu.compress(cpu.tensor(shape, x), topk);
      const rg = await gpu.compress(gpu.tensor(shape, x), topk);
      const l = tensorLayout(shape, chunk);
      expect(rg.k).toBe(rc.k);
      const coefCpu = await cpu.compress(cpu.tensor(shape, x), 1 << 20); // all coefficients, to judge ties
      for (let b = 0; b < l.blocks; b++) {
        const all = new Map<number, number>();
        for (let j = 0; j < l.totalk; j++)
          all.set(coefCpu.indices[b * l.totalk + j]!, Math.abs(coefCpu.values[b * l.totalk + j]!));
        const setC = new Set(rc.indices.slice(b * rc.k, (b + 1) * rc.k));
        const kth = Math.min(...[...setC].map((i) => all.get(i)!));
        for (let j = 0; j < rg.k; j++) {
          const e = rg.indices[b * rg.k + j]!;
          const v = rg.values[b * rg.k + j]!;
          const ref = coefCpu.values[b * l.totalk + e]!;
          expect(Math.abs(v - ref)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(ref)));
          if (!setC.has(e)) expect(Math.abs(all.get(e)! - kth)).toBeLessThanOrEqual(1e-6);
        }
      }
      gpu.destroy();
    }
  });

  it('encode → residual decode round trip with topk = totalk, split across bindings', async () => {
    const shape = [96, 48];
    const [, gpu] = backends(16, 16 * 48 * 4 * 2);
    const x = randn(96 * 48);
    const t = gpu.tensor(shape, x);
    const r = await gpu.compress(t, 256);
    gpu.subtractResidual(t, r);
    for (const v of await gpu.read(t)) expect(Math.abs(v)).toBeLessThan(1e-5);
    gpu.destroy();
  });

  it('bufferOf: one contiguous buffer for split and whole tensors; wrap reads it back; readback counted', async () => {
    const device = dawn!.device;
    const shape = [96, 48];
    const x = randn(96 * 48);
    // Split into segments (temporary copy) and whole (the tensor's own buffer).
    for (const maxBindingBytes of [16 * 48 * 4 * 2, undefined]) {
      const gpu = createWebGpuBackend(
        device,
        maxBindingBytes ? { chunk: 16, maxBindingBytes } : { chunk: 16 },
      );
      const t = gpu.tensor(shape, x);
      const { buffer, temporary } = gpu.bufferOf(t);
      expect(temporary).toBe(maxBindingBytes !== undefined);
      // The contiguous buffer, wrapped as a tensor of a backend without splitting, holds the same values.
      const whole = createWebGpuBackend(device, { chunk: 16 });
      const before = { ...whole.stats };
      const back = await whole.read(whole.wrap(buffer, shape));
      expect(whole.stats.tensorReadBytes - before.tensorReadBytes).toBe(x.byteLength);
      expect(whole.stats.readbackBytes).toBe(before.readbackBytes);
      await whole.sumOfSquares(whole.wrap(buffer, shape));
      expect(whole.stats.readbackBytes).toBeGreaterThan(before.readbackBytes);
      expect(Buffer.from(back.buffer).equals(Buffer.from(x.buffer))).toBe(true);
      if (temporary) buffer.destroy();
      gpu.destroy();
      whole.destroy();
    }
  });

  it('momentum, scale, sign step and Σx² agree with the CPU', async () => {
    const shape = [40, 64];
    const [cpu, gpu] = backends(16, 16 * 64 * 4);
    const d0 = randn(2560);
    const g0 = randn(2560);
    const p0 = randn(2560);
    const out: Float32Array[][] = [];
    for (const be of [cpu, gpu]) {
      const d = be.tensor(shape, d0);
      const g = be.tensor(shape, g0);
      const p = be.tensor(shape, p0);
      const o = be.tensor(shape);
      be.momentum(d, g, 0.999, 0.01);
      be.scale(g, 0.5);
      be.signStep(o, p, d, 0.001);
      out.push([
        await be.read(d),
        await be.read(g),
        await be.read(o),
        Float32Array.of(await be.sumOfSquares(p)),
      ]);
    }
    for (let i = 0; i < 4; i++)
      for (let j = 0; j < out[0]![i]!.length; j++) expect(out[1]![i]![j]).toBeCloseTo(out[0]![i]![j]!, 5);
    gpu.destroy();
  });

  it('gather reads exactly the named entries, across split bindings, without reading the tensor', async () => {
    const shape = [40, 64];
    const [cpu, gpu] = backends(16, 16 * 64 * 4);
    const data = randn(2560);
    const offsets = Uint32Array.from([0, 2559, 1023, 1024, 17, 17, 2048, 5]);
    const want = Float32Array.from(offsets, (o) => data[o]!);
    expect(await cpu.gather(cpu.tensor(shape, data), offsets)).toEqual(want);
    const g = gpu as DistroBackend & { stats: { readbackBytes: number; tensorReadBytes: number } };
    const t = g.tensor(shape, data);
    const before = { ...g.stats };
    expect(await g.gather(t, offsets)).toEqual(want);
    expect(g.stats.tensorReadBytes).toBe(before.tensorReadBytes);
    expect(g.stats.readbackBytes - before.readbackBytes).toBe(offsets.length * 4);
    await expect(cpu.gather(cpu.tensor(shape, data), Uint32Array.of(2560))).rejects.toThrow(/outside/);
    gpu.destroy();
  });

  it('coefficientsAt gives the DCT coefficients a result names, as compress computes them', async () => {
    const shape = [40, 64];
    const [cpu, gpu] = backends(16, 16 * 64 * 4);
    const data = randn(2560);
    for (const be of [cpu, gpu]) {
      const t = be.tensor(shape, data);
      const all = await be.compress(t, 1 << 20); // every coefficient of every block, with its index
      const top = await be.compress(t, 5);
      const got = await be.coefficientsAt(t, top.indices, top.k);
      for (let i = 0; i < got.length; i++) expect(got[i]).toBeCloseTo(top.values[i]!, 5);
      // An arbitrary selection: the coefficient at in-block index (blk·7) mod totalk of every block.
      const pick = Uint32Array.from(
        { length: all.indices.length / all.k },
        (_, blk) => (blk * 7) % all.totalk,
      );
      const at = await be.coefficientsAt(t, pick, 1);
      for (let blk = 0; blk < pick.length; blk++) {
        const j = Array.from(all.indices.subarray(blk * all.k, (blk + 1) * all.k)).indexOf(pick[blk]!);
        expect(at[blk]).toBeCloseTo(all.values[blk * all.k + j]!, 5);
      }
    }
    gpu.destroy();
  });

  it('apply is bit-identical to the CPU (float and 1-bit results, weight decay, split bindings)', async () => {
    for (const [shape, chunk, limit] of [
      [[64, 48], 16, 16 * 48 * 4],
      [[200], 64, undefined],
      [[3, 8, 12], 4, undefined],
    ] as [number[], number, number | undefined][]) {
      const [cpu, gpu] = backends(chunk, limit);
      const n = shape.reduce((a, b) => a * b, 1);
      const p0 = randn(n, 0.1);
      for (const quantized of [false, true]) {
        const results: TensorResult[][] = [];
        for (let peer = 0; peer < 3; peer++) {
          const r = await cpu.compress(cpu.tensor(shape, randn(n)), 3);
          results.push([quantized ? quantize1bit(r) : r]);
        }
        const pc = cpu.tensor(shape, p0);
        const pg = gpu.tensor(shape, p0);
        for (const [be, p] of [
          [cpu, pc],
          [gpu, pg],
        ] as const) {
          applyResults(be, [p], results, { lr: 1e-3, weightDecay: 0.1 });
          applyResults(be, [p], results.slice(1), { lr: 3e-4 });
          await be.finish();
        }
        const a = new Uint32Array((await cpu.read(pc)).buffer);
        const b = new Uint32Array((await gpu.read(pg)).buffer);
        expect(Buffer.from(b.buffer).equals(Buffer.from(a.buffer))).toBe(true);
        expect(a.some((v, i) => v !== bitsOf(p0[i]!))).toBe(true);
      }
      gpu.destroy();
    }
  });
  it('the apply aggregates the peers on the device, bit-identical to the host, and falls back beyond its limits', async () => {
    const shape = [96, 32];
    const chunk = 16;
    const l = tensorLayout(shape, chunk);
    /** One peer's result: k distinct indices per chunk (`base`'s when given), values of awkward magnitudes. */
    const result = (k: number, quantized: boolean, scale: number, base?: Uint32Array): TensorResult => {
      const indices = base ?? new Uint32Array(l.blocks * k);
      if (!base)
        for (let b = 0; b < l.blocks; b++) {
          const seen = new Set<number>();
          while (seen.size < k) seen.add(Math.floor(rand() * l.totalk));
          indices.set([...seen], b * k);
        }
      const values = randn(l.blocks * k, scale).map((v, i) =>
        i % 11 === 0 ? 0 : i % 13 === 0 ? -0 : i % 17 === 0 ? 2 ** -149 * (1 + (i % 5)) : v,
      );
      const r: TensorResult = { xshape: l.xshape, totalk: l.totalk, k, indices, values, quantized: false };
      return quantized ? quantize1bit(r) : r;
    };
    const cases = [
      { peers: 3, k: 5, quantized: false, same: false, scale: 1e-3 },
      { peers: 6, k: 16, quantized: true, same: true, scale: 1 },
      { peers: 5, k: 64, quantized: false, same: false, scale: 1e-40 },
      { peers: 4, k: 8, quantized: false, same: true, scale: 3e38 },
      { peers: 127, k: 8, quantized: true, same: true, scale: 1 },
      { peers: 127, k: 8, quantized: false, same: false, scale: 2 },
      { peers: 128, k: 4, quantized: true, same: true, scale: 1 }, // past the device aggregate's bound
    ];
    for (const c of cases) {
      const [cpu, gpu] = backends(chunk, 32 * 32 * 4); // 3 segments
      const { spied, calls: host } = countCalls(gpu, 'applyAggregated');
      const base = c.same ? result(c.k, false, 1).indices : undefined;
      const peers = Array.from({ length: c.peers }, () => [result(c.k, c.quantized, c.scale, base)]);
      const p0 = randn(l.size, 0.1).map((x, i) => (i === 1 ? -0 : i === 2 ? 2 ** -149 : x));
      const pc = cpu.tensor(shape, p0);
      const pg = gpu.tensor(shape, p0);
      const stats = (gpu as WebGpuDistroBackend).stats;
      const before = { ...stats };
      applyResults(cpu, [pc], peers, { lr: 0.37, weightDecay: 0.1 });
      applyResults(spied, [pg], peers, { lr: 0.37, weightDecay: 0.1 });
      const after = { ...stats };
      const a = await cpu.read(pc);
      const b = await gpu.read(pg);
      expect({ ...c, identical: Buffer.from(b.buffer).equals(Buffer.from(a.buffer)) }).toEqual({
        ...c,
        identical: true,
      });
      expect(a.some((v, i) => bitsOf(v) !== bitsOf(p0[i]!))).toBe(true);
      const onHost = c.peers > 127;
      expect(host.n).toBe(onHost ? 1 : 0);
      if (!onHost)
        // The aggregate and one apply per segment in one submit, nothing read back.
        expect([
          after.dispatches - before.dispatches,
          after.submits - before.submits,
          after.readbacks - before.readbacks,
        ]).toEqual([4, 1, 0]);
      gpu.destroy();
    }
    // Results of different k do not share one layout of entries: the host aggregates them.
    const [cpu, gpu] = backends(chunk);
    const { spied, calls: host } = countCalls(gpu, 'applyAggregated');
    const p0 = randn(l.size, 0.1);
    const [pc, pg] = [cpu.tensor(shape, p0), gpu.tensor(shape, p0)];
    const mixed = [[result(3, true, 1)], [result(7, true, 1)]];
    // Hostile peers naming one coordinate eight times per chunk, the same one in all 20: 160 entries on it,
    // more than the device's integer fields are sized for. The host aggregates those too.
    const repeated = Array.from({ length: 20 }, () => {
      const r = result(8, false, 1);
      return [{ ...r, indices: r.indices.map((_, i) => (Math.floor(i / 8) * 7) % l.totalk) }];
    });
    for (const peers of [mixed, repeated]) {
      applyResults(cpu, [pc], peers, { lr: 1e-2 });
      applyResults(spied, [pg], peers, { lr: 1e-2 });
    }
    expect(Buffer.from((await gpu.read(pg)).buffer).equals(Buffer.from((await cpu.read(pc)).buffer))).toBe(
      true,
    );
    expect(host.n).toBe(2);
    gpu.destroy();
  });
});
