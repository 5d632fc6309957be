// How LightDelta (light-delta.ts) spells a round bitmap. A round's bitmaps are nearly all ones in a healthy
// run (every slot admitted, accepted, alive) and nearly all zeros in a failing one, so each is sent in the shortest of three spellings: the raw bytes; its length
// and the positions of its zero bits; its length and the positions of its one bits (positions ascending, each
// as the gap after the previous one). Then it costs bytes for the slots that are the exception, not for the
// run's size. The decoder recomputes the encoder's choice and refuses any other spelling.
import type { ByteReader, ByteWriter } from './codec.ts';
import { WireError } from './errors.ts';

const BITS_RAW = 0;
const BITS_ZEROS = 1;
const BITS_ONES = 2;

function positions(bits: Uint8Array, one: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < bits.length * 8; i++)
    if (((((bits[i >>> 3] as number) >>> (i & 7)) & 1) === 1) === one) out.push(i);
  return out;
}

function varintBytes(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

function listBytes(length: number, list: readonly number[]): number {
  let n = varintBytes(length) + varintBytes(list.length);
  let prev = -1;
  for (const p of list) {
    n += varintBytes(p - prev - 1);
    prev = p;
  }
  return n;
}

function bitsSpelling(bits: Uint8Array): { tag: number; list: number[] } {
  const zeros = positions(bits, false);
  const ones = positions(bits, true);
  const raw = varintBytes(bits.length) + bits.length;
  const z = listBytes(bits.length, zeros);
  const o = listBytes(bits.length, ones);
  if (raw <= z && raw <= o) return { tag: BITS_RAW, list: [] };
  return z <= o ? { tag: BITS_ZEROS, list: zeros } : { tag: BITS_ONES, list: ones };
}

export function writeBits(w: ByteWriter, bits: Uint8Array, maxBytes: number, field: string): void {
  if (!(bits instanceof Uint8Array) || bits.length > maxBytes)
    throw new WireError('oversized', field, `bitmap of more than ${maxBytes} bytes`);
  const { tag, list } = bitsSpelling(bits);
  w.u8(tag, `${field}.spelling`);
  if (tag === BITS_RAW) {
    w.bytes(bits, maxBytes, field);
    return;
  }
  w.u32(bits.length, `${field}.length`);
  w.u32(list.length, `${field}.count`);
  let prev = -1;
  for (const p of list) {
    w.u32(p - prev - 1, `${field}.position`);
    prev = p;
  }
}

export function readBits(r: ByteReader, maxBytes: number, field: string): Uint8Array {
  const tag = r.u8(`${field}.spelling`);
  let bits: Uint8Array;
  if (tag === BITS_RAW) bits = r.bytesField(maxBytes, field);
  else if (tag === BITS_ZEROS || tag === BITS_ONES) {
    const length = r.u32(`${field}.length`);
    if (length > maxBytes)
      throw new WireError('limit', field, `bitmap of ${length} bytes exceeds ${maxBytes}`);
    const count = r.u32(`${field}.count`);
    if (count > length * 8 || count > r.remaining)
      throw new WireError('inconsistent', `${field}.count`, `${count} positions cannot fit`);
    bits = new Uint8Array(length);
    if (tag === BITS_ZEROS) bits.fill(0xff);
    let at = -1;
    for (let i = 0; i < count; i++) {
      at += r.u32(`${field}.position`) + 1;
      if (at >= length * 8) throw new WireError('inconsistent', `${field}.position`, 'past the bitmap');
      bits[at >>> 3] = (bits[at >>> 3] as number) ^ (1 << (at & 7));
    }
  } else throw new WireError('inconsistent', `${field}.spelling`, `unknown bitmap spelling ${tag}`);
  if (bitsSpelling(bits).tag !== tag)
    throw new WireError('inconsistent', `${field}.spelling`, 'not the shortest spelling of the bitmap');
  return bits;
}
