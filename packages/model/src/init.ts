// Deterministic parameter initialisation: the same seed gives the same bytes in every browser, in Node and
// on every CPU, because every step below is integer arithmetic or a correctly-rounded IEEE operation.
//
//   seed (u64) ─┬─ FNV-1a-64(tensor name) ── xor ── SplitMix64 ×2 ── xoshiro128** state (4 × u32)
//               │                                                      │
//               │                               uniform53 = 53 random bits / 2^53
//               │                                                      │
//               └─ one independent stream per tensor      Marsaglia polar method → N(0, 1) in float64
//                                                                      │
//                                                         Math.fround(std · z) → float32
//
// Streams are keyed by tensor name (not by position), so adding or removing a tensor (e.g. untying
// lm_head) leaves every other tensor's values unchanged. The polar method needs only ln and sqrt;
// ECMAScript lets Math.log differ between engines in the last bit, so `ln` below is our own fixed
// polynomial (same operations, same order, same result everywhere), and Math.sqrt is correctly
// rounded by IEEE 754.
//
// Like transformers' LlamaPreTrainedModel._init_weights: embedding and Linear weights ~ N(0, 0.02)
// (initializer_range, not truncated), RMSNorm weights = 1.
import { parameterSpecs, type LlamaConfig } from './config.ts';
import type { Parameters } from './checkpoint/checkpoint.ts';
import { INITIALIZER_RANGE } from './checkpoint/hf-config.ts';

const MASK64 = (1n << 64n) - 1n;

/** SplitMix64 (Steele, Lea, Flood 2014): expands one 64-bit seed into well-mixed 64-bit words. */
function splitMix64(seed: bigint): () => bigint {
  let state = seed & MASK64;
  return () => {
    state = (state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  };
}

/** FNV-1a, 64-bit, over the UTF-8 bytes of `s`: turns a stream name into a seed offset. */
export function fnv1a64(s: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(s)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & MASK64;
  return h;
}

/** xoshiro128** (Blackman & Vigna 2018): fast 32-bit generator, exact with Math.imul and `>>> 0`. */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** A stream determined by (seed, name); distinct names give independent-looking streams. */
  constructor(seed: number | bigint, name = '') {
    const big = typeof seed === 'bigint' ? seed : BigInt(seed);
    if (typeof seed === 'number' && (!Number.isSafeInteger(seed) || seed < 0))
      throw new RangeError(`seed must be a non-negative safe integer, got ${seed}`);
    const next = splitMix64(big ^ fnv1a64(name));
    const a = next();
    const b = next();
    this.s0 = Number(a & 0xffffffffn);
    this.s1 = Number(a >> 32n);
    this.s2 = Number(b & 0xffffffffn);
    this.s3 = Number(b >> 32n);
    // xoshiro's only bad state is all zeros; SplitMix64 outputs make that practically impossible, but be exact.
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform in [0, 1) with 53 random bits. */
  nextFloat64(): number {
    const hi = this.nextUint32() >>> 5; // 27 bits
    const lo = this.nextUint32() >>> 6; // 26 bits
    return (hi * 67108864 + lo) / 9007199254740992;
  }

  /** Uniform integer in [0, n), unbiased (rejection sampling), for 1 ≤ n ≤ 2^32. */
  nextBelow(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 2 ** 32) throw new RangeError(`nextBelow: bad bound ${n}`);
    const limit = 2 ** 32 - (2 ** 32 % n);
    for (;;) {
      const x = this.nextUint32();
      if (x < limit) return x % n;
    }
  }

  private spare: number | undefined;

  /** Standard normal via Marsaglia's polar method (two values per accepted pair). */
  nextNormal(): number {
    if (this.spare !== undefined) {
      const z = this.spare;
      this.spare = undefined;
      return z;
    }
    for (;;) {
      const u = 2 * this.nextFloat64() - 1;
      const v = 2 * this.nextFloat64() - 1;
      const s = u * u + v * v;
      if (s >= 1 || s === 0) continue;
      const f = Math.sqrt((-2 * ln(s)) / s);
      this.spare = v * f;
      return u * f;
    }
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

const LN2 = 0.6931471805599453;
const scratch = new DataView(new ArrayBuffer(8));

/**
 * Natural log for finite x > 0 from +, −, ×, ÷ only (deterministic across engines; within a few ulp).
 * x = m·2^e with m in [√½, √2); ln m = 2·atanh(f), f = (m−1)/(m+1), |f| ≤ 0.172, summed as a fixed series.
 */
export function ln(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) throw new RangeError(`ln: argument must be finite and > 0, got ${x}`);
  scratch.setFloat64(0, x);
  let e = ((scratch.getUint16(0) >> 4) & 0x7ff) - 1023;
  if (e === -1023) {
    // Subnormal: scale into the normal range first (exact: multiplication by a power of two).
    return ln(x * 2 ** 54) - 54 * LN2;
  }
  // Replace the exponent with 0 to get m in [1, 2).
  scratch.setUint16(0, (scratch.getUint16(0) & 0x800f) | (1023 << 4));
  let m = scratch.getFloat64(0);
  if (m > Math.SQRT2) {
    m /= 2;
    e += 1;
  }
  const f = (m - 1) / (m + 1);
  const s = f * f;
  // Σ_{k=0..12} s^k / (2k+1), Horner from the smallest term; s ≤ 0.0295 so s^13/27 < 1e-21.
  let p = 1 / 25;
  for (let k = 11; k >= 0; k--) p = 1 / (2 * k + 1) + s * p;
  return e * LN2 + 2 * f * p;
}

export interface InitOptions {
  /** Standard deviation of the normal init; HF's initializer_range. */
  std?: number;
}

/**
 * Fresh parameters for `config` from `seed`: matrices ~ N(0, std²) (float32, rounded once from float64),
 * RMSNorm weights = 1. Returned in parameterSpecs order.
 */
export function initParameters(
  config: LlamaConfig,
  seed: number | bigint,
  options: InitOptions = {},
): Parameters {
  const std = options.std ?? INITIALIZER_RANGE;
  const params: Parameters = new Map();
  for (const spec of parameterSpecs(config)) {
    const n = spec.shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    if (spec.shape.length === 1) data.fill(1);
    else {
      const rng = new Rng(seed, `init:${spec.name}`);
      for (let i = 0; i < n; i++) data[i] = std * rng.nextNormal();
    }
    params.set(spec.name, data);
  }
  return params;
}
