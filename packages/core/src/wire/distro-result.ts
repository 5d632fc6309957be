// One tensor's DisTrO result: the top-k DCT coefficients of every chunk
// (docs/protocol.md "Top-k and 1-bit signs", "Training results and commitments").
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
// | valueKind | u8: 0 = f32 coefficients, 1 = 1-bit signs, 2 = n-bit quantised (SparseLoCo)     |
// | values    | f32: chunks·k × 4 B LE, all finite. sign: ⌈chunks·k/8⌉ B, entry i = bit i%8 of   |
// |           | byte ⌊i/8⌋ (LSB first), 1 = negative (signbit, so −0 is negative), pad bits 0   |
// |           | quant: bits ‖ scales ‖ codes, as below                                          |
//
// n-bit quantised values (valueKind 2), L = 2^(bits−1) magnitude levels per chunk:
//
// | field  | encoding                                                                           |
// |--------|------------------------------------------------------------------------------------|
// | bits   | u8, 1..8: bits per entry (1 sign bit + bits−1 level bits)                          |
// | scales | chunks·L × f32 LE, chunk-major: chunk c's level table is [c·L, c·L+L); each finite |
// |        | with the sign bit clear (so no −0, NaN or ±Inf)                                     |
// | codes  | ⌈chunks·k·bits/8⌉ B: entry i's code is stream bits [i·bits, i·bits+bits), stream  |
// |        | bit j = bit j%8 of byte ⌊j/8⌋ (LSB first); code bit 0 = sign (1 = negative), code |
// |        | bits 1.. = level ℓ; entry i of chunk c means ±scales[c·L + ℓ]; pad bits 0          |
//
// A quantised entry decodes to an f32 exactly (a scale with a sign), so every receiver reads the same
// value without arithmetic. With bits = 1 the codes are laid out as the 1-bit signs are.
//
// Counts are derived, not sent (k is the only count on the wire), so "index count ≠ chunks×k" or a
// sign-bit length mismatch cannot even be spelled; the decoder rejects everything that can: a totalk
// that does not match xshape, k outside 1..totalk, an index ≥ totalk or repeated in its chunk, non-zero
// padding bits, non-finite values, bits outside 1..8, negative or non-finite scales. Duplicate indices
// are rejected because top-k never produces them and accepting them would let a trainer choose how its
// entries weigh in the receiver's scatter-mean.
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

/**
 * n-bit quantised values (valueKind 2, see the header): per chunk a table of L = 2^(bits−1) magnitudes,
 * per entry a packed code of a sign bit and a level. Entry i of chunk c is ±scales[c·L + level].
 */
export interface QuantValues {
  kind: 'quant';
  /** Bits per entry, 1..MAX_QUANT_BITS. */
  bits: number;
  /** chunks × 2^(bits−1) magnitudes, chunk-major; finite, sign bit clear. */
  scales: Float32Array;
  /** ⌈count·bits/8⌉ bytes of codes, LSB first; code bit 0 = sign (1 = negative), bits 1.. = level. */
  codes: Uint8Array;
}

export type DistroValues = F32Values | SignValues | QuantValues;

export interface DistroResult {
  /** Encoded shape before flattening the in-block axes (docs/protocol.md "DCT blocks and xshape"). */
  xshape: number[];
  /** Coefficients per chunk. */
  totalk: number;
  /** Flat, chunk-major: chunks × k in-chunk indices. Decoded at the narrowed width (u8/u16/u32). */
  indices: SparseIndices;
  values: DistroValues;
}

export const VALUE_KIND_F32 = 0;
export const VALUE_KIND_SIGN = 1;
export const VALUE_KIND_QUANT = 2;
/** Widest quantised code: 1 sign bit + 7 level bits. */
export const MAX_QUANT_BITS = 8;

/** Magnitude levels per chunk of a `bits`-bit quantised result: 2^(bits−1). */
export function quantLevels(bits: number): number {
  return 2 ** (bits - 1);
}

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

/**
 * Exact encoded size in bytes of one tensor result with these parameters (for bandwidth accounting);
 * `bits` is used by 'quant' only.
 */
export function encodedDistroResultSize(
  xshape: readonly number[],
  k: number,
  valueKind: DistroValues['kind'],
  bits = 2,
): number {
  const totalk = chunkSizeOf(xshape);
  let prod = 1;
  for (const d of xshape) prod *= d;
  const chunks = prod / totalk;
  const n = chunks * k;
  let size = 1 + varintSize(totalk) + varintSize(k) + 1;
  for (const d of xshape) size += varintSize(d);
  size += n * indexWidth(totalk);
  if (valueKind === 'f32') size += n * 4;
  else if (valueKind === 'sign') size += Math.ceil(n / 8);
  else size += 1 + chunks * quantLevels(bits) * 4 + Math.ceil((n * bits) / 8);
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

/** The bits after the first `used` of `bytes` (the last byte's tail) must be zero: one spelling per value. */
function checkPadding(bytes: Uint8Array, used: number, field: string, what: string): void {
  const rem = used % 8;
  if (rem !== 0 && bytes[bytes.length - 1]! >> rem !== 0) {
    throw new WireError('inconsistent', `${field}.values`, `non-zero padding bits after the last ${what}`);
  }
}

function checkSignPadding(bits: Uint8Array, count: number, field: string): void {
  checkPadding(bits, count, field, 'sign');
}

function checkQuantBits(bits: number, field: string): void {
  if (!Number.isInteger(bits) || bits < 1 || bits > MAX_QUANT_BITS)
    throw new WireError('inconsistent', `${field}.values.bits`, `bits ${bits} not in 1..${MAX_QUANT_BITS}`);
}

/** Scales are magnitudes: finite with the sign bit clear (rejects negatives, −0, ±Inf and every NaN). */
function checkScales(scales: Float32Array, field: string): void {
  const raw = new Uint32Array(scales.buffer, scales.byteOffset, scales.length);
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i]!;
    if (b >>> 31 !== 0 || (b & 0x7f80_0000) === 0x7f80_0000)
      throw new WireError(
        'inconsistent',
        `${field}.values.scales[${i}]`,
        `scale ${scales[i]} is not a finite magnitude with a clear sign bit`,
      );
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
  } else if (v?.kind === 'quant') {
    checkQuantBits(v.bits, field);
    const levels = chunks * quantLevels(v.bits);
    if (!(v.scales instanceof Float32Array) || v.scales.length !== levels)
      throw new WireError(
        'inconsistent',
        `${field}.values.scales`,
        `expected a Float32Array of ${levels} scales (${chunks} chunks × ${quantLevels(v.bits)} levels)`,
      );
    checkScales(v.scales, field);
    const codeBytes = Math.ceil((n * v.bits) / 8);
    if (!(v.codes instanceof Uint8Array) || v.codes.length !== codeBytes)
      throw new WireError(
        'inconsistent',
        `${field}.values.codes`,
        `expected ${codeBytes} bytes for ${n} ${v.bits}-bit codes`,
      );
    checkPadding(v.codes, n * v.bits, field, 'code');
  } else {
    throw new WireError('inconsistent', `${field}.values`, "kind must be 'f32', 'sign' or 'quant'");
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
    writeF32s(w, v.values);
  } else if (v.kind === 'sign') {
    w.u8(VALUE_KIND_SIGN, `${field}.valueKind`);
    w.raw(v.bits);
  } else {
    w.u8(VALUE_KIND_QUANT, `${field}.valueKind`);
    w.u8(v.bits, `${field}.values.bits`);
    writeF32s(w, v.scales);
    w.raw(v.codes);
  }
}

/** f32s as raw little-endian bytes (a copy of the array's bytes on little-endian hosts). */
function writeF32s(w: ByteWriter, values: Float32Array): void {
  const dst = w.alloc(values.length * 4);
  if (HOST_LITTLE_ENDIAN) dst.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
  else {
    const dv = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);
    for (let i = 0; i < values.length; i++) dv.setFloat32(i * 4, values[i]!, true);
  }
}

function readF32s(r: ByteReader, count: number, field: string): Float32Array {
  const bytes = r.take(count * 4, field);
  const f = new Float32Array(count);
  if (HOST_LITTLE_ENDIAN) new Uint8Array(f.buffer).set(bytes);
  else {
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < count; i++) f[i] = dv.getFloat32(i * 4, true);
  }
  return f;
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
    const f = readF32s(r, n, `${field}.values`);
    checkFinite(f, field);
    values = { kind: 'f32', values: f };
  } else if (kind === VALUE_KIND_SIGN) {
    const bits = r.fixed(Math.ceil(n / 8), `${field}.values`);
    checkSignPadding(bits, n, field);
    values = { kind: 'sign', bits, count: n };
  } else if (kind === VALUE_KIND_QUANT) {
    const bits = r.u8(`${field}.values.bits`);
    checkQuantBits(bits, field);
    // Both sizes are checked against the bytes present (take/fixed) before anything is allocated.
    const scales = readF32s(r, chunks * quantLevels(bits), `${field}.values.scales`);
    checkScales(scales, field);
    const codes = r.fixed(Math.ceil((n * bits) / 8), `${field}.values.codes`);
    checkPadding(codes, n * bits, field, 'code');
    values = { kind: 'quant', bits, scales, codes };
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
