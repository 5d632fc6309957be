// Primitive encodings: varints (minimal, bounded, bigint path), f32, strings, bools, sign packing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { indexWidth, packSigns, unpackSigns, WireError, wireLimits } from '../src/index.ts';
import { wireCode as code } from './fixtures/wire.ts';
import { ByteReader, ByteWriter } from '../src/wire/codec.ts';
import { signAt, varintSize } from '../src/wire/distro-result.ts';

const write = (fn: (w: ByteWriter) => void): Uint8Array => {
  const w = new ByteWriter();
  fn(w);
  return w.finish();
};
const reader = (bytes: number[] | Uint8Array) => new ByteReader(Uint8Array.from(bytes));

describe('varints', () => {
  it('round-trip every u53 in minimal length', () => {
    fc.assert(
      fc.property(fc.oneof(fc.maxSafeNat(), fc.integer({ min: 0, max: 1 << 16 })), (v) => {
        const b = write((w) => w.u53(v, 'v'));
        expect(b.length).toBe(varintSize(v));
        const r = new ByteReader(b);
        expect(r.u53('v')).toBe(v);
        expect(r.remaining).toBe(0);
      }),
    );
  });

  it('known encodings', () => {
    expect(Array.from(write((w) => w.u32(0, 'v')))).toEqual([0]);
    expect(Array.from(write((w) => w.u32(127, 'v')))).toEqual([0x7f]);
    expect(Array.from(write((w) => w.u32(128, 'v')))).toEqual([0x80, 0x01]);
    expect(Array.from(write((w) => w.u32(300, 'v')))).toEqual([0xac, 0x02]);
    expect(Array.from(write((w) => w.u32(0xffff_ffff, 'v')))).toEqual([0xff, 0xff, 0xff, 0xff, 0x0f]);
    expect(Array.from(write((w) => w.u53(2 ** 53 - 1, 'v')))).toEqual([
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f,
    ]);
  });

  it('reject overlong (non-minimal) encodings, so each value has one spelling', () => {
    expect(code(() => reader([0x80, 0x00]).u32('v'))).toBe('inconsistent');
    expect(code(() => reader([0xff, 0x80, 0x00]).u32('v'))).toBe('inconsistent');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), (v) => {
        const b = Array.from(write((w) => w.u53(v, 'v')));
        b[b.length - 1]! |= 0x80;
        b.push(0);
        expect(['inconsistent', 'oversized']).toContain(code(() => reader(b).u53('v')));
      }),
    );
  });

  it('reject values beyond their type with a typed error', () => {
    expect(code(() => write((w) => w.u32(2 ** 32, 'v')))).toBe('oversized');
    expect(code(() => write((w) => w.u53(2 ** 53, 'v')))).toBe('oversized');
    expect(code(() => write((w) => w.u32(-1, 'v')))).toBe('inconsistent');
    expect(code(() => write((w) => w.u32(1.5, 'v')))).toBe('inconsistent');
    expect(code(() => reader([0x80, 0x80, 0x80, 0x80, 0x10]).u32('v'))).toBe('oversized'); // 2^32
    expect(code(() => reader([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]).u53('v'))).toBe('oversized'); // 2^53
    expect(code(() => reader([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).u53('v'))).toBe(
      'oversized',
    );
    expect(code(() => reader(new Array<number>(20).fill(0xff)).u53('v'))).toBe('oversized');
  });

  it('report a varint cut short as truncated', () => {
    expect(code(() => reader([]).u32('v'))).toBe('truncated');
    expect(code(() => reader([0x80]).u32('v'))).toBe('truncated');
    expect(code(() => reader([0xff, 0xff]).u53('v'))).toBe('truncated');
  });

  it('full u64 path with bigint', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), (v) => {
        const b = write((w) => w.varU64Big(v, 'v'));
        const r = new ByteReader(b);
        expect(r.varU64Big('v')).toBe(v);
        expect(r.remaining).toBe(0);
      }),
    );
    expect(Array.from(write((w) => w.varU64Big((1n << 64n) - 1n, 'v')))).toEqual([
      ...new Array<number>(9).fill(0xff),
      0x01,
    ]);
    expect(code(() => reader([...new Array<number>(9).fill(0xff), 0x02]).varU64Big('v'))).toBe('oversized');
    expect(code(() => reader([...new Array<number>(10).fill(0xff), 0x01]).varU64Big('v'))).toBe('oversized');
    expect(code(() => reader([0x80, 0x00]).varU64Big('v'))).toBe('inconsistent');
    expect(code(() => write((w) => w.varU64Big(1n << 64n, 'v')))).toBe('oversized');
  });
});

describe('f32', () => {
  it('round-trips every finite f32 bit pattern, −0 included', () => {
    fc.assert(
      fc.property(fc.float({ noNaN: true }), (v) => {
        expect(Object.is(new ByteReader(write((w) => w.f32(v, 'v'))).f32('v'), v)).toBe(true);
      }),
    );
  });
  it('writes NaN canonically and rejects other NaN payloads (one spelling for NaN)', () => {
    const b = write((w) => w.f32(Number.NaN, 'v'));
    expect(Array.from(b)).toEqual([0x00, 0x00, 0xc0, 0x7f]);
    expect(new ByteReader(b).f32('v')).toBeNaN();
    expect(code(() => reader([0x01, 0x00, 0xc0, 0x7f]).f32('v'))).toBe('inconsistent');
    expect(code(() => reader([0x00, 0x00, 0xc0, 0xff]).f32('v'))).toBe('inconsistent');
  });
  it('rounds doubles to f32 on encode', () => {
    expect(new ByteReader(write((w) => w.f32(0.1, 'v'))).f32('v')).toBe(Math.fround(0.1));
  });
});

describe('strings and bytes', () => {
  it('round-trip any well-formed string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (s) => {
        expect(new ByteReader(write((w) => w.string(s, 1 << 20, 's'))).string(1 << 20, 's')).toBe(s);
      }),
    );
  });
  it('keep a leading BOM (TextDecoder would strip it by default: two spellings of one string)', () => {
    expect(new ByteReader(write((w) => w.string('\uFEFFx', 64, 's'))).string(64, 's')).toBe('\uFEFFx');
  });
  it('reject invalid or overlong UTF-8 and lone surrogates', () => {
    expect(code(() => reader([1, 0xff]).string(64, 's'))).toBe('inconsistent');
    expect(code(() => reader([2, 0xc0, 0x80]).string(64, 's'))).toBe('inconsistent');
    expect(code(() => reader([3, 0xed, 0xa0, 0x80]).string(64, 's'))).toBe('inconsistent'); // encoded surrogate
    expect(code(() => write((w) => w.string('a\uD800b', 64, 's')))).toBe('inconsistent');
    expect(code(() => write((w) => w.string('\uDC00', 64, 's')))).toBe('inconsistent');
    expect(code(() => write((w) => w.string('\uD83D\uDE00', 64, 's')))).toBe('no-error');
  });
  it('enforce length caps on both sides', () => {
    expect(code(() => write((w) => w.string('abcde', 4, 's')))).toBe('limit');
    expect(code(() => reader([5, 97, 98, 99, 100, 101]).string(4, 's'))).toBe('limit');
    expect(code(() => reader([5, 97]).string(8, 's'))).toBe('truncated');
    expect(code(() => reader([5, 97]).bytesField(8, 'b'))).toBe('truncated');
  });
  it('copies fixed fields so decoded values never alias the input buffer', () => {
    const input = Uint8Array.from([1, 2, 3]);
    const out = new ByteReader(input).fixed(3, 'f');
    input[0] = 9;
    expect(Array.from(out)).toEqual([1, 2, 3]);
  });
  it('bools are exactly 0 or 1', () => {
    expect(reader([0]).bool('b')).toBe(false);
    expect(reader([1]).bool('b')).toBe(true);
    expect(code(() => reader([2]).bool('b'))).toBe('inconsistent');
  });
  it('errors name the field', () => {
    try {
      reader([]).u32('tensors[3].k');
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(WireError);
      expect((e as WireError).field).toBe('tensors[3].k');
      expect((e as WireError).message).toContain('tensors[3].k');
    }
  });
  it('the writer refuses to produce a frame over maxFrameBytes', () => {
    const w = new ByteWriter(wireLimits({ maxFrameBytes: 3 }));
    w.raw(new Uint8Array(4));
    expect(code(() => w.finish())).toBe('oversized');
  });
});

describe('sign bits and index widths', () => {
  it('pack LSB first, 1 = negative (signbit: −0 negative, +0 positive), zero padding', () => {
    fc.assert(
      fc.property(fc.array(fc.float(), { maxLength: 70 }), (vals) => {
        const v = Float32Array.from(vals);
        const s = packSigns(v);
        expect(s.bits.length).toBe(Math.ceil(v.length / 8));
        const unpacked = unpackSigns(s);
        for (let i = 0; i < v.length; i++) {
          const negative =
            Object.is(v[i], -0) ||
            v[i]! < 0 ||
            (Number.isNaN(v[i]!) && new Uint32Array(v.buffer)[i]! >>> 31 === 1);
          expect(signAt(s, i)).toBe(negative ? -1 : 1);
          expect(unpacked[i]).toBe(negative ? -1 : 1);
          expect((s.bits[i >> 3]! >> (i & 7)) & 1).toBe(negative ? 1 : 0);
        }
        if (v.length % 8 !== 0) expect(s.bits[s.bits.length - 1]! >> (v.length % 8)).toBe(0);
      }),
    );
    expect(Array.from(packSigns(Float32Array.from([-1, 0, -0, 1, 1, 1, 1, -5, -2])).bits)).toEqual([
      0x85, 0x01,
    ]);
  });
  it('narrow indices as Psyche: ≤256 → u8, ≤65536 → u16, else u32', () => {
    expect([1, 256, 257, 4096, 65_536, 65_537, 2 ** 32 - 1].map(indexWidth)).toEqual([1, 1, 2, 2, 2, 4, 4]);
  });
});
