// One tensor's compressed result (Psyche's DistroResult, docs/protocol.md "Top-k and 1-bit signs") and its
// wire-level pieces: 1-bit sign packing and index narrowing. The framing around them (postcard, commitments)
// is core's wire codec.
import { DistroShapeError, sameShape, type BlockLayout } from './layout.ts';

export interface TensorResult {
  /** Psyche's encoded shape (see layout.ts). */
  readonly xshape: readonly number[];
  /** Coefficients per chunk. */
  readonly totalk: number;
  /** Entries kept per chunk. */
  readonly k: number;
  /** chunks × k in-block indices (row·n2 + col), chunk-grid order. */
  readonly indices: Uint32Array;
  /** chunks × k signed DCT coefficients; ±1 when `quantized`. */
  readonly values: Float32Array;
  /** True when values are signs only (1-bit): −1 for negative incl. −0, +1 otherwise. */
  readonly quantized: boolean;
}

/** Psyche's `clamp(topk, 1, totalk)`. */
export function effectiveTopk(topk: number, totalk: number): number {
  if (!Number.isSafeInteger(topk)) throw new DistroShapeError(`topk must be an integer, got ${topk}`);
  return Math.min(Math.max(topk, 1), totalk);
}

/**
 * 1-bit quantisation: the sign bit decides (−0 → −1, +0 → +1), magnitude is dropped (docs/protocol.md
 * "Top-k and 1-bit signs").
 */
export function quantize1bit(r: TensorResult): TensorResult {
  const bits = new Uint32Array(r.values.buffer, r.values.byteOffset, r.values.length);
  const values = new Float32Array(r.values.length);
  for (let i = 0; i < values.length; i++) values[i] = (bits[i] as number) >>> 31 ? -1 : 1;
  return { ...r, values, quantized: true };
}

/** Signs as Psyche's OneBit payload: bit set ⇔ negative, element 8i+j → bit j of byte i (LSB first). */
export function packSigns(values: Float32Array): Uint8Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint8Array(Math.ceil(values.length / 8));
  for (let i = 0; i < values.length; i++) if ((bits[i] as number) >>> 31) out[i >> 3]! |= 1 << (i & 7);
  return out;
}

export function unpackSigns(bytes: Uint8Array, count: number): Float32Array {
  if (bytes.length * 8 < count)
    throw new DistroShapeError(`sign payload has ${bytes.length} bytes, need ${Math.ceil(count / 8)}`);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = ((bytes[i >> 3] as number) >> (i & 7)) & 1 ? -1 : 1;
  return out;
}

/**
 * Bytes per index after Psyche's narrowing (docs/protocol.md "Top-k and 1-bit signs"): u8 up to 256
 * coefficients, u16 up to 65 536, else u32.
 */
export function indexBytes(totalk: number): 1 | 2 | 4 {
  return totalk <= 256 ? 1 : totalk <= 65536 ? 2 : 4;
}

/** Indices narrowed and laid out little-endian, as Psyche's `compress_idx` reinterprets them. */
export function narrowIndices(indices: Uint32Array, totalk: number): Uint8Array {
  const width = indexBytes(totalk);
  const out = new Uint8Array(indices.length * width);
  for (let i = 0; i < indices.length; i++) {
    const v = indices[i] as number;
    if (v >= totalk) throw new DistroShapeError(`index ${v} out of range for totalk ${totalk}`);
    for (let b = 0; b < width; b++) out[i * width + b] = (v >>> (8 * b)) & 0xff;
  }
  return out;
}

export function widenIndices(bytes: Uint8Array, totalk: number): Uint32Array {
  const width = indexBytes(totalk);
  if (bytes.length % width !== 0)
    throw new DistroShapeError(`index payload of ${bytes.length} bytes is not a multiple of ${width}`);
  const out = new Uint32Array(bytes.length / width);
  for (let i = 0; i < out.length; i++) {
    let v = 0;
    for (let b = width - 1; b >= 0; b--) v = v * 256 + (bytes[i * width + b] as number);
    if (v >= totalk) throw new DistroShapeError(`index ${v} out of range for totalk ${totalk}`);
    out[i] = v;
  }
  return out;
}

/** Checks a (possibly untrusted) result against the layout the run's chunk size gives this tensor. */
export function checkResult(r: TensorResult, l: BlockLayout, what = 'result'): void {
  if (!sameShape(r.xshape, l.xshape))
    throw new DistroShapeError(
      `${what}: xshape [${r.xshape.join(', ')}] does not match the expected [${l.xshape.join(', ')}]`,
    );
  if (r.totalk !== l.totalk) throw new DistroShapeError(`${what}: totalk ${r.totalk}, expected ${l.totalk}`);
  if (!Number.isSafeInteger(r.k) || r.k < 1 || r.k > l.totalk)
    throw new DistroShapeError(`${what}: k = ${r.k} outside [1, ${l.totalk}]`);
  const n = l.blocks * r.k;
  if (r.indices.length !== n || r.values.length !== n)
    throw new DistroShapeError(
      `${what}: ${r.indices.length} indices and ${r.values.length} values, expected ${n} each (${l.blocks} chunks × k ${r.k})`,
    );
  for (let i = 0; i < n; i++)
    if ((r.indices[i] as number) >= l.totalk)
      throw new DistroShapeError(`${what}: index ${r.indices[i]} ≥ totalk ${l.totalk}`);
}
