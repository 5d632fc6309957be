// SparseLoCo on the CPU reference: AdamW and error feedback against float64, the quantiser's contract,
// the outer step against an independent BigInt definition (bit for bit) and against the ideal float64
// mean/IDCT (within the documented resolution), and a few whole rounds on a toy problem.
import { describe, expect, it } from 'vitest';
import {
  adamwScalars,
  aggregateOuter,
  checkQuantResult,
  createAdamWState,
  createCpuBackend,
  dctBasis64,
  dequantizeResult,
  innerAdamWStep,
  outerStep,
  packCodes,
  packSigns,
  quantizeResult,
  quantLevels,
  sparseLoCoSend,
  tensorLayout,
  unpackCodes,
  type QuantTensorResult,
  type SparseDomain,
  type TensorResult,
} from '../src/index.ts';
import { bitsOf } from './reference.ts';
import { rng } from './rng.ts';
import { toyRounds } from './sparseloco-toy.ts';
import {
  adamw64,
  dctAggregateReference,
  dequantiseReference,
  exactOuterUpdate,
  rawAggregateReference,
} from './sparseloco-reference.ts';

const rand = rng(21);
const randn = (n: number, scale = 1): Float32Array =>
  Float32Array.from({ length: n }, () => (rand() + rand() + rand() - 1.5) * scale);

/** A result with k distinct random indices per chunk and values from `value`. */
function randomResult(shape: number[], chunk: number, k: number, value: () => number): TensorResult {
  const l = tensorLayout(shape, chunk);
  const kk = Math.min(k, l.totalk);
  const indices = new Uint32Array(l.blocks * kk);
  const values = new Float32Array(l.blocks * kk);
  for (let b = 0; b < l.blocks; b++) {
    const seen = new Set<number>();
    for (let j = 0; j < kk; j++) {
      let e = Math.floor(rand() * l.totalk);
      while (seen.has(e)) e = (e + 1) % l.totalk;
      seen.add(e);
      indices[b * kk + j] = e;
      values[b * kk + j] = value();
    }
  }
  return { xshape: l.xshape, totalk: l.totalk, k: kk, indices, values, quantized: false };
}

/** Values of every kind the quantiser and the aggregate must survive. */
function edgyValue(): number {
  const r = rand();
  if (r < 0.03) return 0;
  if (r < 0.05) return -0;
  if (r < 0.07) return 2 ** -149 * (1 + Math.floor(rand() * 5));
  if (r < 0.09) return -3.0e38 * rand();
  if (r < 0.12) return 0.25;
  return (rand() - 0.5) * 10 ** (-8 + 8 * rand());
}

describe('inner AdamW', () => {
  it('scalars follow torch.optim.AdamW', () => {
    const s = adamwScalars({ lr: 1e-3, weightDecay: 0.1 }, 3);
    expect(s.decay).toBe(Math.fround(1 - 1e-4));
    expect(s.stepSize).toBe(Math.fround(1e-3 / (1 - 0.9 ** 3)));
    expect(s.bc2Sqrt).toBe(Math.fround(Math.sqrt(1 - 0.999 ** 3)));
    expect([s.gradWeight, s.beta2, s.sqWeight, s.eps]).toEqual([0.1, 0.999, 0.001, 1e-8].map(Math.fround));
    expect(() => adamwScalars({ lr: 1e-3 }, 0)).toThrow(/step/);
    expect(() => adamwScalars({ lr: -1 }, 1)).toThrow(/lr/);
    expect(() => adamwScalars({ lr: 1, beta2: 1 }, 1)).toThrow(/beta2/);
    expect(() => adamwScalars({ lr: 10, weightDecay: 0.2 }, 1)).toThrow(/flip/);
  });

  it('30 steps on the CPU stay within float32 noise of a float64 AdamW', async () => {
    const be = createCpuBackend({ chunk: 64 });
    const o = { lr: 2e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
    const n = 3000;
    const p0 = randn(n, 0.05);
    const p = [be.tensor([n], p0)];
    const g = [be.tensor([n])];
    const state = createAdamWState(be, p);
    const ref = { p: Float64Array.from(p0), m: new Float64Array(n), v: new Float64Array(n), step: 0 };
    for (let t = 0; t < 30; t++) {
      // Gradients of varied scale, some exactly zero (v stays 0 there: ε decides).
      const grad = randn(n, 10 ** (-4 + 3 * rand())).map((x, i) => (i % 97 === 0 ? 0 : x));
      be.write(g[0]!, grad);
      await innerAdamWStep(be, p, g, state, o);
      adamw64(ref, grad, o);
    }
    expect(state.step).toBe(30);
    const got = await be.read(p[0]!);
    // Each step moves a parameter by ≤ lr·(1 + tiny); float32 rounding of m/(√v+ε) is ~1e-7 relative.
    let worst = 0;
    for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(got[i]! - ref.p[i]!));
    expect(worst).toBeLessThan(30 * o.lr * 1e-4);
    expect(worst).toBeGreaterThan(0); // float32 state: not the same numbers, only close
    expect(got.some((x, i) => x !== p0[i])).toBe(true);
  });

  it('weight decay is decoupled: zero gradients only shrink the parameters', async () => {
    const be = createCpuBackend({ chunk: 64 });
    const p0 = randn(100);
    const p = [be.tensor([100], p0)];
    const state = createAdamWState(be, p);
    for (let t = 0; t < 5; t++)
      await innerAdamWStep(be, p, [be.tensor([100])], state, { lr: 0.01, weightDecay: 0.5 });
    const got = await be.read(p[0]!);
    for (let i = 0; i < 100; i++) expect(got[i]).toBeCloseTo(p0[i]! * (1 - 0.005) ** 5, 6);
  });

  it('clips the gradients by global norm first', async () => {
    const be = createCpuBackend({ chunk: 64 });
    const p = [be.tensor([4], Float32Array.of(1, 1, 1, 1))];
    const g = [be.tensor([4], Float32Array.of(3, 4, 0, 0))];
    const { gradNorm } = await innerAdamWStep(be, p, g, createAdamWState(be, p), {
      lr: 0.1,
      clipGradNorm: 1,
    });
    expect(gradNorm).toBeCloseTo(5, 6);
    const clipped = await be.read(g[0]!);
    expect(clipped[0]).toBeCloseTo(0.6, 5);
    expect(clipped[1]).toBeCloseTo(0.8, 5);
  });
});

describe('error feedback', () => {
  it('ef ← β·ef + (start − local) in float32, within an ulp of float64', async () => {
    const be = createCpuBackend({ chunk: 8 });
    const n = 500;
    const [e0, s0, l0] = [randn(n), randn(n), randn(n)];
    const ef = be.tensor([n], e0);
    be.errorFeedback(ef, be.tensor([n], s0), be.tensor([n], l0), 0.95);
    const got = await be.read(ef);
    for (let i = 0; i < n; i++) {
      const want = 0.95 * e0[i]! + (s0[i]! - l0[i]!);
      expect(Math.abs(got[i]! - want)).toBeLessThanOrEqual(4e-7 * (Math.abs(want) + Math.abs(e0[i]!)));
    }
  });
});

describe('n-bit quantisation', () => {
  it('packs codes LSB-first; 1-bit codes are the sign layout', () => {
    for (let bits = 1; bits <= 8; bits++) {
      const codes = Uint8Array.from({ length: 37 }, () => Math.floor(rand() * 2 ** bits));
      const packed = packCodes(codes, bits);
      expect(packed.length).toBe(Math.ceil((37 * bits) / 8));
      expect(unpackCodes(packed, bits, 37)).toEqual(codes);
      for (let i = 0; i < 37; i++)
        for (let b = 0; b < bits; b++)
          expect((packed[(i * bits + b) >> 3]! >> ((i * bits + b) & 7)) & 1).toBe((codes[i]! >> b) & 1);
    }
    const v = randn(29);
    v[3] = -0;
    const q = quantizeResult({ ...randomResult([29], 29, 29, () => 1), values: v }, 1);
    expect(q.codes).toEqual(packSigns(v));
    expect(() => packCodes(Uint8Array.of(4), 2)).toThrow(/fit/);
  });

  it('every entry decodes to ±(a level of its chunk), the nearest one; levels are group means', () => {
    for (let bits = 1; bits <= 8; bits++) {
      const r = randomResult([24, 40], 8, 1 + Math.floor(rand() * 30), edgyValue);
      const q = quantizeResult(r, bits);
      const L = quantLevels(bits);
      expect(q.scales.length).toBe((r.indices.length / r.k) * L);
      checkQuantResult(q, tensorLayout([24, 40], 8));
      const d = dequantizeResult(q);
      expect(d.values).toEqual(dequantiseReference(q).values);
      for (let c = 0; c < r.indices.length / r.k; c++) {
        const table = Array.from(q.scales.subarray(c * L, (c + 1) * L));
        const members = new Map<number, number[]>();
        for (let j = c * r.k; j < (c + 1) * r.k; j++) {
          const v = r.values[j]!;
          const got = d.values[j]!;
          expect(bitsOf(got) >>> 31).toBe(bitsOf(v) >>> 31); // the sign bit travels, −0 included
          const level = table.indexOf(Math.abs(got));
          expect(level).toBeGreaterThanOrEqual(0);
          const dist = Math.abs(Math.abs(v) - table[level]!);
          for (const s of table) expect(dist).toBeLessThanOrEqual(Math.abs(Math.abs(v) - s));
          members.set(level, [...(members.get(level) ?? []), Math.abs(v)]);
        }
        // A level's scale is the float32 mean of the magnitudes that chose it (Lloyd's fixed point).
        for (const [level, ms] of members) {
          const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
          expect(Math.abs(table[level]! - mean)).toBeLessThanOrEqual(1e-6 * mean + 1e-45);
        }
      }
    }
  });

  it('is exact when a chunk has no more entries than levels', () => {
    const r = randomResult([64], 8, 4, () => (rand() - 0.5) * 1e-3);
    expect(dequantizeResult(quantizeResult(r, 3)).values).toEqual(r.values);
  });

  it('2 bits beat a median split with group means, and more bits beat fewer', () => {
    let prev = Infinity;
    const r = randomResult([64, 64], 64, 64, () => (rand() - 0.5) * (1 + 20 * rand() ** 6));
    const err = (q: QuantTensorResult): number =>
      dequantizeResult(q).values.reduce((s, x, i) => s + (x - r.values[i]!) ** 2, 0);
    for (let bits = 1; bits <= 5; bits++) {
      const e = err(quantizeResult(r, bits));
      expect(e).toBeLessThan(prev);
      prev = e;
    }
    const mags = Array.from(r.values, Math.abs).sort((a, b) => a - b);
    const lo = mags.slice(0, 32).reduce((a, b) => a + b) / 32;
    const hi = mags.slice(32).reduce((a, b) => a + b) / 32;
    const median = mags.reduce((s, m, i) => s + (m - (i < 32 ? lo : hi)) ** 2, 0);
    expect(err(quantizeResult(r, 2))).toBeLessThanOrEqual(median * (1 + 1e-6));
  });

  it('rejects malformed quantised results', () => {
    const l = tensorLayout([16, 16], 8);
    const q = quantizeResult(
      randomResult([16, 16], 8, 3, () => rand()),
      2,
    );
    expect(() => checkQuantResult(q, l)).not.toThrow();
    const bad: [Partial<QuantTensorResult>, RegExp][] = [
      [{ bits: 0 }, /bits/],
      [{ bits: 9 }, /bits/],
      [{ scales: q.scales.slice(1) }, /scales/],
      [{ scales: q.scales.map((x, i) => (i === 2 ? -1 : x)) }, /finite magnitude/],
      [{ scales: q.scales.map((x, i) => (i === 2 ? -0 : x)) }, /finite magnitude/],
      [{ scales: q.scales.map((x, i) => (i === 2 ? NaN : x)) }, /finite magnitude/],
      [{ codes: q.codes.slice(1) }, /code bytes/],
      [{ indices: q.indices.map((x, i) => (i === 0 ? 64 : x)) }, /index/],
      [{ xshape: [2, 2, 8, 4] }, /xshape/],
    ];
    for (const [over, re] of bad) expect(() => checkQuantResult({ ...q, ...over }, l)).toThrow(re);
  });
});

describe('top-k and residual', () => {
  it('raw top-k picks the k largest |entries| of each chunk (ties to the lower index)', async () => {
    const be = createCpuBackend({ chunk: 8 });
    const shape = [16, 24];
    const x = randn(16 * 24).map((v, i) => (i % 11 === 0 ? 0.5 : v)); // ties
    const r = await be.selectTopk(be.tensor(shape, x), 5, 'raw');
    const l = tensorLayout(shape, 8);
    for (let b = 0; b < l.blocks; b++) {
      const by = Math.floor(b / l.blocksX);
      const entries = Array.from({ length: 64 }, (_, e) => {
        const i = (by * 8 + Math.floor(e / 8)) * 24 + (b % l.blocksX) * 8 + (e % 8);
        return { e, v: x[i]! };
      });
      const want = entries
        .sort((a, c) => Math.abs(c.v) - Math.abs(a.v) || a.e - c.e)
        .slice(0, 5)
        .sort((a, c) => a.e - c.e);
      expect(Array.from(r.indices.subarray(b * 5, b * 5 + 5))).toEqual(want.map((w) => w.e));
      expect(Array.from(r.values.subarray(b * 5, b * 5 + 5))).toEqual(want.map((w) => w.v));
    }
  });

  it('sparseLoCoSend: ef is β·ef + Δ minus exactly what was sent (raw), or its IDCT (dct)', async () => {
    for (const domain of ['raw', 'dct'] as SparseDomain[]) {
      const be = createCpuBackend({ chunk: 8 });
      const shape = [16, 24];
      const n = 16 * 24;
      const [e0, s0, l0] = [randn(n), randn(n), randn(n)];
      const ef = be.tensor(shape, e0);
      const [q] = await sparseLoCoSend(be, [be.tensor(shape, s0)], [be.tensor(shape, l0)], [ef], {
        beta: 0.95,
        topk: 6,
        bits: 2,
        domain,
      });
      const beta = Math.fround(0.95);
      const before = e0.map((e, i) => Math.fround(Math.fround(beta * e) + Math.fround(s0[i]! - l0[i]!)));
      const after = await be.read(ef);
      const sent = dequantizeResult(q!);
      const l = tensorLayout(shape, 8);
      const diff = Float64Array.from(before, (b, i) => b - after[i]!);
      // The sent part, decoded to parameter space in float64.
      const want = new Float64Array(n);
      for (let j = 0; j < sent.indices.length; j++) {
        const blk = Math.floor(j / sent.k);
        const by = Math.floor(blk / l.blocksX);
        const c = sent.indices[j]!;
        const base = by * 8 * 24 + (blk % l.blocksX) * 8;
        if (domain === 'raw') want[base + Math.floor(c / 8) * 24 + (c % 8)] = sent.values[j]!;
        else {
          const F = dctBasis64(8);
          for (let h = 0; h < 8; h++)
            for (let w = 0; w < 8; w++)
              want[base + h * 24 + w]! +=
                sent.values[j]! * F[Math.floor(c / 8) * 8 + h]! * F[(c % 8) * 8 + w]!;
        }
      }
      for (let i = 0; i < n; i++)
        if (domain === 'raw')
          expect(after[i]).toBe(want[i] === 0 ? before[i] : Math.fround(before[i]! - want[i]!));
        else expect(Math.abs(diff[i]! - want[i]!)).toBeLessThan(2e-6);
    }
  });
});

describe('outer step on the CPU', () => {
  const cases: [number[], number, SparseDomain][] = [
    [[16, 24], 8, 'raw'],
    [[40], 8, 'raw'],
    [[3, 8, 12], 4, 'raw'],
    [[16, 24], 8, 'dct'],
    [[40], 8, 'dct'],
    [[3, 8, 12], 4, 'dct'],
  ];
  for (const [shape, chunk, domain] of cases)
    it(`${domain} [${shape}] chunk ${chunk}: bit-identical to the BigInt definition, both divisors`, async () => {
      for (const divideBy of ['senders', 'results'] as const)
        for (let trial = 0; trial < 6; trial++) {
          const be = createCpuBackend({ chunk });
          const l = tensorLayout(shape, chunk);
          const peers = 1 + Math.floor(rand() * 4);
          const results = Array.from({ length: peers }, () =>
            quantizeResult(
              randomResult(shape, chunk, 1 + Math.floor(rand() * 6), edgyValue),
              1 + Math.floor(rand() * 4),
            ),
          );
          const p0 = randn(l.size, 0.1).map((x, i) => (i === 3 ? -0 : i === 5 ? 0 : i === 7 ? 2 ** -140 : x));
          const p = be.tensor(shape, p0);
          const lr = trial === 0 ? 1 : 10 ** (-4 + 4 * rand());
          outerStep(
            be,
            [p],
            results.map((r) => [r]),
            { lr, domain, divideBy },
          );
          const deq = results.map(dequantiseReference);
          const step = Math.fround(lr);
          const want = Float32Array.from(p0);
          if (domain === 'raw')
            for (const [el, a] of rawAggregateReference(l, deq, divideBy))
              want[el] = exactOuterUpdate(p0[el]!, step, a);
          else
            dctAggregateReference(l, deq, divideBy).forEach((a, el) => {
              if (a !== undefined) want[el] = exactOuterUpdate(p0[el]!, step, a);
            });
          const out = await be.read(p);
          expect(Array.from(new Uint32Array(out.buffer))).toEqual(Array.from(new Uint32Array(want.buffer)));
          expect(out.some((x, i) => bitsOf(x) !== bitsOf(p0[i]!))).toBe(true);
        }
    });

  it('raw: A is the mean over the senders to float32 precision; "results" divides by the peer count', () => {
    const shape = [8, 8];
    const l = tensorLayout(shape, 8);
    const mk = (idx: number[], vals: number[]): QuantTensorResult =>
      quantizeResult(
        {
          xshape: l.xshape,
          totalk: 64,
          k: idx.length,
          indices: Uint32Array.from(idx),
          values: Float32Array.from(vals),
          quantized: false,
        },
        4,
      );
    // Coordinate 0: both peers; 5: only the first; 9: only the second.
    const results = [mk([0, 5], [0.5, -0.25]), mk([0, 9], [0.25, 3])];
    const senders = aggregateOuter(l, results, { domain: 'raw' });
    const byPeers = aggregateOuter(l, results, { domain: 'raw', divideBy: 'results' });
    if (senders.domain !== 'raw' || byPeers.domain !== 'raw') throw new Error('raw expected');
    expect(Array.from(senders.element)).toEqual([0, 5, 9]);
    expect(Array.from(senders.value)).toEqual([0.375, -0.25, 3]);
    expect(Array.from(byPeers.value)).toEqual([0.375, -0.125, 1.5]);
  });

  it('raw and dct aggregates match the float64 ideal within their resolution', () => {
    const shape = [64, 128];
    const l = tensorLayout(shape, 64);
    const results = Array.from({ length: 4 }, () =>
      quantizeResult(
        randomResult(shape, 64, 64, () => (rand() - 0.5) * 1e-3),
        2,
      ),
    );
    const deq = results.map(dequantizeResult);
    // Float64 ideal: per coordinate mean over senders.
    const sum = new Float64Array(l.size);
    const cnt = new Float64Array(l.size);
    const coefSum = new Map<string, { s: number; n: number }>();
    deq.forEach((d) =>
      d.indices.forEach((c, j) => {
        const blk = Math.floor(j / d.k);
        const el = Math.floor(c / 64) * 128 + blk * 64 + (c % 64);
        sum[el]! += d.values[j]!;
        cnt[el]! += 1;
        const key = `${blk}:${c}`;
        const prev = coefSum.get(key) ?? { s: 0, n: 0 };
        coefSum.set(key, { s: prev.s + d.values[j]!, n: prev.n + 1 });
      }),
    );
    const raw = aggregateOuter(l, results, { domain: 'raw' });
    if (raw.domain !== 'raw') throw new Error('raw expected');
    raw.element.forEach((el, j) => {
      const ideal = sum[el]! / cnt[el]!;
      expect(Math.abs(raw.value[j]! - ideal)).toBeLessThanOrEqual(Math.abs(ideal) * 2 ** -22);
    });
    // DCT: the ideal is the float64 IDCT of the float64 means; the bound is the fixed point's resolution
    // (2^-15 of the block's max per coefficient, spread by |F1·F2| ≤ 1/32) plus the integer basis's
    // rounding (≤ 2^-16 per basis entry).
    const F = dctBasis64(64);
    const dct = dctAggregateReference(l, deq, 'senders');
    for (let blk = 0; blk < 2; blk++) {
      const entries = [...coefSum]
        .filter(([k]) => k.startsWith(`${blk}:`))
        .map(([k, v]) => [Number(k.split(':')[1]), v.s / v.n] as const);
      const max = Math.max(...entries.map(([, m]) => Math.abs(m)));
      const sumAbs = entries.reduce((s, [, m]) => s + Math.abs(m), 0);
      const bound = (entries.length * max * 2 ** -15) / 32 + sumAbs * (2 * 0.18 * 2 ** -16 + 2 ** -32);
      for (let h = 0; h < 64; h += 7)
        for (let w = 0; w < 64; w += 5) {
          let ideal = 0;
          for (const [c, m] of entries) ideal += m * F[Math.floor(c / 64) * 64 + h]! * F[(c % 64) * 64 + w]!;
          const got = dct[h * 128 + blk * 64 + w]!;
          expect(Math.abs(got - ideal)).toBeLessThanOrEqual(bound);
        }
    }
  });

  it('nothing changes without results; mismatched tensor counts are refused', () => {
    const be = createCpuBackend({ chunk: 8 });
    const p = be.tensor([8], Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8));
    outerStep(be, [p], [], { lr: 1, domain: 'raw' });
    expect(() =>
      outerStep(be, [p, p], [[quantizeResult(randomResult([8], 8, 2, rand), 2)]], { lr: 1, domain: 'raw' }),
    ).toThrow(/tensor results/);
    expect(() => outerStep(be, [p], [], { lr: 1e39, domain: 'raw' })).toThrow(/outer lr/);
  });
});

describe('whole rounds on a toy problem (CPU)', () => {
  for (const domain of ['raw', 'dct'] as SparseDomain[])
    it(`${domain}: replicas stay bit-identical and approach the shared optimum`, async () => {
      const { loss, replicas } = await toyRounds(
        [0, 1, 2].map(() => createCpuBackend({ chunk: 16 })),
        domain,
        25,
      );
      for (const r of replicas.slice(1))
        expect(Buffer.from(r.buffer).equals(Buffer.from(replicas[0]!.buffer))).toBe(true);
      expect(loss.at(-1)!).toBeLessThan(loss[0]! * 0.05);
    });
});
