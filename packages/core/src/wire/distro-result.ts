// One tensor's DisTrO result: the top-k DCT coefficients of every chunk (psyche-spec §1.5–1.6, §1.10).
//
// | field     | encoding                                                                        |
// |-----------|---------------------------------------------------------------------------------|
// | rank      | u8, 1..8                                                                        |
// | xshape    | rank × varint u32, each ≥ 1 (encoded shape before flattening: [Y,X,n1,n2]       |
// |           | for matrices, [L/n, n] for vectors)                                             |
// | totalk    | varint u32 = chunk size: last dim if rank ≤ 2, product of last two if rank > 2  |
// | k         | varint u32, 1..totalk (entries per chunk)                                       |
// | indices   | chunks·k entries, chunks = prod(xshape)/totalk, each w bytes LE with            |
// |           | w = 1 if totalk ≤ 256, 2 if ≤ 65 536, else 4 (Psyche's narrowing); each index   |
// |           | < totalk and distinct within its chunk; chunk-major (chunk c = [c·k, c·k+k))    |
// | valueKind | u8: 0 = f32 coefficients, 1 = 1-bit signs                                       |
// | values    | f32: chunks·k × 4 B LE, all finite. sign: ⌈chunks·k/8⌉ B, entry i = bit i%8 of   |
// |           | byte ⌊i/8⌋ (LSB first), 1 = negative (signbit, so −0 is negative), pad bits 0   |
//
// Counts are derived, not sent (k is the only count on the wire), so "index count ≠ chunks×k" or a
// sign-bit length mismatch cannot even be spelled; the decoder rejects everything that can: a totalk
// that does not match xshape, k outside 1..totalk, an index ≥ totalk or repeated in its chunk, non-zero
// padding bits, non-finite values. Duplicate indices are rejected because top-k never produces them and
// accepting them would let a trainer choose how its entries weigh in the receiver's scatter-mean.
import type { ByteReader, ByteWriter } from './codec.ts';
import { HOST_LITTLE_ENDIAN, U32_MAX } from './codec.ts';
import { WireError } from './errors.ts';
import { MAX_RANK } from './limits.ts';

export type SparseIndices = Uint8Array | Uint16Array | Uint32Array;

/** Signed coefficients, one per index. */
export interface F32Values {
  kind: 'f32';
  values: Float32Array;
}

/** 1-bit quantised values: sign bits packed LSB-first, 1 = negative; the receiver maps b → 1 − 2b. */
export interface SignValues {
  kind: 'sign';
  bits: Uint8Array;
  count: number;
}

export type DistroValues = F32Values | SignValues;

export interface DistroResult {
  /** Encoded shape before flattening the in-block axes (psyche-spec §1.5). */
  xshape: number[];
  /** Coefficients per chunk. */
  totalk: number;
  /** Flat, chunk-major: chunks × k in-chunk indices. Decoded at the narrowed width (u8/u16/u32). */
  indices: SparseIndices;
  values: DistroValues;
}

export const VALUE_KIND_F32 = 0;
export const VALUE_KIND_SIGN = 1;

/** Bytes per index on the wire for a chunk size (Psyche's `compress_idx` narrowing). */
export function indexWidth(totalk: number): 1 | 2 | 4 {
  if (totalk <= 256) return 1;
  if (totalk <= 65_536) return 2;
  return 4;
}

/** Chunk size implied by xshape: rank > 2 flattens the last two dims (a 2-D block), else the last dim. */
export function chunkSizeOf(xshape: readonly number[]): number {
  const n = xshape.length;
  if (n === 0) return 0;
  return n > 2 ? xshape[n - 2]! * xshape[n - 1]! : xshape[n - 1]!;
}

/** Pack signbits of `values` (LSB first, 1 = negative, −0 negative as torch's signbit). */
export function packSigns(values: Float32Array): SignValues {
  const bits = new Uint8Array(Math.ceil(values.length / 8));
  const raw = new Uint32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < values.length; i++) {
    if (raw[i]! >>> 31) bits[i >> 3]! |= 1 << (i & 7);
  }
  return { kind: 'sign', bits, count: values.length };
}

/** The ±1 value of entry i of a sign bitset. */
export function signAt(signs: SignValues, i: number): 1 | -1 {
  return (signs.bits[i >> 3]! >> (i & 7)) & 1 ? -1 : 1;
}

/** Expand a sign bitset to ±1 floats. */
export function unpackSigns(signs: SignValues): Float32Array {
  const out = new Float32Array(signs.count);
  for (let i = 0; i < signs.count; i++) out[i] = (signs.bits[i >> 3]! >> (i & 7)) & 1 ? -1 : 1;
  return out;
}

/** Exact encoded size in bytes of one tensor result with these parameters (for bandwidth accounting). */
export function encodedDistroResultSize(
  xshape: readonly number[],
  k: number,
  valueKind: 'f32' | 'sign',
): number {
  const totalk = chunkSizeOf(xshape);
  let prod = 1;
  for (const d of xshape) prod *= d;
  const n = (prod / totalk) * k;
  let size = 1 + varintSize(totalk) + varintSize(k) + 1;
  for (const d of xshape) size += varintSize(d);
  size += n * indexWidth(totalk);
  size += valueKind === 'f32' ? n * 4 : Math.ceil(n / 8);
  return size;
}

/** Bytes of a minimal LEB128 varint. */
export function varintSize(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

interface Geometry {
  chunks: number;
  totalk: number;
}

/** Check rank, dims and totalk; return the chunk count. Shared by encoder and decoder. */
function checkGeometry(xshape: readonly number[], totalk: number, field: string): Geometry {
  if (xshape.length < 1 || xshape.length > MAX_RANK) {
    throw new WireError('inconsistent', `${field}.xshape`, `rank ${xshape.length} not in 1..${MAX_RANK}`);
  }
  let prod = 1;
  for (let i = 0; i < xshape.length; i++) {
    const d = xshape[i]!;
    if (!Number.isInteger(d) || d < 1 || d > U32_MAX) {
      throw new WireError('inconsistent', `${field}.xshape[${i}]`, `dimension ${d} not in 1..${U32_MAX}`);
    }
    prod *= d;
    if (prod > Number.MAX_SAFE_INTEGER)
      throw new WireError('oversized', `${field}.xshape`, 'element count exceeds 2^53−1');
  }
  const block = chunkSizeOf(xshape);
  if (totalk !== block) {
    throw new WireError(
      'inconsistent',
      `${field}.totalk`,
      `totalk ${totalk} ≠ chunk size ${block} implied by xshape`,
    );
  }
  if (block > U32_MAX) throw new WireError('oversized', `${field}.totalk`, `chunk size ${block} exceeds u32`);
  // Always divisible given totalk = trailing dims; kept explicit because the invariant is what matters.
  const chunks = prod / totalk;
  if (!Number.isInteger(chunks) || chunks * totalk !== prod) {
    throw new WireError('inconsistent', `${field}.xshape`, `product ${prod} ≠ chunks × totalk`);
  }
  return { chunks, totalk };
}

/** Every index < totalk and distinct within its chunk. */
function checkIndices(
  indices: SparseIndices,
  chunks: number,
  k: number,
  totalk: number,
  field: string,
): void {
  const n = chunks * k;
  for (let i = 0; i < n; i++) {
    if (indices[i]! >= totalk) {
      throw new WireError('inconsistent', `${field}.indices[${i}]`, `index ${indices[i]} ≥ totalk ${totalk}`);
    }
  }
  if (k === 1) return;
  if (k <= 32) {
    // Pairwise is cheapest for the small k DisTrO uses (8 → 28 compares per chunk, no allocation).
    for (let c = 0; c < n; c += k) {
      for (let a = c + 1; a < c + k; a++) {
        const v = indices[a]!;
        for (let b = c; b < a; b++) {
          if (indices[b] === v)
            throw new WireError('inconsistent', `${field}.indices[${a}]`, `index ${v} repeated in its chunk`);
        }
      }
    }
    return;
  }
  const scratch = new Uint32Array(k);
  for (let c = 0; c < n; c += k) {
    scratch.set(indices.subarray(c, c + k));
    scratch.sort();
    for (let a = 1; a < k; a++) {
      if (scratch[a] === scratch[a - 1]) {
        throw new WireError(
          'inconsistent',
          `${field}.indices[${c}..${c + k})`,
          `index ${scratch[a]} repeated in its chunk`,
        );
      }
    }
  }
}

function checkFinite(values: Float32Array, field: string): void {
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i]!))
      throw new WireError('inconsistent', `${field}.values[${i}]`, `non-finite value ${values[i]}`);
  }
}

function checkSignPadding(bits: Uint8Array, count: number, field: string): void {
  const rem = count & 7;
  if (rem !== 0 && bits[bits.length - 1]! >> rem !== 0) {
    throw new WireError('inconsistent', `${field}.values`, 'non-zero padding bits after the last sign');
  }
}

function isSparseIndices(x: unknown): x is SparseIndices {
  return x instanceof Uint8Array || x instanceof Uint16Array || x instanceof Uint32Array;
}

/** Validate an in-memory result (the encoder's input) and return its k. */
export function validateDistroResult(t: DistroResult, field: string): number {
  if (typeof t !== 'object' || t === null || !Array.isArray(t.xshape)) {
    throw new WireError('inconsistent', field, 'not a DistroResult');
  }
  const { chunks, totalk } = checkGeometry(t.xshape, t.totalk, field);
  if (!isSparseIndices(t.indices))
    throw new WireError('inconsistent', `${field}.indices`, 'not a Uint8/16/32Array');
  const n = t.indices.length;
  const k = n / chunks;
  if (!Number.isInteger(k) || k < 1 || k > totalk) {
    throw new WireError(
      'inconsistent',
      `${field}.indices`,
      `length ${n} is not chunks (${chunks}) × k with 1 ≤ k ≤ ${totalk}`,
    );
  }
  checkIndices(t.indices, chunks, k, totalk, field);
  const v = t.values;
  if (v?.kind === 'f32') {
    if (!(v.values instanceof Float32Array) || v.values.length !== n) {
      throw new WireError('inconsistent', `${field}.values`, `expected Float32Array of length ${n}`);
    }
    checkFinite(v.values, field);
  } else if (v?.kind === 'sign') {
    if (v.count !== n)
      throw new WireError(
        'inconsistent',
        `${field}.values.count`,
        `sign count ${v.count} ≠ index count ${n}`,
      );
    if (!(v.bits instanceof Uint8Array) || v.bits.length !== Math.ceil(n / 8)) {
      throw new WireError(
        'inconsistent',
        `${field}.values.bits`,
        `expected ${Math.ceil(n / 8)} bytes for ${n} signs`,
      );
    }
    checkSignPadding(v.bits, n, field);
  } else {
    throw new WireError('inconsistent', `${field}.values`, "kind must be 'f32' or 'sign'");
  }
  return k;
}

export function writeDistroResult(w: ByteWriter, t: DistroResult, field: string): void {
  const k = validateDistroResult(t, field);
  w.u8(t.xshape.length, `${field}.rank`);
  for (let i = 0; i < t.xshape.length; i++) w.u32(t.xshape[i]!, `${field}.xshape[${i}]`);
  w.u32(t.totalk, `${field}.totalk`);
  w.u32(k, `${field}.k`);
  const width = indexWidth(t.totalk);
  const idx = t.indices;
  const n = idx.length;
  const out = w.alloc(n * width);
  if (HOST_LITTLE_ENDIAN && idx.BYTES_PER_ELEMENT === width) {
    out.set(new Uint8Array(idx.buffer, idx.byteOffset, idx.byteLength));
  } else {
    for (let i = 0, o = 0; i < n; i++, o += width) {
      const v = idx[i]!;
      out[o] = v & 0xff;
      if (width >= 2) out[o + 1] = (v >>> 8) & 0xff;
      if (width === 4) {
        out[o + 2] = (v >>> 16) & 0xff;
        out[o + 3] = (v >>> 24) & 0xff;
      }
    }
  }
  const v = t.values;
  if (v.kind === 'f32') {
    w.u8(VALUE_KIND_F32, `${field}.valueKind`);
    const dst = w.alloc(n * 4);
    if (HOST_LITTLE_ENDIAN)
      dst.set(new Uint8Array(v.values.buffer, v.values.byteOffset, v.values.byteLength));
    else {
      const dv = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);
      for (let i = 0; i < n; i++) dv.setFloat32(i * 4, v.values[i]!, true);
    }
  } else {
    w.u8(VALUE_KIND_SIGN, `${field}.valueKind`);
    w.raw(v.bits);
  }
}

/** Running total of sparse entries, shared across the tensors of one frame. */
export interface ElementBudget {
  remaining: number;
}

export function readDistroResult(r: ByteReader, field: string, budget: ElementBudget): DistroResult {
  const rank = r.u8(`${field}.rank`);
  if (rank < 1 || rank > MAX_RANK)
    throw new WireError('inconsistent', `${field}.rank`, `rank ${rank} not in 1..${MAX_RANK}`);
  const xshape: number[] = [];
  for (let i = 0; i < rank; i++) xshape.push(r.u32(`${field}.xshape[${i}]`));
  const totalk = r.u32(`${field}.totalk`);
  const { chunks } = checkGeometry(xshape, totalk, field);
  const k = r.u32(`${field}.k`);
  if (k < 1 || k > totalk) throw new WireError('inconsistent', `${field}.k`, `k ${k} not in 1..${totalk}`);
  const n = chunks * k;
  if (n > budget.remaining) {
    throw new WireError(
      'limit',
      `${field}.indices`,
      `${n} entries exceeds the remaining maxElements budget ${budget.remaining}`,
    );
  }
  budget.remaining -= n;
  const width = indexWidth(totalk);
  // The byte check precedes every allocation sized by n.
  const raw = r.take(n * width, `${field}.indices`);
  const indices = widenIndices(raw, n, width);
  checkIndices(indices, chunks, k, totalk, field);
  const kind = r.u8(`${field}.valueKind`);
  let values: DistroValues;
  if (kind === VALUE_KIND_F32) {
    const bytes = r.take(n * 4, `${field}.values`);
    const f = new Float32Array(n);
    if (HOST_LITTLE_ENDIAN) new Uint8Array(f.buffer).set(bytes);
    else {
      const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      for (let i = 0; i < n; i++) f[i] = dv.getFloat32(i * 4, true);
    }
    checkFinite(f, field);
    values = { kind: 'f32', values: f };
  } else if (kind === VALUE_KIND_SIGN) {
    const bits = r.fixed(Math.ceil(n / 8), `${field}.values`);
    checkSignPadding(bits, n, field);
    values = { kind: 'sign', bits, count: n };
  } else {
    throw new WireError('inconsistent', `${field}.valueKind`, `unknown value kind ${kind}`);
  }
  return { xshape, totalk, indices, values };
}

function widenIndices(raw: Uint8Array, n: number, width: 1 | 2 | 4): SparseIndices {
  if (width === 1) return raw.slice();
  const out = width === 2 ? new Uint16Array(n) : new Uint32Array(n);
  if (HOST_LITTLE_ENDIAN) {
    new Uint8Array(out.buffer).set(raw);
    return out;
  }
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  for (let i = 0; i < n; i++) out[i] = width === 2 ? dv.getUint16(i * 2, true) : dv.getUint32(i * 4, true);
  return out;
}
