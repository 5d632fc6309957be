// The DCT bases of an n1×n2 block as the kernels read them, laid out in one array (F1, then F2 at off2). Pure
// logic: gpu/context.ts uploads each layout once per block shape.
import { dctBasis32 } from '../dct.ts';
import { integerDctBasis } from '../int-basis.ts';

/**
 * 'float': float32, each [row][col] as dct.ts gives them. 'floatT': float32 with both transposed (what the DCT
 * passes read, F2ᵀ starting at a multiple of 4 for vec4 reads). 'int': the integer bases the exact decoders use.
 */
export type BasisKind = 'float' | 'floatT' | 'int';

export function basisPairData(
  n1: number,
  n2: number,
  kind: BasisKind,
): { data: Float32Array | Int32Array; off2: number } {
  const t1 = kind === 'int' ? integerDctBasis(n1) : dctBasis32(n1);
  const t2 = kind === 'int' ? integerDctBasis(n2) : dctBasis32(n2);
  const off2 = kind === 'floatT' ? Math.ceil((n1 * n1) / 4) * 4 : n1 * n1;
  const both = kind === 'int' ? new Int32Array(off2 + n2 * n2) : new Float32Array(off2 + n2 * n2);
  if (kind === 'floatT') {
    for (let h = 0; h < n1; h++) for (let b = 0; b < n1; b++) both[h * n1 + b] = t1[b * n1 + h] as number;
    for (let w = 0; w < n2; w++)
      for (let d = 0; d < n2; d++) both[off2 + w * n2 + d] = t2[d * n2 + w] as number;
  } else {
    both.set(t1);
    both.set(t2, off2);
  }
  return { data: both, off2 };
}
