// SparseLoCo's WGSL kernels against the CPU reference, on whatever adapter Dawn finds (SwiftShader in CI):
// local kernels within float32 noise, the outer step bit for bit, over many rounds of random peer results
// on the tiny preset's tensors (SHA-256 of all parameters), and replicas on different devices in one run.
//
// Sizing for CI (2 cores, software GPU): the raw-domain rounds touch every tiny tensor (the outer step is
// sparse: ~peers·k entries per 4 096-block); the DCT-domain rounds decode every parameter of a tensor from
// all entries of its block (~peers·k integer multiply-adds each), so they take two tensors per round at
// k ≤ 16 (~25 M multiply-adds per round).
import { createHash } from 'node:crypto';
import { parameterSpecs, PRESETS } from '@meshtrain/model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adamwScalars,
  createCpuBackend,
  createWebGpuBackend,
  outerStep,
  quantizeResult,
  tensorLayout,
  updateValue,
  type DistroBackend,
  type DistroTensor,
  type QuantTensorResult,
  type SparseDomain,
  type TensorResult,
  type WebGpuDistroBackend,
} from '../src/index.ts';
import { INT64 } from '../src/gpu/wgsl.ts';
import { dawnDevice, type Dawn } from '../src/node/index.ts';
import { bitsOf, fromBits } from './reference.ts';
import { countCalls } from './count-calls.ts';
import { rng } from './rng.ts';
import { adamw64, exactOuterUpdate } from './sparseloco-reference.ts';
import { toyRounds } from './sparseloco-toy.ts';

let dawn: Dawn | undefined;
beforeAll(async () => {
  dawn = await dawnDevice();
});
afterAll(() => dawn?.device.destroy());

const rand = rng(31);
const randn = (n: number, scale = 1): Float32Array =>
  Float32Array.from({ length: n }, () => (rand() + rand() + rand() - 1.5) * scale);

function device(): GPUDevice {
  if (!dawn)
    throw new Error('no WebGPU adapter (install chromium for SwiftShader, or set MESHTRAIN_SKIP_WEBGPU=1)');
  return dawn.device;
}

/** One peer's random quantised result: k distinct indices per chunk, values of every awkward kind. */
function randomQuant(shape: readonly number[], chunk: number, k: number, bits: number): QuantTensorResult {
  const l = tensorLayout(shape, chunk);
  const kk = Math.min(k, l.totalk);
  const indices = new Uint32Array(l.blocks * kk);
  const values = new Float32Array(l.blocks * kk);
  const scale = 10 ** (-7 + 5 * rand());
  for (let b = 0; b < l.blocks; b++) {
    const seen = new Set<number>();
    for (let j = 0; j < kk; j++) {
      let e = Math.floor(rand() * l.totalk);
      while (seen.has(e)) e = (e + 1) % l.totalk;
      seen.add(e);
      indices[b * kk + j] = e;
      const r = rand();
      values[b * kk + j] =
        r < 0.02 ? 0 : r < 0.03 ? -0 : r < 0.04 ? 2 ** -149 * Math.ceil(rand() * 9) : (rand() - 0.5) * scale;
    }
  }
  const r: TensorResult = { xshape: l.xshape, totalk: l.totalk, k: kk, indices, values, quantized: false };
  return quantizeResult(r, bits);
}

async function digest(be: DistroBackend, params: readonly DistroTensor[]): Promise<string> {
  const h = createHash('sha256');
  for (const p of params) {
    const v = await be.read(p);
    h.update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  }
  return h.digest('hex');
}

describe.runIf(process.env.MESHTRAIN_SKIP_WEBGPU !== '1')('SparseLoCo WGSL kernels', () => {
  const pair = (chunk: number, maxBindingBytes?: number): [DistroBackend, DistroBackend] => [
    createCpuBackend({ chunk }),
    createWebGpuBackend(device(), maxBindingBytes ? { chunk, maxBindingBytes } : { chunk }),
  ];

  it('AdamW: 20 steps within float32 noise of float64 and of the CPU (split bindings)', async () => {
    const shape = [48, 64];
    const n = 48 * 64;
    const [cpu, gpu] = pair(16, 16 * 64 * 4); // 3 segments
    const o = { lr: 1e-3, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.05 };
    const p0 = randn(n, 0.05);
    const ref = { p: Float64Array.from(p0), m: new Float64Array(n), v: new Float64Array(n), step: 0 };
    const state = [cpu, gpu].map((be) => ({
      be,
      p: be.tensor(shape, p0),
      g: be.tensor(shape),
      m: be.tensor(shape),
      v: be.tensor(shape),
    }));
    for (let t = 1; t <= 20; t++) {
      const g = randn(n, 10 ** (-3 + 2 * rand()));
      const s = adamwScalars(o, t);
      for (const x of state) {
        x.be.write(x.g, g);
        x.be.adamw(x.p, x.g, x.m, x.v, s);
      }
      adamw64(ref, g, o);
    }
    const [pc, pg] = await Promise.all(state.map((x) => x.be.read(x.p)));
    let worstRef = 0;
    let worstCpu = 0;
    for (let i = 0; i < n; i++) {
      worstRef = Math.max(worstRef, Math.abs(pg![i]! - ref.p[i]!));
      worstCpu = Math.max(worstCpu, Math.abs(pg![i]! - pc![i]!));
    }
    expect(worstRef).toBeLessThan(20 * o.lr * 1e-4);
    expect(worstCpu).toBeLessThan(20 * o.lr * 1e-4);
    expect(pg!.some((x, i) => x !== p0[i])).toBe(true);
    gpu.destroy();
  });

  it('error feedback, copy (also between differently split tensors) and the raw residual agree with the CPU', async () => {
    const shape = [48, 64];
    const n = 48 * 64;
    const [cpu, gpu] = pair(16, 16 * 64 * 4);
    const [e0, s0, l0] = [randn(n), randn(n), randn(n)];
    const out: Float32Array[] = [];
    for (const be of [cpu, gpu]) {
      const ef = be.tensor(shape, e0);
      be.errorFeedback(ef, be.tensor(shape, s0), be.tensor(shape, l0), 0.95);
      const r = await be.selectTopk(ef, 7, 'raw');
      be.subtractSparse(ef, r);
      out.push(await be.read(ef));
    }
    for (let i = 0; i < n; i++)
      expect(Math.abs(out[1]![i]! - out[0]![i]!)).toBeLessThanOrEqual(2.5e-7 * (1 + Math.abs(out[0]![i]!)));
    // The raw residual zeroes exactly the selected entries: 7 per 256-entry chunk.
    expect(out[1]!.filter((x) => x === 0).length).toBe(7 * 12);
    // copy between tensors of one plan, and into a wrapped external buffer: rows of 32 B and 384-B
    // bindings give owned tensors 12-row segments, while a wrapped buffer's segments must start at
    // 256-B offsets (8-row segments), so the two plans differ and copy must match ranges across them.
    const cshape = [40, 8];
    const c0 = randn(320);
    const split = createWebGpuBackend(device(), { chunk: 4, maxBindingBytes: 384 });
    const whole = createWebGpuBackend(device(), { chunk: 4 });
    const src = split.tensor(cshape, c0);
    const dst = split.tensor(cshape);
    split.copy(dst, src);
    expect(Buffer.from((await split.read(dst)).buffer).equals(Buffer.from(c0.buffer))).toBe(true);
    const ext = whole.tensor(cshape);
    const wrapped = split.wrap(whole.bufferOf(ext).buffer, cshape);
    split.copy(wrapped, src);
    expect(Buffer.from((await whole.read(ext)).buffer).equals(Buffer.from(c0.buffer))).toBe(true);
    const back = split.tensor(cshape);
    split.copy(back, wrapped);
    expect(Buffer.from((await split.read(back)).buffer).equals(Buffer.from(c0.buffer))).toBe(true);
    for (const b of [gpu, split, whole]) b.destroy();
  });

  it('raw top-k is the CPU selection exactly; DCT top-k is compress', async () => {
    for (const [shape, chunk, topk, limit] of [
      [[64, 96], 16, 5, undefined],
      [[300], 64, 8, undefined],
      [[128, 40], 8, 4, 8 * 40 * 4 * 3],
    ] as [number[], number, number, number | undefined][]) {
      const [cpu, gpu] = pair(chunk, limit);
      const x = randn(shape.reduce((a, b) => a * b, 1)).map((v, i) => (i % 13 === 0 ? 0.25 : v)); // ties
      const rc = await cpu.selectTopk(cpu.tensor(shape, x), topk, 'raw');
      const rg = await gpu.selectTopk(gpu.tensor(shape, x), topk, 'raw');
      expect(rg.indices).toEqual(rc.indices);
      expect(rg.values).toEqual(rc.values);
      const t = gpu.tensor(shape, x);
      const [a, b] = [await gpu.selectTopk(t, topk, 'dct'), await gpu.compress(t, topk)];
      expect(a.indices).toEqual(b.indices);
      expect(a.values).toEqual(b.values);
      gpu.destroy();
    }
  });

  it('exact_update_value: RN_f32(p·f − l·a) bit for bit with the CPU and the BigInt reference', async () => {
    const d = device();
    const specials = [
      0,
      -0,
      1,
      -1,
      1.5,
      2 ** -149,
      -(2 ** -149),
      2 ** -126,
      1e-40,
      65504,
      3.4028234663852886e38,
    ];
    const cases: number[][] = [];
    for (const p of [...specials, Infinity, NaN])
      for (const l of [0, 1, 1e-3, 2 ** -140, 3e38])
        for (const a of [...specials, -3.4028234663852886e38]) cases.push([p, 1, l, a].map(Math.fround));
    for (let i = 0; i < 30000; i++) {
      const l = Math.fround(10 ** (-6 * rand()));
      const a =
        i % 3 ? fromBits(((rand() * 2 ** 32) >>> 0) & 0xff7fffff) : Math.fround((rand() - 0.5) * 1e-3);
      const near = Math.fround(l * a * (1 + (rand() - 0.5) * 2 ** -20)); // cancellation
      const p = i % 2 ? fromBits((rand() * 2 ** 32) >>> 0) : near;
      cases.push([p, i % 5 ? 1 : Math.fround(1 - rand() * 1e-3), l, Number.isFinite(a) ? a : 0]);
    }
    const input = new Uint32Array(cases.flatMap((c) => c.map(bitsOf)));
    const code = `${INT64}
@group(0) @binding(0) var<storage, read> inp: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> outp: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * 65535u * 64u;
  if (i >= arrayLength(&outp)) { return; }
  let c = inp[i];
  outp[i] = exact_update_value(c.x, c.y, c.z, c.w);
}`;
    const n = cases.length;
    const inBuf = d.createBuffer({
      size: input.byteLength,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    d.queue.writeBuffer(inBuf, 0, input);
    const outBuf = d.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const read = d.createBuffer({ size: n * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const pipe = d.createComputePipeline({
      layout: 'auto',
      compute: { module: d.createShaderModule({ code }), entryPoint: 'main' },
    });
    const enc = d.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipe);
    pass.setBindGroup(
      0,
      d.createBindGroup({
        layout: pipe.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: inBuf } },
          { binding: 1, resource: { buffer: outBuf } },
        ],
      }),
    );
    pass.dispatchWorkgroups(Math.min(Math.ceil(n / 64), 65535), Math.ceil(n / 64 / 65535));
    pass.end();
    enc.copyBufferToBuffer(outBuf, 0, read, 0, n * 4);
    d.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    const got = new Uint32Array(read.getMappedRange().slice(0));
    read.unmap();
    let bad = 0;
    for (let i = 0; i < n; i++) {
      const [p, f, l, a] = cases[i] as [number, number, number, number];
      const want = Number.isFinite(p) ? bitsOf(updateValue(p, f, l, a)) : bitsOf(p);
      if (f === 1 && Number.isFinite(p)) expect(bitsOf(exactOuterUpdate(p, l, a))).toBe(want);
      if (got[i] !== want && bad++ < 5)
        expect({ p, f, l, a, got: got[i]!.toString(16) }).toEqual({ p, f, l, a, got: want.toString(16) });
    }
    expect(bad).toBe(0);
    for (const b of [inBuf, outBuf, read]) b.destroy();
  });

  it('applyOuter is bit-identical to the CPU in both domains (split bindings, several peers and bit widths)', async () => {
    for (const [shape, chunk, limit] of [
      [[64, 48], 16, 16 * 48 * 4],
      [[200], 64, undefined],
      [[3, 8, 12], 4, 4 * 12 * 4 * 2],
    ] as [number[], number, number | undefined][])
      for (const domain of ['raw', 'dct'] as SparseDomain[]) {
        const [cpu, gpu] = pair(chunk, limit);
        const n = shape.reduce((a, b) => a * b, 1);
        const p0 = randn(n, 0.1).map((x, i) => (i === 1 ? -0 : i === 2 ? 2 ** -149 : x));
        const pc = cpu.tensor(shape, p0);
        const pg = gpu.tensor(shape, p0);
        for (let round = 0; round < 4; round++) {
          const peers = 1 + Math.floor(rand() * 4);
          const results = Array.from({ length: peers }, () => [
            randomQuant(shape, chunk, 1 + Math.floor(rand() * 6), 1 + Math.floor(rand() * 8)),
          ]);
          const o = {
            lr: 10 ** (-3 + 3 * rand()),
            domain,
            divideBy: round % 2 ? ('results' as const) : ('senders' as const),
          };
          outerStep(cpu, [pc], results, o);
          outerStep(gpu, [pg], results, o);
        }
        await gpu.finish();
        const a = await cpu.read(pc);
        const b = await gpu.read(pg);
        expect([shape, domain, Buffer.from(b.buffer).equals(Buffer.from(a.buffer))]).toEqual([
          shape,
          domain,
          true,
        ]);
        expect(a.some((v, i) => bitsOf(v) !== bitsOf(p0[i]!))).toBe(true);
        gpu.destroy();
      }
  });

  it('the outer step aggregates on the device in both domains, bit-identical to the host, and falls back beyond its limits', async () => {
    const shape = [96, 32];
    const chunk = 16;
    const l = tensorLayout(shape, chunk);
    /** Results of `peers` peers: the same indices in every peer when `same`, values of awkward magnitudes. */
    const quant = (
      peers: number,
      k: number,
      same: boolean,
      scale: number,
      bits: number,
    ): QuantTensorResult[][] => {
      const base = randomQuant(shape, chunk, k, bits);
      return Array.from({ length: peers }, (_, p) => {
        const values = randn(l.blocks * k, scale).map((v, i) =>
          i % 11 === 0 ? 0 : i % 13 === 0 ? -0 : i % 17 === 0 ? 2 ** -149 * (1 + (i % 5)) : v,
        );
        const indices = same ? base.indices : randomQuant(shape, chunk, k, bits).indices;
        const r: TensorResult = { xshape: l.xshape, totalk: l.totalk, k, indices, values, quantized: false };
        return [quantizeResult(r, p % 2 ? bits : 8)];
      });
    };
    const cases: {
      peers: number;
      k: number;
      same: boolean;
      scale: number;
      divideBy: 'senders' | 'results';
    }[] = [
      { peers: 3, k: 5, same: false, scale: 1e-3, divideBy: 'senders' },
      { peers: 6, k: 16, same: true, scale: 3e37, divideBy: 'senders' },
      { peers: 5, k: 64, same: false, scale: 1e-40, divideBy: 'results' },
      { peers: 127, k: 8, same: true, scale: 0.5, divideBy: 'senders' },
      { peers: 127, k: 8, same: false, scale: 2, divideBy: 'results' },
      { peers: 128, k: 4, same: true, scale: 1, divideBy: 'senders' }, // past the device path's bound
    ];
    for (const c of cases.flatMap((x) => (['raw', 'dct'] as const).map((domain) => ({ ...x, domain })))) {
      const [cpu, gpu] = pair(chunk, 32 * 32 * 4); // 3 segments
      const { spied, calls: host } = countCalls(gpu, 'applyOuter');
      const p0 = randn(l.size, 0.1).map((x, i) => (i === 1 ? -0 : i === 2 ? 2 ** -149 : x));
      const pc = cpu.tensor(shape, p0);
      const pg = gpu.tensor(shape, p0);
      const results = quant(c.peers, c.k, c.same, c.scale, 2);
      const o = { lr: 0.37, domain: c.domain, divideBy: c.divideBy };
      const before = { ...(gpu as WebGpuDistroBackend).stats };
      outerStep(cpu, [pc], results, o);
      outerStep(spied, [pg], results, o);
      const stats = { ...(gpu as WebGpuDistroBackend).stats };
      const a = await cpu.read(pc);
      const b = await gpu.read(pg);
      const viaHost = c.peers > 127;
      expect({
        ...c,
        identical: Buffer.from(b.buffer).equals(Buffer.from(a.buffer)),
      }).toEqual({
        ...c,
        identical: true,
      });
      expect(a.some((v, i) => bitsOf(v) !== bitsOf(p0[i]!))).toBe(true);
      expect(host.n).toBe(viaHost ? 1 : 0);
      if (!viaHost) {
        // One dispatch per segment (after the aggregate's in the DCT domain) in one submit, nothing read back.
        expect(stats.dispatches - before.dispatches).toBe(c.domain === 'dct' ? 4 : 3);
        expect(stats.submits - before.submits).toBe(1);
        expect(stats.readbacks - before.readbacks).toBe(0);
      }
      gpu.destroy();
    }
    // Results of different k cannot share the device path's layout: the host aggregates them.
    const [cpu, gpu] = pair(chunk);
    const { spied, calls: host } = countCalls(gpu, 'applyOuter');
    const p0 = randn(l.size, 0.1);
    const [pc, pg] = [cpu.tensor(shape, p0), gpu.tensor(shape, p0)];
    const mixed = [[randomQuant(shape, chunk, 3, 2)], [randomQuant(shape, chunk, 7, 2)]];
    // Hostile peers naming one coordinate eight times per chunk, the same one in all 20: 160 entries on it,
    // more than the device's integer fields are sized for. The host aggregates those too.
    const repeated = Array.from({ length: 20 }, () => {
      const r = randomQuant(shape, chunk, 8, 2);
      return [{ ...r, indices: r.indices.map((_, i) => (Math.floor(i / 8) * 7) % l.totalk) }];
    });
    for (const domain of ['raw', 'dct'] as const)
      for (const peers of [mixed, repeated]) {
        outerStep(cpu, [pc], peers, { lr: 1, domain });
        outerStep(spied, [pg], peers, { lr: 1, domain });
      }
    expect(Buffer.from((await gpu.read(pg)).buffer).equals(Buffer.from((await cpu.read(pc)).buffer))).toBe(
      true,
    );
    expect(host.n).toBe(4);
    gpu.destroy();
  });

  it(
    'many rounds on the tiny preset: identical parameter hashes on CPU and WGSL',
    { timeout: 600_000 },
    async () => {
      const specs = parameterSpecs(PRESETS.tiny);
      const chunk = 64;
      const [cpu, gpu] = pair(chunk);
      const init = rng(41);
      const data = specs.map((s) =>
        Float32Array.from({ length: s.shape.reduce((a, b) => a * b, 1) }, () => (init() - 0.5) * 0.04),
      );
      const params = [cpu, gpu].map((be) => specs.map((s, i) => be.tensor(s.shape, data[i])));
      const before = await digest(cpu, params[0]!);
      const t0 = performance.now();
      let updates = 0;
      // 60 raw rounds over every tensor, then 40 DCT rounds over two tensors each.
      for (let round = 0; round < 100; round++) {
        const domain: SparseDomain = round < 60 ? 'raw' : 'dct';
        const chosen =
          domain === 'raw'
            ? specs.map((_, i) => i)
            : [...new Set([round % specs.length, Math.floor(rand() * specs.length)])].sort((a, b) => a - b);
        const peers = 1 + Math.floor(rand() * 4);
        const k =
          domain === 'raw' ? [1, 8, 32, 64][Math.floor(rand() * 4)]! : [1, 4, 16][Math.floor(rand() * 3)]!;
        const results = Array.from({ length: peers }, () =>
          chosen.map((i) => randomQuant(specs[i]!.shape, chunk, k, 1 + Math.floor(rand() * 4))),
        );
        const o = {
          lr: 10 ** (-3 + 3 * rand()),
          domain,
          divideBy: rand() < 0.8 ? ('senders' as const) : ('results' as const),
        };
        for (const [j, be] of [cpu, gpu].entries())
          outerStep(
            be,
            chosen.map((i) => params[j]![i]!),
            results,
            o,
          );
        await gpu.finish();
        updates += chosen.reduce((s, i) => s + params[0]![i]!.size, 0);
      }
      const [hc, hg] = [await digest(cpu, params[0]!), await digest(gpu, params[1]!)];
      console.log(
        `sparseloco determinism: 100 rounds (60 raw, 40 dct), ${(updates / 1e6).toFixed(1)} M parameters visited in ${((performance.now() - t0) / 1000).toFixed(1)} s (${dawn!.description}); sha256 ${hc}`,
      );
      expect(hc).not.toBe(before);
      expect(hg).toBe(hc);
      gpu.destroy();
    },
  );

  it('one run with a WGSL peer and two CPU peers: every replica bit-identical, training progresses', async () => {
    for (const domain of ['raw', 'dct'] as SparseDomain[]) {
      const backends = [
        createWebGpuBackend(device(), { chunk: 16 }),
        createCpuBackend({ chunk: 16 }),
        createCpuBackend({ chunk: 16 }),
      ];
      const { loss, replicas } = await toyRounds(backends, domain, 12);
      for (const r of replicas.slice(1))
        expect(Buffer.from(r.buffer).equals(Buffer.from(replicas[0]!.buffer))).toBe(true);
      expect(loss.at(-1)!).toBeLessThan(loss[0]! * 0.3);
      backends[0]!.destroy();
    }
  });
});
