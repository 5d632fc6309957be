// Decoding results into tensors on the CPU reference backend: the peer's own residual, accumulated in float64,
// and the exact integer apply of an aggregate (bit-identical to the WGSL kernel).
import type { AggregatedTensor } from '../aggregate.ts';
import { dctBasis64 } from '../dct.ts';
import { updateBits, type UpdateScalars } from '../exact-update.ts';
import { elementIndex, type BlockLayout } from '../layout.ts';
import type { TensorResult } from '../result.ts';
import { decodeSigns } from './blocks.ts';

/** x ← x − decode(own), block by block. */
export function subtractResidual(l: BlockLayout, x: Float32Array, own: TensorResult): void {
  const F1 = dctBasis64(l.n1);
  const F2 = dctBasis64(l.n2);
  const acc = new Float64Array(l.totalk);
  for (let blk = 0; blk < l.blocks; blk++) {
    acc.fill(0);
    for (let j = blk * own.k; j < (blk + 1) * own.k; j++) {
      const c = own.indices[j] as number;
      const b = Math.floor(c / l.n2);
      const d = c - b * l.n2;
      const v = own.values[j] as number;
      for (let h = 0; h < l.n1; h++) {
        const a = v * (F1[b * l.n1 + h] as number);
        for (let w = 0; w < l.n2; w++) acc[h * l.n2 + w]! += a * (F2[d * l.n2 + w] as number);
      }
    }
    const base = elementIndex(l, blk, 0, 0);
    for (let h = 0; h < l.n1; h++)
      for (let w = 0; w < l.n2; w++)
        x[base + h * l.cols + w] = (x[base + h * l.cols + w] as number) - (acc[h * l.n2 + w] as number);
  }
}

/** p ← RN(p·factor − step·sign(IDCT(mean))) for every element, from the exact integer decode. */
export function applyAggregated(
  l: BlockLayout,
  data: Float32Array,
  agg: AggregatedTensor,
  u: UpdateScalars,
): void {
  const bits = new Uint32Array(data.buffer);
  const hi = new Float64Array(l.totalk);
  const lo = new Float64Array(l.totalk);
  const signs = new Int8Array(l.totalk);
  for (let blk = 0; blk < l.blocks; blk++) {
    decodeSigns(agg, blk, hi, lo, signs);
    const base = elementIndex(l, blk, 0, 0);
    for (let h = 0; h < l.n1; h++)
      for (let w = 0; w < l.n2; w++)
        updateBits(bits, base + h * l.cols + w, u, signs[h * l.n2 + w] as number);
  }
}
