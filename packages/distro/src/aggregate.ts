// Host-side aggregation of many peers' results into exact integers. Both backends decode from this one
// structure, so the only thing that has to be bit-identical across devices is integer arithmetic.
//
// Fixed point (per block): every value becomes an integer q with |q| ≤ 2^15 = VALUE_ONE.
// - 1-bit results: q = ±VALUE_ONE exactly.
// - float results: q = roundHalfEven(v · 2^s) with s = 14 − ⌊log2 max|v|⌋, the max taken over every peer's
//   entries in that block. v·2^s is exact in float64 (power-of-two scale of a float32), so q is exact and the
//   largest |q| is at most 2^15. One scale per block is enough because each parameter's update depends only on
//   its own block's coefficients, and scaling a block by a positive constant leaves sign(IDCT) unchanged.
// Mean per coefficient (Psyche's scatter mean over the peers that selected it; duplicates count twice):
//   m = round-half-away-from-zero(Σq / count), computed as sign(Σq)·⌊(2|Σq| + count) / (2·count)⌋ on safe
//   integers, so |m| ≤ 2^15. Integer sums do not depend on the order peers arrive in.
// SparseLoCo's outer step (sparseloco/outer.ts) reuses this with dequantised values, needs each block's
// `shift` (value = q·2^−shift) because it applies the IDCT's value, not only its sign, and may divide by the
// number of results instead of the number of senders (`divideBy: 'results'`, SparseLoCo as published).
import { DistroShapeError, type BlockLayout } from './layout.ts';
import { checkResult, type TensorResult } from './result.ts';

export const VALUE_BITS = 15;
export const VALUE_ONE = 1 << VALUE_BITS;

export interface AggregatedTensor {
  readonly layout: BlockLayout;
  /** CSR offsets into coef/mean, one per block plus one. */
  readonly blockStart: Uint32Array;
  /** In-block coefficient index (row·n2 + col), ascending within a block. */
  readonly coef: Uint32Array;
  /** Fixed-point mean, nonzero, |mean| ≤ VALUE_ONE. */
  readonly mean: Int32Array;
  /** Per block: the fixed point is value·2^shift (1-bit values: shift = VALUE_BITS, ±1 ↦ ±VALUE_ONE). */
  readonly shift: Int32Array;
}

export interface AggregateOptions {
  /**
   * The mean's divisor: the number of entries that carry the coefficient ('senders', default: Psyche's
   * scatter mean) or the number of results ('results': SparseLoCo's published Σ/#peers).
   */
  divideBy?: 'senders' | 'results';
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** ⌊log2 |v|⌋ for a finite nonzero float32, read from its bits (no Math.log2: exact at powers of two). */
export function floorLog2(v: number): number {
  f32[0] = v;
  const bits = (u32[0] as number) & 0x7fffffff;
  const exp = bits >>> 23;
  if (exp !== 0) return exp - 127;
  return 31 - Math.clz32(bits) - 149; // subnormal
}

export function roundHalfEven(x: number): number {
  const r = Math.floor(x);
  const d = x - r;
  if (d > 0.5) return r + 1;
  if (d < 0.5) return r;
  return r % 2 === 0 ? r : r + 1;
}

/** The fixed-point mean of an integer sum over `count` contributions (see the header comment). */
export function fixedMean(sum: number, count: number): number {
  const q = Math.floor((2 * Math.abs(sum) + count) / (2 * count));
  return sum < 0 ? -q : q;
}

/**
 * What aggregation requires of (untrusted) results, checked: each fits the layout, all of one kind (1-bit or
 * float), every value finite.
 */
export function checkAggregateInputs(layout: BlockLayout, results: readonly TensorResult[]): void {
  results.forEach((r, i) => checkResult(r, layout, `result ${i}`));
  const quantized = results.length > 0 && results[0]!.quantized;
  if (results.some((r) => r.quantized !== quantized))
    throw new DistroShapeError('results mix 1-bit and float values; a round uses one kind');
  for (const [i, r] of results.entries())
    for (const v of r.values)
      if (!Number.isFinite(v)) throw new DistroShapeError(`result ${i}: non-finite value ${v}`);
}

export function aggregateTensor(
  layout: BlockLayout,
  results: readonly TensorResult[],
  options: AggregateOptions = {},
): AggregatedTensor {
  checkAggregateInputs(layout, results);
  return aggregateChecked(layout, results, options);
}

function aggregateChecked(
  layout: BlockLayout,
  results: readonly TensorResult[],
  options: AggregateOptions,
): AggregatedTensor {
  const byResults = options.divideBy === 'results';
  const quantized = results.length > 0 && results[0]!.quantized;
  const totalk = layout.totalk;
  const sum = new Float64Array(totalk);
  const count = new Uint32Array(totalk);
  let entries = 0;
  for (const r of results) entries += r.indices.length;
  // A block's coefficients in the order first seen, then sorted numerically (a typed array needs no comparator).
  const touched = new Uint32Array(Math.min(totalk, entries));
  const blockStart = new Uint32Array(layout.blocks + 1);
  const shift = new Int32Array(layout.blocks);
  const coef = new Uint32Array(entries);
  const mean = new Int32Array(entries);
  let out = 0;
  for (let b = 0; b < layout.blocks; b++) {
    let scale = 1;
    if (!quantized) {
      let maxAbs = 0;
      for (const r of results)
        for (let j = b * r.k; j < (b + 1) * r.k; j++)
          maxAbs = Math.max(maxAbs, Math.abs(r.values[j] as number));
      shift[b] = maxAbs === 0 ? 0 : VALUE_BITS - 1 - floorLog2(maxAbs);
      scale = 2 ** (shift[b] as number);
    } else shift[b] = VALUE_BITS;
    let nTouched = 0;
    for (const r of results) {
      for (let j = b * r.k; j < (b + 1) * r.k; j++) {
        const c = r.indices[j] as number;
        const v = r.values[j] as number;
        const q = quantized ? (v < 0 || Object.is(v, -0) ? -VALUE_ONE : VALUE_ONE) : roundHalfEven(v * scale);
        if (count[c] === 0) touched[nTouched++] = c;
        sum[c]! += Math.max(-VALUE_ONE, Math.min(VALUE_ONE, q)); // saturation never triggers with this scale
        count[c]! += 1;
      }
    }
    const block = touched.subarray(0, nTouched).sort();
    for (const c of block) {
      // Dividing by the result count, a result repeating an index could push |m| past VALUE_ONE: clamp.
      const m = byResults
        ? Math.max(-VALUE_ONE, Math.min(VALUE_ONE, fixedMean(sum[c] as number, results.length)))
        : fixedMean(sum[c] as number, count[c] as number);
      if (m !== 0) {
        coef[out] = c;
        mean[out++] = m;
      }
      sum[c] = 0;
      count[c] = 0;
    }
    blockStart[b + 1] = out;
  }
  return { layout, blockStart, coef: coef.slice(0, out), mean: mean.slice(0, out), shift };
}
