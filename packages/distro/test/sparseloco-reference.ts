// Independent references for SparseLoCo's tests: a float64 AdamW (torch.optim.AdamW's formula, no float32
// rounding) and the outer step's definition computed with BigInt only (no float arithmetic at all, so
// neither the CPU's float64 tricks nor the WGSL integer code is reused).
import { integerDctBasis, type BlockLayout, type QuantTensorResult } from '../src/index.ts';
import { bitsOf } from './reference.ts';

export interface AdamW64 {
  p: Float64Array;
  m: Float64Array;
  v: Float64Array;
  step: number;
}

export function adamw64(
  s: AdamW64,
  g: ArrayLike<number>,
  o: { lr: number; beta1: number; beta2: number; eps: number; weightDecay: number },
): void {
  s.step++;
  const bc1 = 1 - o.beta1 ** s.step;
  const bc2 = 1 - o.beta2 ** s.step;
  for (let i = 0; i < s.p.length; i++) {
    const gi = g[i] as number;
    s.p[i] = (s.p[i] as number) * (1 - o.lr * o.weightDecay);
    s.m[i] = o.beta1 * (s.m[i] as number) + (1 - o.beta1) * gi;
    s.v[i] = o.beta2 * (s.v[i] as number) + (1 - o.beta2) * gi * gi;
    const mhat = (s.m[i] as number) / bc1;
    const vhat = (s.v[i] as number) / bc2;
    s.p[i] = (s.p[i] as number) - (o.lr * mhat) / (Math.sqrt(vhat) + o.eps);
  }
}

/** A finite float32 as m·2^e exactly (BigInt m with its sign). */
export function exactF32(x: number): { m: bigint; e: number } {
  const b = bitsOf(x);
  const exp = (b >>> 23) & 0xff;
  let m = BigInt(b & 0x7fffff);
  let e = -149;
  if (exp !== 0) {
    m += 1n << 23n;
    e = exp - 150;
  }
  return { m: b >>> 31 ? -m : m, e };
}

const bitLength = (m: bigint): number => (m < 0n ? -m : m).toString(2).length;

/** ⌊log2 |x|⌋ of a nonzero float32, from its exact value. */
function floorLog2Exact(x: number): number {
  const { m, e } = exactF32(x);
  return bitLength(m) - 1 + e;
}

/** round(n / 2^sh) for sh > 0, half to even. */
function shrHalfEven(n: bigint, sh: number): bigint {
  const neg = n < 0n;
  const a = neg ? -n : n;
  const d = 1n << BigInt(sh);
  let q = a / d;
  const r = a - q * d;
  if (2n * r > d || (2n * r === d && q % 2n === 1n)) q += 1n;
  return neg ? -q : q;
}

/** x·2^sh rounded half to even to an integer (x a float32). */
function scaledRound(x: number, sh: number): bigint {
  const { m, e } = exactF32(x);
  return e + sh >= 0 ? m << BigInt(e + sh) : shrHalfEven(m, -(e + sh));
}

/** round(n / d), half away from zero. */
function divHalfAway(n: bigint, d: bigint): bigint {
  const neg = n < 0n;
  const a = neg ? -n : n;
  const q = (2n * a + d) / (2n * d);
  return neg ? -q : q;
}

const F32_MAX_BITS = 0x7f7fffff;

/** The float32 nearest to n·2^exp (half to even, subnormals), saturated to ±FLT_MAX; 0 → +0. */
export function bigToF32(n: bigint, exp: number): number {
  if (n === 0n) return 0;
  const neg = n < 0n;
  let mag = neg ? -n : n;
  let e = exp;
  const top = bitLength(mag) - 1 + e;
  const lsb = Math.max(top - 23, -149);
  if (lsb > e) {
    mag = shrHalfEven(mag, lsb - e);
    e = lsb;
  }
  // mag·2^e is now exactly representable unless it overflows (mag may have carried to 2^24).
  let r: number;
  if (bitLength(mag) - 1 + e > 127) r = fromBitsF32(F32_MAX_BITS);
  else r = Math.fround(Number(mag) * 2 ** e);
  return neg ? -r : r;
}

function fromBitsF32(b: number): number {
  return new Float32Array(new Uint32Array([b]).buffer)[0] as number;
}

/** RN_f32(p − l·a) from exact BigInt arithmetic (IEEE's signed-zero rule for an exact zero). */
export function exactOuterUpdate(p: number, l: number, a: number): number {
  if (!Number.isFinite(p)) return p;
  const P = exactF32(p);
  const L = exactF32(l);
  const A = exactF32(a);
  const y = { m: L.m * A.m, e: L.e + A.e };
  const e = Math.min(P.e, y.e);
  const v = (P.m << BigInt(P.e - e)) - (y.m << BigInt(y.e - e));
  if (v === 0n) return p - l * a; // exact zero: the operands' signs decide, as in IEEE
  const neg = v < 0n;
  const mag = neg ? -v : v;
  const top = bitLength(mag) - 1 + e;
  const lsb = Math.max(top - 23, -149);
  let q = mag;
  let qe = e;
  if (lsb > e) {
    q = shrHalfEven(mag, lsb - e);
    qe = lsb;
  }
  const r = bitLength(q) - 1 + qe > 127 ? Infinity : Math.fround(Number(q) * 2 ** qe);
  return neg ? -r : r;
}

export interface Dequantised {
  readonly indices: Uint32Array;
  readonly values: Float32Array;
  readonly k: number;
}

/** Dequantisation written from the wire's words: code bit 0 = sign, bits 1.. = level, LSB-first stream. */
export function dequantiseReference(q: QuantTensorResult): Dequantised {
  const L = 2 ** (q.bits - 1);
  const values = new Float32Array(q.indices.length);
  for (let i = 0; i < values.length; i++) {
    let code = 0;
    for (let b = 0; b < q.bits; b++) {
      const bit = i * q.bits + b;
      code |= (((q.codes[bit >> 3] as number) >> (bit & 7)) & 1) << b;
    }
    const s = q.scales[Math.floor(i / q.k) * L + (code >> 1)] as number;
    values[i] = code & 1 ? -s : s;
  }
  return { indices: q.indices, values, k: q.k };
}

/** Per flat element index: the outer step's aggregate A in the raw domain (the definition in outer.ts). */
export function rawAggregateReference(
  l: BlockLayout,
  results: readonly Dequantised[],
  divideBy: 'senders' | 'results',
): Map<number, number> {
  const contributions = new Map<number, number[]>();
  for (const r of results)
    for (let j = 0; j < r.indices.length; j++) {
      const blk = Math.floor(j / r.k);
      const e = r.indices[j] as number;
      const by = Math.floor(blk / l.blocksX);
      const h = Math.floor(e / l.n2);
      const el = (by * l.n1 + h) * l.cols + (blk - by * l.blocksX) * l.n2 + (e % l.n2);
      contributions.set(el, [...(contributions.get(el) ?? []), r.values[j] as number]);
    }
  const out = new Map<number, number>();
  for (const [el, vs] of contributions) {
    const nonzero = vs.filter((v) => v !== 0);
    if (nonzero.length === 0) continue;
    const top = Math.max(...nonzero.map(floorLog2Exact));
    const sh = 23 - top;
    const sum = vs.reduce((s, v) => s + scaledRound(v, sh), 0n);
    const M = divHalfAway(sum, BigInt(divideBy === 'senders' ? vs.length : results.length));
    const a = bigToF32(M, -sh);
    if (a !== 0) out.set(el, a);
  }
  return out;
}

/**
 * Per element of the tensor: the DCT-domain aggregate A (the definition in outer.ts / aggregate.ts), or
 * undefined for elements of blocks that received nothing.
 */
export function dctAggregateReference(
  l: BlockLayout,
  results: readonly Dequantised[],
  divideBy: 'senders' | 'results',
): (number | undefined)[] {
  const out: (number | undefined)[] = new Array(l.size).fill(undefined);
  const B1 = integerDctBasis(l.n1);
  const B2 = integerDctBasis(l.n2);
  for (let blk = 0; blk < l.blocks; blk++) {
    const entries: [number, number][] = [];
    for (const r of results)
      for (let j = blk * r.k; j < (blk + 1) * r.k; j++)
        entries.push([r.indices[j] as number, r.values[j] as number]);
    const nonzero = entries.filter(([, v]) => v !== 0);
    const shift = nonzero.length === 0 ? 0 : 14 - Math.max(...nonzero.map(([, v]) => floorLog2Exact(v)));
    const sums = new Map<number, { s: bigint; n: number }>();
    for (const [c, v] of entries) {
      const prev = sums.get(c) ?? { s: 0n, n: 0 };
      sums.set(c, { s: prev.s + scaledRound(v, shift), n: prev.n + 1 });
    }
    const means: [number, bigint][] = [];
    for (const [c, { s, n }] of sums) {
      let m = divHalfAway(s, BigInt(divideBy === 'senders' ? n : results.length));
      if (m > 32768n) m = 32768n;
      if (m < -32768n) m = -32768n;
      if (m !== 0n) means.push([c, m]);
    }
    if (means.length === 0) continue;
    const by = Math.floor(blk / l.blocksX);
    for (let h = 0; h < l.n1; h++)
      for (let w = 0; w < l.n2; w++) {
        let S = 0n;
        for (const [c, m] of means) {
          const b = Math.floor(c / l.n2);
          const d = c % l.n2;
          S += m * BigInt(B1[b * l.n1 + h] as number) * BigInt(B2[d * l.n2 + w] as number);
        }
        out[(by * l.n1 + h) * l.cols + (blk - by * l.blocksX) * l.n2 + w] = bigToF32(S, -(30 + shift));
      }
  }
  return out;
}
