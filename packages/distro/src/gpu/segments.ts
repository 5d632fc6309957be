// Splitting a tensor so no storage binding exceeds the device's limits. Segments are whole block rows
// (n1 matrix rows × all columns), so every DCT block lies inside one segment and each segment can be
// transformed, selected and decoded on its own. Pure logic, tested with artificially small limits.
import { DistroShapeError } from '../layout.ts';

export interface Segment {
  /** First matrix row of the segment (a multiple of n1). */
  readonly firstRow: number;
  readonly rowCount: number;
  /** Offset and length in elements within the whole tensor. */
  readonly offset: number;
  readonly elements: number;
}

/**
 * Greedy: as many block rows per segment as fit in `maxBytes`. When `alignBytes` is given (segments that are
 * ranges of one external buffer), every segment must start at a multiple of it, so segments end only at block
 * rows whose byte offset is aligned.
 */
export function planSegments(
  rows: number,
  cols: number,
  n1: number,
  maxBytes: number,
  alignBytes = 4,
): Segment[] {
  const rowBytes = cols * 4;
  const blockRowBytes = rowBytes * n1;
  if (blockRowBytes > maxBytes)
    throw new DistroShapeError(
      `one block row (${n1}×${cols} float32 = ${blockRowBytes} B) exceeds the ${maxBytes} B binding limit`,
    );
  const segments: Segment[] = [];
  let row = 0;
  while (row < rows) {
    let end = Math.min(rows, row + Math.floor(maxBytes / blockRowBytes) * n1);
    while (end < rows && (end * rowBytes) % alignBytes !== 0) end -= n1;
    if (end <= row)
      throw new DistroShapeError(
        `no block-row boundary after row ${row} is ${alignBytes}-byte aligned within ${maxBytes} B`,
      );
    segments.push({ firstRow: row, rowCount: end - row, offset: row * cols, elements: (end - row) * cols });
    row = end;
  }
  return segments;
}
