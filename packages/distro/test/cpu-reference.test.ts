import { describe, expect, it } from 'vitest';
import {
  aggregateTensor,
  applyResults,
  createCpuBackend,
  dctBasis64,
  fixedMean,
  indexBytes,
  integerDctBasis,
  narrowIndices,
  packSigns,
  quantize1bit,
  smallerSplit,
  tensorLayout,
  unpackSigns,
  updateScalars,
  updateValue,
  VALUE_ONE,
  widenIndices,
  type TensorResult,
} from '../src/index.ts';
import { bitsOf, cosineDct, dct2d, exactUpdateReference, fromBits } from './reference.ts';

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('chunk choice (docs/protocol.md "Chunk choice")', () => {
  it('matches Psyche fixtures', () => {
    expect(smallerSplit(12, 5)).toBe(4);
    expect(smallerSplit(100, 7)).toBe(5);
    expect(smallerSplit(100, 26)).toBe(25);
    expect(smallerSplit(100, 101)).toBe(100);
    expect(smallerSplit(1e9 + 7, 5e8)).toBe(1);
    expect(smallerSplit(50257, 64)).toBe(29);
    expect(smallerSplit(32000, 64)).toBe(64);
  });
  it('lays out 1-D and 2-D tensors as Psyche encodes them', () => {
    expect(tensorLayout([256], 64)).toMatchObject({ xshape: [4, 64], totalk: 64, n1: 1, n2: 64, blocks: 4 });
    expect(tensorLayout([768, 256], 64)).toMatchObject({ xshape: [12, 4, 64, 64], totalk: 4096, blocks: 48 });
    expect(tensorLayout([2, 6, 10], 4)).toMatchObject({
      xshape: [2, 2, 5, 3, 2],
      rows: 12,
      n1: 3,
      n2: 2,
      blocks: 20,
    });
  });
});

describe('DCT (docs/protocol.md "DCT blocks and xshape")', () => {
  it('N=4 basis row 0 and the DCT of arange(8)', () => {
    const F = dctBasis64(4);
    // Row 0 of F = F[0, k] for k = 0..3 = table[k·4 + 0].
    const row0 = [0, 1, 2, 3].map((k) => F[k * 4]!);
    expect(row0.map((v) => +v.toFixed(4))).toEqual([0.5, 0.6533, 0.5, 0.2706]);
  });
  it('compress with topk = totalk returns the full DCT of arange(8)', async () => {
    const be = createCpuBackend({ chunk: 8 });
    const r = await be.compress(be.tensor([8], Float32Array.from([0, 1, 2, 3, 4, 5, 6, 7])), 8);
    expect([...r.indices]).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const want = [9.8995, -6.4423, 0, -0.6735, 0, -0.2009, 0, -0.0507];
    r.values.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 4));
  });
  it('2-D blocks agree with the cosine-formula double sum', async () => {
    const rand = rng(1);
    const shape = [12, 10]; // chunk 5 → n1 = 4, n2 = 5
    const x = Float32Array.from({ length: 120 }, () => rand() * 2 - 1);
    const be = createCpuBackend({ chunk: 5 });
    const r = await be.compress(be.tensor(shape, x), 1000);
    const l = tensorLayout(shape, 5);
    for (let blk = 0; blk < l.blocks; blk++) {
      const by = Math.floor(blk / l.blocksX);
      const bx = blk % l.blocksX;
      const block = Array.from({ length: 4 }, (_, h) =>
        Array.from({ length: 5 }, (_, w) => x[(by * 4 + h) * 10 + bx * 5 + w]!),
      );
      const ref = dct2d(block);
      for (let j = 0; j < 20; j++) {
        const e = r.indices[blk * 20 + j]!;
        expect(r.values[blk * 20 + j]).toBeCloseTo(ref[Math.floor(e / 5)]![e % 5]!, 5);
      }
    }
  });
  it('encode → decode round trip with topk = totalk', async () => {
    const rand = rng(2);
    for (const shape of [[64], [96, 40], [3, 16, 24]]) {
      const be = createCpuBackend({ chunk: 8 });
      const x = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rand() - 0.5);
      const t = be.tensor(shape, x);
      const r = await be.compress(t, 1 << 20);
      be.subtractResidual(t, r);
      for (const v of await be.read(t)) expect(Math.abs(v)).toBeLessThan(1e-5);
    }
  });
});

describe('top-k, quantisation, narrowing (docs/protocol.md "Top-k and 1-bit signs")', () => {
  it('keeps the k largest |coefficients| per chunk, ties to the lower index', async () => {
    const be = createCpuBackend({ chunk: 4 });
    // DCT of a one-hot at position 0 of a length-4 chunk: coefficients F[0,k] = [0.5, .65, .5, .27].
    const r = await be.compress(be.tensor([8], Float32Array.from([1, 0, 0, 0, 0, 0, 0, 2])), 2);
    expect([...r.indices.slice(0, 2)]).toEqual([0, 1]);
    expect(r.k).toBe(2);
  });
  it('signs pack LSB first and −0 counts as negative', () => {
    const v = Float32Array.from([-1, 2, -0, 0, 5, -3, 1, 1, -7]);
    const packed = packSigns(v);
    expect([...packed]).toEqual([0b00100101, 0b1]);
    expect([...unpackSigns(packed, 9)]).toEqual([-1, 1, -1, 1, 1, -1, 1, 1, -1]);
    const q = quantize1bit({
      xshape: [9, 1],
      totalk: 1,
      k: 1,
      indices: new Uint32Array(9),
      values: v,
      quantized: false,
    });
    expect([...q.values]).toEqual([-1, 1, -1, 1, 1, -1, 1, 1, -1]);
  });
  it('narrows indices to u8 / u16 / u32 little-endian and back', () => {
    expect([indexBytes(64), indexBytes(256), indexBytes(257), indexBytes(4096), indexBytes(65537)]).toEqual([
      1, 1, 2, 2, 4,
    ]);
    const idx = Uint32Array.from([0, 255, 4095, 258]);
    const n = narrowIndices(idx, 4096);
    expect([...n]).toEqual([0, 0, 255, 0, 255, 15, 2, 1]);
    expect([...widenIndices(n, 4096)]).toEqual([...idx]);
    expect(() => widenIndices(Uint8Array.from([0x00, 0x10]), 4096)).toThrow(/out of range/);
  });
});

describe('integer DCT basis', () => {
  it('is the correctly rounded 2^15·F for every N up to 64 and the common larger chunks', () => {
    for (const N of [...Array.from({ length: 64 }, (_, i) => i + 1), 96, 125, 128, 256]) {
      const B = integerDctBasis(N);
      for (let k = 0; k < N; k++)
        for (let n = 0; n < N; n++) {
          const exact = cosineDct(N, k, n) * 32768;
          // float64 is ~1e-11 off here; no entry is that close to a tie, so rounding it is a check.
          expect(Math.abs(B[k * N + n]! - exact)).toBeLessThanOrEqual(0.5 + 1e-9);
          expect(B[k * N + n]! + 0).toBe(Math.round(exact) + 0);
        }
    }
  });
});

describe('fixed-point aggregation', () => {
  const layout = tensorLayout([4], 4); // one chunk of 4
  const res = (idx: number[], vals: number[], quantized = false): TensorResult => ({
    xshape: layout.xshape,
    totalk: 4,
    k: idx.length,
    indices: Uint32Array.from(idx),
    values: Float32Array.from(vals),
    quantized,
  });
  it('averages only over the peers that selected a coefficient', () => {
    const agg = aggregateTensor(layout, [
      res([0, 1], [1, -1], true),
      res([1, 2], [-1, 1], true),
      res([1, 3], [1, -1], true),
    ]);
    expect([...agg.coef]).toEqual([0, 1, 2, 3]);
    // coef 1: (−1 −1 +1)/3 → −VALUE_ONE/3 rounded half away from zero.
    expect([...agg.mean]).toEqual([VALUE_ONE, -10923, VALUE_ONE, -VALUE_ONE]);
    expect(fixedMean(-3, 2)).toBe(-2);
    expect(fixedMean(3, 2)).toBe(2);
    expect(fixedMean(1, 3)).toBe(0);
  });
  it('scales float values per block by a power of two and drops zero means', () => {
    const agg = aggregateTensor(layout, [res([0, 1], [0.75, 0.1]), res([0, 1], [-0.75, 0.3])]);
    // max |v| = 0.75 → scale 2^15; 0.1·2^15 = 3276.8 → 3277, 0.3·2^15 ≈ 9830.4 → 9830; mean(3277, 9830) = 6553.5 → 6554.
    expect([...agg.coef]).toEqual([1]);
    expect([...agg.mean]).toEqual([6554]);
  });
  it('rejects mixed kinds and non-finite values', () => {
    expect(() => aggregateTensor(layout, [res([0], [1], true), res([0], [1])])).toThrow(/mix/);
    expect(() => aggregateTensor(layout, [res([0], [NaN])])).toThrow(/non-finite/);
  });
});

describe('exact update p·f − l·s', () => {
  it('matches the BigInt reference on random and edge-case inputs', () => {
    const rand = rng(3);
    const cases: [number, number, number, number][] = [];
    const specials = [
      0,
      -0,
      1,
      -1,
      1.5,
      2 ** -149,
      -(2 ** -149),
      2 ** -126,
      3.4028234663852886e38,
      -3.4028234663852886e38,
      1e-40,
    ];
    const scalars = [
      updateScalars(1e-3, 0.1),
      updateScalars(1, 0),
      updateScalars(0, 0),
      updateScalars(2 ** -20, 1),
      updateScalars(1e30, 1e-30),
      updateScalars(0.5, 2),
    ];
    for (const p of specials)
      for (const u of scalars) for (const s of [-1, 0, 1]) cases.push([p, u.factor, u.step, s]);
    for (let i = 0; i < 20000; i++) {
      const p = fromBits((rand() * 2 ** 32) >>> 0);
      if (!Number.isFinite(p)) continue;
      const u = updateScalars(2 ** (-30 * rand()) * rand(), rand() < 0.3 ? 0 : rand());
      cases.push([p, u.factor, u.step, [-1, 0, 1][Math.floor(rand() * 3)]!]);
      // p next to l so p − l cancels, and exact float32 midpoints of p·f − l.
      cases.push([Math.fround(u.step * (1 + (rand() - 0.5) * 2 ** -20)), u.factor, u.step, 1]);
    }
    // p − l exactly halfway between two float32s: p = 1, l = 2^-24 (the midpoint below 1) → ties to even (1).
    cases.push([1, 1, 2 ** -24, 1], [1 + 2 ** -23, 1, 2 ** -24, 1], [1, 1, 2 ** -25, 1]);
    for (const [p, f, l, s] of cases) {
      const got = updateValue(p, f, l, s);
      const want = exactUpdateReference(p, f, l, s);
      if (bitsOf(got) !== bitsOf(want)) expect({ p, f, l, s, got }).toEqual({ p, f, l, s, got: want });
    }
  });
});

describe('apply (CPU)', () => {
  it('agrees with p − lr·sign(IDCT(mean)) in float64', async () => {
    const rand = rng(4);
    const shape = [16, 24];
    const be = createCpuBackend({ chunk: 8 });
    const layout = tensorLayout(shape, 8);
    const p0 = Float32Array.from({ length: 16 * 24 }, () => rand() - 0.5);
    const peers: TensorResult[] = [];
    for (let q = 0; q < 3; q++) {
      const g = be.tensor(
        shape,
        Float32Array.from({ length: 16 * 24 }, () => rand() - 0.5),
      );
      peers.push(await be.compress(g, 3));
    }
    const p = be.tensor(shape, p0);
    const lr = 0.01;
    applyResults(
      be,
      [p],
      peers.map((r) => [r]),
      { lr },
    );
    const out = await be.read(p);
    // Independent: dense mean per coefficient in float64, IDCT by the cosine formula, sign.
    let checked = 0;
    for (let blk = 0; blk < layout.blocks; blk++) {
      const sum = new Map<number, [number, number]>();
      for (const r of peers)
        for (let j = blk * r.k; j < (blk + 1) * r.k; j++) {
          const e = sum.get(r.indices[j]!) ?? [0, 0];
          sum.set(r.indices[j]!, [e[0] + r.values[j]!, e[1] + 1]);
        }
      const by = Math.floor(blk / layout.blocksX);
      const bx = blk % layout.blocksX;
      for (let h = 0; h < 8; h++)
        for (let w = 0; w < 8; w++) {
          let v = 0;
          let scale = 0;
          for (const [c, [s, n]] of sum) {
            const term = (s / n) * cosineDct(8, Math.floor(c / 8), h) * cosineDct(8, c % 8, w);
            v += term;
            scale += Math.abs(term);
          }
          const i = (by * 8 + h) * 24 + bx * 8 + w;
          if (Math.abs(v) <= 1e-3 * scale) continue; // too close to 0 for the 15-bit fixed point to call
          expect(out[i]).toBe(Math.fround(p0[i]! - Math.fround(lr) * Math.sign(v)));
          checked++;
        }
    }
    expect(checked).toBeGreaterThan(300);
  });
});
