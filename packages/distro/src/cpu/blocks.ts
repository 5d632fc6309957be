// Block-level pieces of the CPU reference shared by DisTrO and SparseLoCo: the forward DCT of every block,
// per-chunk top-k, and the exact integer IDCT accumulation of an aggregate.
import type { AggregatedTensor } from '../aggregate.ts';
import { dctBasis64 } from '../dct.ts';
import { integerDctBasis } from '../int-basis.ts';
import type { BlockLayout } from '../layout.ts';
import { effectiveTopk, type TensorResult } from '../result.ts';
import { selectTopK } from '../topk.ts';

/** Forward DCT of every block into `coef` (same element layout as the tensor), float64 sums. */
export function blockDct(l: BlockLayout, x: Float32Array, coef: Float32Array): void {
  const F1 = dctBasis64(l.n1);
  const F2 = dctBasis64(l.n2);
  const tmp = new Float64Array(l.n1 * l.n2);
  for (let by = 0; by < l.blocksY; by++) {
    for (let bx = 0; bx < l.blocksX; bx++) {
      const base = by * l.n1 * l.cols + bx * l.n2;
      for (let h = 0; h < l.n1; h++)
        for (let d = 0; d < l.n2; d++) {
          let s = 0;
          for (let w = 0; w < l.n2; w++)
            s += (x[base + h * l.cols + w] as number) * (F2[d * l.n2 + w] as number);
          tmp[h * l.n2 + d] = s;
        }
      for (let b = 0; b < l.n1; b++)
        for (let d = 0; d < l.n2; d++) {
          let s = 0;
          for (let h = 0; h < l.n1; h++) s += (F1[b * l.n1 + h] as number) * (tmp[h * l.n2 + d] as number);
          coef[base + b * l.cols + d] = s;
        }
    }
  }
}

/** Selects the top-k of every block of `coef` and gathers them into a result (chunk-grid order). */
export function topkResult(l: BlockLayout, coef: Float32Array, topk: number): TensorResult {
  const k = effectiveTopk(topk, l.totalk);
  const bits = new Uint32Array(coef.buffer, coef.byteOffset, coef.length);
  const mags = new Uint32Array(l.totalk);
  const sel = new Uint32Array(k);
  const indices = new Uint32Array(l.blocks * k);
  const values = new Float32Array(l.blocks * k);
  for (let blk = 0; blk < l.blocks; blk++) {
    const by = Math.floor(blk / l.blocksX);
    const base = by * l.n1 * l.cols + (blk - by * l.blocksX) * l.n2;
    for (let e = 0; e < l.totalk; e++) {
      const b = Math.floor(e / l.n2);
      mags[e] = (bits[base + b * l.cols + (e - b * l.n2)] as number) & 0x7fffffff;
    }
    selectTopK(mags, k, sel);
    for (let j = 0; j < k; j++) {
      const e = sel[j] as number;
      const b = Math.floor(e / l.n2);
      indices[blk * k + j] = e;
      values[blk * k + j] = coef[base + b * l.cols + (e - b * l.n2)] as number;
    }
  }
  return { xshape: l.xshape, totalk: l.totalk, k, indices, values, quantized: false };
}

/**
 * Exact IDCT of one block (see fixed-point notes in aggregate.ts): S = Σ m·Bq1[b][h]·Bq2[d][w] for every
 * element, as S = HI·2^15 + LO. a = m·Bq1 is exact (|a| ≤ 2^30); split a = ah·2^15 + al with 0 ≤ al < 2^15
 * so both partial products are ≤ 2^30 and their float64 sums stay exact (< 2^53) for any number of entries
 * a block can hold (≤ 65 536 · 2^30 = 2^46).
 */
export function accumulateExact(
  agg: AggregatedTensor,
  block: number,
  hi: Float64Array,
  lo: Float64Array,
): void {
  const l = agg.layout;
  const B1 = integerDctBasis(l.n1);
  const B2 = integerDctBasis(l.n2);
  hi.fill(0);
  lo.fill(0);
  for (let e = agg.blockStart[block] as number; e < (agg.blockStart[block + 1] as number); e++) {
    const c = agg.coef[e] as number;
    const b = Math.floor(c / l.n2);
    const d = c - b * l.n2;
    const m = agg.mean[e] as number;
    for (let h = 0; h < l.n1; h++) {
      const a = m * (B1[b * l.n1 + h] as number);
      const ah = Math.floor(a / 32768);
      const al = a - ah * 32768;
      const row = h * l.n2;
      for (let w = 0; w < l.n2; w++) {
        const B = B2[d * l.n2 + w] as number;
        hi[row + w]! += ah * B;
        lo[row + w]! += al * B;
      }
    }
  }
}

/** Exact sign of every element's IDCT: S = HI·2^15 + LO (accumulateExact), after moving LO's carry into HI. */
export function decodeSigns(
  agg: AggregatedTensor,
  block: number,
  hi: Float64Array,
  lo: Float64Array,
  out: Int8Array,
): void {
  accumulateExact(agg, block, hi, lo);
  for (let i = 0; i < agg.layout.totalk; i++) {
    const L = lo[i] as number;
    const carry = Math.floor(L / 32768);
    const H = (hi[i] as number) + carry;
    out[i] = H > 0 ? 1 : H < 0 ? -1 : L - carry * 32768 > 0 ? 1 : 0;
  }
}
