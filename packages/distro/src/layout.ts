// How one parameter tensor is cut into DCT blocks (docs/protocol.md "Chunk choice", "DCT blocks and xshape").
//
// Every tensor is handled as a row-major matrix [rows, cols] cut into n1×n2 blocks:
// - ≥2-D [..., R, C]: rows = prod(leading)·R, cols = C, n1 = sc(R), n2 = sc(C). Because n1 divides R, no block
//   crosses a leading-dimension boundary, so the row-major block grid is Psyche's [..., R/n1, C/n2] order.
// - 1-D [L]: rows = 1, cols = L, n1 = 1, n2 = sc(L): a 1×n block is one chunk of Psyche's [L/n, n] view, and the
//   in-block index row·n2 + col reduces to col. Treating 1-D as the n1 = 1 case lets one code path serve both.

import { smallerSplit as coreSmallerSplit } from '@meshtrain/core';

export class DistroShapeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DistroShapeError';
  }
}

/**
 * Psyche's `get_smaller_split`: `chunk` itself when it divides `size`, else the largest divisor of `size` below
 * `chunk`; `size` when `size < chunk`. No padding ever, so awkward sizes get small chunks (50257 → 29).
 */
export function smallerSplit(size: number, chunk: number): number {
  if (!Number.isSafeInteger(size) || size < 1)
    throw new DistroShapeError(`dimension must be a positive integer, got ${size}`);
  if (!Number.isSafeInteger(chunk) || chunk < 1)
    throw new DistroShapeError(`chunk must be a positive integer, got ${chunk}`);
  return coreSmallerSplit(size, chunk);
}

/** Largest chunk size we accept: keeps every integer bound in the exact decode (fixed-point.ts) provable. */
export const MAX_CHUNK = 256;

export interface BlockLayout {
  /** Parameter shape as given. */
  readonly shape: readonly number[];
  readonly size: number;
  readonly rows: number;
  readonly cols: number;
  /** Block height and width (n1 = 1 for 1-D tensors). */
  readonly n1: number;
  readonly n2: number;
  readonly blocksY: number;
  readonly blocksX: number;
  /** Number of chunks (blocks). */
  readonly blocks: number;
  /** Coefficients per block = Psyche's `totalk`. */
  readonly totalk: number;
  /** Psyche's encoded shape: [L/n, n] for 1-D, [..., R/n1, C/n2, n1, n2] otherwise. */
  readonly xshape: readonly number[];
}

export function tensorLayout(shape: readonly number[], chunk: number): BlockLayout {
  if (!Number.isSafeInteger(chunk) || chunk < 1 || chunk > MAX_CHUNK)
    throw new DistroShapeError(`chunk must be an integer in [1, ${MAX_CHUNK}], got ${chunk}`);
  for (const d of shape)
    if (!Number.isSafeInteger(d) || d < 1)
      throw new DistroShapeError(`shape [${shape.join(', ')}]: dimensions must be positive integers`);
  const dims = shape.length === 0 ? [1] : shape;
  const size = dims.reduce((a, b) => a * b, 1);
  if (dims.length === 1) {
    const n2 = smallerSplit(size, chunk);
    return {
      shape,
      size,
      rows: 1,
      cols: size,
      n1: 1,
      n2,
      blocksY: 1,
      blocksX: size / n2,
      blocks: size / n2,
      totalk: n2,
      xshape: [size / n2, n2],
    };
  }
  const R = dims[dims.length - 2] as number;
  const C = dims[dims.length - 1] as number;
  const n1 = smallerSplit(R, chunk);
  const n2 = smallerSplit(C, chunk);
  const rows = size / C;
  const blocksY = rows / n1;
  const blocksX = C / n2;
  return {
    shape,
    size,
    rows,
    cols: C,
    n1,
    n2,
    blocksY,
    blocksX,
    blocks: blocksY * blocksX,
    totalk: n1 * n2,
    xshape: [...dims.slice(0, -2), R / n1, C / n2, n1, n2],
  };
}

/** Flat parameter index of element (h, w) of block `block` (row-major block grid). */
export function elementIndex(l: BlockLayout, block: number, h: number, w: number): number {
  const by = Math.floor(block / l.blocksX);
  const bx = block - by * l.blocksX;
  return (by * l.n1 + h) * l.cols + bx * l.n2 + w;
}

/**
 * Element offset of in-block coefficient `e` (row-major b·n2 + d) of block `block`: transforms keep each
 * block's coefficients where its elements were.
 */
export function coefficientOffset(l: BlockLayout, block: number, e: number): number {
  if (!(e >= 0 && e < l.totalk)) throw new DistroShapeError(`in-block index ${e} outside 0..${l.totalk - 1}`);
  const b = Math.floor(e / l.n2);
  return elementIndex(l, block, b, e - b * l.n2);
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Throws unless every tensor has the first one's shape. */
export function checkSameShapes(...ts: readonly { readonly shape: readonly number[] }[]): void {
  for (const t of ts.slice(1))
    if (!sameShape(ts[0]!.shape, t.shape))
      throw new DistroShapeError(`shape mismatch [${ts[0]!.shape}] vs [${t.shape}]`);
}
