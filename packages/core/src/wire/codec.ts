// Primitive encodings shared by every message. All multi-byte fixed-width values are little-endian.
//
// | primitive   | encoding                                                                       |
// |-------------|--------------------------------------------------------------------------------|
// | u8 / bool   | 1 byte; bool is exactly 0 or 1                                                 |
// | varint      | unsigned LEB128, minimal length (an overlong form is rejected, so that every   |
// |             | value has exactly one encoding); u32 fields ≤ 2^32−1, u64 fields exposed as    |
// |             | numbers ≤ 2^53−1 (larger → 'oversized'); `readVarU64Big` is the full-u64 path   |
// | f32         | 4 bytes IEEE-754 LE; NaN only as the canonical quiet NaN 0x7fc00000            |
// | bytes       | varint length ‖ raw bytes                                                      |
// | string      | varint length ‖ UTF-8 (well-formed; a BOM is kept, never stripped)             |
// | key32/sig64 | 32 or 64 raw bytes, no length                                                  |
//
// Canonical encodings matter beyond tidiness: decode∘encode = id and encode∘decode = id on accepted
// input means a frame has one meaning and one spelling, so hashes and dedup keyed by bytes are sound.
import { WireError } from './errors.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export const U32_MAX = 0xffff_ffff;
export const U53_MAX = Number.MAX_SAFE_INTEGER;
const U64_MAX_BIG = (1n << 64n) - 1n;
const CANONICAL_NAN_BITS = 0x7fc0_0000;

/** True on little-endian hosts (every browser and Node target in practice); big-endian falls back to DataView. */
export const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const utf8Encoder = new TextEncoder();
// A lone surrogate would be replaced by U+FFFD when encoded, so two different strings would share bytes.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Growable output buffer with checked writers. Encoders validate their input and throw WireError too. */
export class ByteWriter {
  private buf: Uint8Array;
  private view: DataView;
  private len = 0;
  readonly limits: WireLimits;

  constructor(limits: WireLimits = DEFAULT_WIRE_LIMITS, initialCapacity = 256) {
    this.limits = limits;
    this.buf = new Uint8Array(initialCapacity);
    this.view = new DataView(this.buf.buffer);
  }

  get length(): number {
    return this.len;
  }

  private ensure(n: number): void {
    const need = this.len + n;
    if (need <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < need) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u8(v: number, field: string): void {
    if (!Number.isInteger(v) || v < 0 || v > 255)
      throw new WireError('inconsistent', field, `not a u8: ${v}`);
    this.ensure(1);
    this.buf[this.len++] = v;
  }

  bool(v: boolean, field: string): void {
    if (typeof v !== 'boolean') throw new WireError('inconsistent', field, 'not a boolean');
    this.u8(v ? 1 : 0, field);
  }

  /** Unsigned varint of a JS number in [0, max] (max ≤ 2^53−1). */
  varint(v: number, max: number, field: string): void {
    if (!Number.isInteger(v) || v < 0)
      throw new WireError('inconsistent', field, `not an unsigned integer: ${v}`);
    if (v > max) throw new WireError('oversized', field, `${v} exceeds ${max}`);
    this.ensure(8);
    // Division instead of bit shifts: shifts truncate to 32 bits.
    while (v >= 0x80) {
      this.buf[this.len++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.len++] = v;
  }

  u32(v: number, field: string): void {
    this.varint(v, U32_MAX, field);
  }

  u53(v: number, field: string): void {
    this.varint(v, U53_MAX, field);
  }

  /** Full-range u64 varint. */
  varU64Big(v: bigint, field: string): void {
    if (typeof v !== 'bigint' || v < 0n || v > U64_MAX_BIG) {
      throw new WireError('oversized', field, `not a u64: ${String(v)}`);
    }
    this.ensure(10);
    while (v >= 0x80n) {
      this.buf[this.len++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.len++] = Number(v);
  }

  /** f32 LE; the number is rounded to f32 (Math.fround) and NaN written canonically. */
  f32(v: number, field: string): void {
    if (typeof v !== 'number') throw new WireError('inconsistent', field, 'not a number');
    this.ensure(4);
    if (Number.isNaN(v)) this.view.setUint32(this.len, CANONICAL_NAN_BITS, true);
    else this.view.setFloat32(this.len, v, true);
    this.len += 4;
  }

  /** Reserve `n` bytes and return a view to fill; valid only until the next write. */
  alloc(n: number): Uint8Array {
    this.ensure(n);
    const out = this.buf.subarray(this.len, this.len + n);
    this.len += n;
    return out;
  }

  /** Raw bytes, no length. */
  raw(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.len);
    this.len += bytes.length;
  }

  /** Exactly `n` raw bytes (keys, hashes, signatures). */
  fixed(bytes: Uint8Array, n: number, field: string): void {
    if (!(bytes instanceof Uint8Array) || bytes.length !== n) {
      throw new WireError(
        'inconsistent',
        field,
        `expected ${n} bytes, got ${bytes instanceof Uint8Array ? bytes.length : typeof bytes}`,
      );
    }
    this.raw(bytes);
  }

  /** varint length ‖ bytes. */
  bytes(bytes: Uint8Array, maxBytes: number, field: string): void {
    if (!(bytes instanceof Uint8Array)) throw new WireError('inconsistent', field, 'not a Uint8Array');
    if (bytes.length > maxBytes)
      throw new WireError('limit', field, `${bytes.length} bytes exceeds ${maxBytes}`);
    this.u53(bytes.length, field);
    this.raw(bytes);
  }

  /** varint length ‖ UTF-8. */
  string(s: string, maxBytes: number, field: string): void {
    if (typeof s !== 'string') throw new WireError('inconsistent', field, 'not a string');
    if (LONE_SURROGATE.test(s)) throw new WireError('inconsistent', field, 'string has a lone surrogate');
    this.bytes(utf8Encoder.encode(s), maxBytes, field);
  }

  /** The written bytes (a copy trimmed to length), checked against the frame limit. */
  finish(): Uint8Array {
    if (this.len > this.limits.maxFrameBytes) {
      throw new WireError(
        'oversized',
        'frame',
        `${this.len} bytes exceeds maxFrameBytes ${this.limits.maxFrameBytes}`,
      );
    }
    return this.buf.slice(0, this.len);
  }
}

/** Checked cursor over received bytes. Every read verifies the bytes are present first. */
export class ByteReader {
  readonly bytes: Uint8Array;
  private readonly view: DataView;
  pos: number;
  readonly limits: WireLimits;

  constructor(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS, pos = 0) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = pos;
    this.limits = limits;
  }

  get remaining(): number {
    return this.bytes.length - this.pos;
  }

  /** Throw 'truncated' unless `n` more bytes are present. Call before allocating anything of size n. */
  need(n: number, field: string): void {
    if (n > this.remaining) {
      throw new WireError('truncated', field, `needs ${n} bytes, ${this.remaining} left`);
    }
  }

  u8(field: string): number {
    this.need(1, field);
    return this.bytes[this.pos++]!;
  }

  bool(field: string): boolean {
    const b = this.u8(field);
    if (b > 1) throw new WireError('inconsistent', field, `boolean byte must be 0 or 1, got ${b}`);
    return b === 1;
  }

  /** Minimal LEB128 varint as a number in [0, max]; max ≤ 2^53−1. */
  varint(max: number, field: string): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; ; i++) {
      if (this.pos >= this.bytes.length) throw new WireError('truncated', field, 'varint ends early');
      const b = this.bytes[this.pos++]!;
      // Exact while the true value ≤ 2^53−1; beyond that the rounded sum is still > max, so the
      // comparison below is right either way.
      result += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) {
        if (i > 0 && b === 0) throw new WireError('inconsistent', field, 'non-minimal varint');
        if (result > max) throw new WireError('oversized', field, `varint exceeds ${max}`);
        return result;
      }
      if (i >= 7 || result > max) throw new WireError('oversized', field, `varint exceeds ${max}`);
      mul *= 0x80;
    }
  }

  u32(field: string): number {
    return this.varint(U32_MAX, field);
  }

  u53(field: string): number {
    return this.varint(U53_MAX, field);
  }

  /** Full-range u64 varint (bigint). */
  varU64Big(field: string): bigint {
    let result = 0n;
    for (let i = 0; ; i++) {
      if (this.pos >= this.bytes.length) throw new WireError('truncated', field, 'varint ends early');
      const b = this.bytes[this.pos++]!;
      result |= BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) {
        if (i > 0 && b === 0) throw new WireError('inconsistent', field, 'non-minimal varint');
        if (result > U64_MAX_BIG) throw new WireError('oversized', field, 'varint exceeds u64');
        return result;
      }
      if (i >= 9) throw new WireError('oversized', field, 'varint exceeds u64');
    }
  }

  f32(field: string): number {
    this.need(4, field);
    const bits = this.view.getUint32(this.pos, true);
    const v = this.view.getFloat32(this.pos, true);
    if (Number.isNaN(v) && bits !== CANONICAL_NAN_BITS) {
      throw new WireError('inconsistent', field, 'non-canonical NaN');
    }
    this.pos += 4;
    return v;
  }

  /** A view of the next `n` bytes (no copy; valid as long as the input is). */
  take(n: number, field: string): Uint8Array {
    this.need(n, field);
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** A copy of the next `n` bytes: decoded messages never alias the caller's (maybe reused) buffer. */
  fixed(n: number, field: string): Uint8Array {
    return this.take(n, field).slice();
  }

  /** varint length ‖ bytes, copied. */
  bytesField(maxBytes: number, field: string): Uint8Array {
    const n = this.u53(field);
    if (n > maxBytes) throw new WireError('limit', field, `${n} bytes exceeds ${maxBytes}`);
    return this.fixed(n, field);
  }

  string(maxBytes: number, field: string): string {
    const n = this.u53(field);
    if (n > maxBytes) throw new WireError('limit', field, `${n} bytes exceeds ${maxBytes}`);
    const raw = this.take(n, field);
    try {
      return utf8Decoder.decode(raw);
    } catch {
      throw new WireError('inconsistent', field, 'invalid UTF-8');
    }
  }

  /** Throw 'trailing_bytes' unless the input is fully consumed. */
  end(field: string): void {
    if (this.remaining !== 0)
      throw new WireError('trailing_bytes', field, `${this.remaining} bytes after the message`);
  }
}
