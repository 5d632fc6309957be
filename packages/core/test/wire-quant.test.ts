// The n-bit quantised value kind (valueKind 2, SparseLoCo): round trips, exact sizes, the documented byte
// layout, and rejection of every malformed spelling (bits, scales, codes, padding, truncation, bit flips).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  chunkSizeOf,
  decodeTrainingResult,
  encodedDistroResultSize,
  encodeTrainingResult,
  indexWidth,
  MAX_QUANT_BITS,
  packSigns,
  quantLevels,
  WireError,
} from '../src/index.ts';
import type { DistroResult, TrainingResult } from '../src/index.ts';
import { emptyResult, wireCode } from './fixtures/wire.ts';
import { VALUE_KIND_QUANT, type QuantValues } from '../src/wire/distro-result.ts';

const xshapeArb: fc.Arbitrary<number[]> = fc.oneof<fc.Arbitrary<number[]>[]>(
  fc.tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 40 })).map(([a, b]) => [a, b]),
  fc
    .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 20 }))
    .map(([y, x, n]) => [y, x, n, 17]),
  fc.constant<number[]>([1, 300]),
);

/** A magnitude: any finite non-negative f32 (zero included, subnormals included). */
const scaleArb = fc.float({ min: 0, noNaN: true, noDefaultInfinity: true }).map((x) => Math.abs(x));

const quantResultArb: fc.Arbitrary<DistroResult> = fc
  .tuple(xshapeArb, fc.integer({ min: 1, max: MAX_QUANT_BITS }))
  .chain(([xshape, bits]) => {
    const totalk = chunkSizeOf(xshape);
    const chunks = xshape.reduce((a, b) => a * b, 1) / totalk;
    const levels = quantLevels(bits);
    return fc.integer({ min: 1, max: Math.min(totalk, 9) }).chain((k) =>
      fc
        .tuple(
          fc.array(fc.uniqueArray(fc.integer({ min: 0, max: totalk - 1 }), { minLength: k, maxLength: k }), {
            minLength: chunks,
            maxLength: chunks,
          }),
          fc.array(scaleArb, { minLength: chunks * levels, maxLength: chunks * levels }),
          fc.array(fc.integer({ min: 0, max: 2 ** bits - 1 }), {
            minLength: chunks * k,
            maxLength: chunks * k,
          }),
        )
        .map(([perChunk, scales, codes]) => {
          const idx = perChunk.flat();
          const w = indexWidth(totalk);
          return {
            xshape,
            totalk,
            indices: w === 1 ? Uint8Array.from(idx) : w === 2 ? Uint16Array.from(idx) : Uint32Array.from(idx),
            values: {
              kind: 'quant' as const,
              bits,
              scales: Float32Array.from(scales),
              codes: pack(codes, bits),
            },
          };
        }),
    );
  });

/** Reference packer written from the header's words: stream bit j = bit j%8 of byte ⌊j/8⌋. */
function pack(codes: number[], bits: number): Uint8Array {
  const out = new Uint8Array(Math.ceil((codes.length * bits) / 8));
  codes.forEach((c, i) => {
    for (let b = 0; b < bits; b++) if ((c >> b) & 1) out[(i * bits + b) >> 3]! |= 1 << ((i * bits + b) & 7);
  });
  return out;
}

const withTensors = (...tensors: DistroResult[]): TrainingResult => emptyResult({ tensors });

/** A frame holding one raw (possibly invalid) tensor, bypassing the encoder's checks. */
function rawFrame(tensor: number[]): Uint8Array {
  const prefix = encodeTrainingResult(emptyResult());
  prefix[prefix.length - 1] = 1; // tensorCount 0 → 1 (the last byte of an empty result)
  return Uint8Array.from([...prefix, ...tensor]);
}

// xshape [2, 4] (2 chunks of 4), k = 2, indices [0,3 | 2,1], bits 2 → 2 levels per chunk.
const head = [2, 2, 4, 4, 2, 0, 3, 2, 1, VALUE_KIND_QUANT];
const f32le = (x: number): number[] => [...new Uint8Array(Float32Array.of(x).buffer)];
const goodScales = [...f32le(0.5), ...f32le(2), ...f32le(0), ...f32le(1e-30)];
// Codes (sign, level): (+,1) (−,0) (−,1) (+,0) → 0b10, 0b01, 0b11, 0b00 → one byte 0b00_11_01_10.
const goodCodes = [0b0011_0110];
const decodeBytes = (tensor: number[]) => wireCode(() => decodeTrainingResult(rawFrame(tensor)));

describe('n-bit quantised values on the wire', () => {
  it('decode ∘ encode is the identity and re-encodes to the same bytes', () => {
    fc.assert(
      fc.property(fc.array(quantResultArb, { minLength: 1, maxLength: 3 }), (tensors) => {
        const frame = encodeTrainingResult(withTensors(...tensors));
        const back = decodeTrainingResult(frame);
        expect(back.tensors).toEqual(tensors);
        expect(encodeTrainingResult(back)).toEqual(frame);
      }),
      { numRuns: 300 },
    );
  });

  it('encodedDistroResultSize is the exact encoded size', () => {
    const empty = encodeTrainingResult(emptyResult()).length;
    fc.assert(
      fc.property(quantResultArb, (t) => {
        const v = t.values as QuantValues;
        const k = t.indices.length / (t.xshape.reduce((a, b) => a * b, 1) / t.totalk);
        expect(encodeTrainingResult(withTensors(t)).length - empty).toBe(
          encodedDistroResultSize(t.xshape, k, 'quant', v.bits),
        );
      }),
    );
  });

  it('encodes exactly to the documented bytes', () => {
    const t: DistroResult = {
      xshape: [2, 4],
      totalk: 4,
      indices: Uint8Array.from([0, 3, 2, 1]),
      values: {
        kind: 'quant',
        bits: 2,
        scales: Float32Array.of(0.5, 2, 0, 1e-30),
        codes: Uint8Array.of(0b0011_0110),
      },
    };
    expect(Array.from(encodeTrainingResult(withTensors(t)))).toEqual(
      Array.from(rawFrame([...head, 2, ...goodScales, ...goodCodes])),
    );
    expect(decodeBytes([...head, 2, ...goodScales, ...goodCodes])).toBe('no-error');
  });

  it('1-bit codes are laid out as the 1-bit signs', () => {
    const values = Float32Array.from({ length: 21 }, (_, i) => (i % 3 === 0 ? -1 : 1));
    const t: DistroResult = {
      xshape: [3, 7],
      totalk: 7,
      indices: Uint8Array.from({ length: 21 }, (_, i) => i % 7),
      values: {
        kind: 'quant',
        bits: 1,
        scales: Float32Array.of(1, 1, 1),
        codes: pack(
          Array.from(values, (v) => (v < 0 ? 1 : 0)),
          1,
        ),
      },
    };
    expect((t.values as QuantValues).codes).toEqual(packSigns(values).bits);
    expect(decodeTrainingResult(encodeTrainingResult(withTensors(t))).tensors[0]).toEqual(t);
  });

  it.each<[string, number[], string]>([
    ['bits 0', [...head, 0, ...goodScales, ...goodCodes], 'inconsistent'],
    ['bits 9', [...head, 9, ...goodScales, ...goodCodes], 'inconsistent'],
    ['bits 255', [...head, 255, ...goodScales, ...goodCodes], 'inconsistent'],
    ['negative scale', [...head, 2, ...f32le(-0.5), ...goodScales.slice(4), ...goodCodes], 'inconsistent'],
    ['−0 scale', [...head, 2, ...f32le(-0), ...goodScales.slice(4), ...goodCodes], 'inconsistent'],
    ['+Inf scale', [...head, 2, ...f32le(Infinity), ...goodScales.slice(4), ...goodCodes], 'inconsistent'],
    ['NaN scale', [...head, 2, 0, 0, 0xc0, 0x7f, ...goodScales.slice(4), ...goodCodes], 'inconsistent'],
    [
      'negative NaN scale',
      [...head, 2, 1, 0, 0xc0, 0xff, ...goodScales.slice(4), ...goodCodes],
      'inconsistent',
    ],
    // bits 3 → 8 codes × 3 bits = 24 bits: no padding; bits 3 needs 4 levels per chunk = 8 scales.
    ['scales short (bits 3 needs 8)', [...head, 3, ...goodScales, ...goodCodes], 'truncated'],
    ['no codes', [...head, 2, ...goodScales], 'truncated'],
    ['an extra code byte', [...head, 2, ...goodScales, ...goodCodes, 0], 'trailing_bytes'],
  ])('%s → %s', (_name, bytes, code) => {
    expect(decodeBytes(bytes)).toBe(code);
  });

  it('non-zero padding bits after the last code are rejected', () => {
    // bits 3 with k = 1: 2 codes × 3 bits = 6 bits in one byte; bits 6 and 7 are padding.
    const one = [2, 2, 4, 4, 1, 3, 2, VALUE_KIND_QUANT, 3, ...new Array<number>(8 * 4).fill(0)];
    expect(decodeBytes([...one, 0b0011_1111])).toBe('no-error');
    expect(decodeBytes([...one, 0b0111_1111])).toBe('inconsistent');
    expect(decodeBytes([...one, 0b1011_1111])).toBe('inconsistent');
  });

  it('the encoder refuses inconsistent in-memory quantised values', () => {
    const base = (over: Partial<QuantValues>): TrainingResult =>
      withTensors({
        xshape: [2, 4],
        totalk: 4,
        indices: Uint8Array.from([0, 3, 2, 1]),
        values: {
          kind: 'quant',
          bits: 2,
          scales: Float32Array.of(0.5, 2, 0, 1),
          codes: Uint8Array.of(0x36),
          ...over,
        },
      });
    expect(wireCode(() => encodeTrainingResult(base({})))).toBe('no-error');
    for (const over of [
      { bits: 0 },
      { bits: 9 },
      { bits: 1.5 },
      { scales: Float32Array.of(0.5, 2, 0) },
      { scales: Float32Array.of(0.5, 2, 0, 1, 1) },
      { scales: Float32Array.of(0.5, -2, 0, 1) },
      { scales: Float32Array.of(0.5, 2, -0, 1) },
      { scales: Float32Array.of(0.5, 2, NaN, 1) },
      { scales: Float32Array.of(0.5, 2, Infinity, 1) },
      { scales: [0.5, 2, 0, 1] as unknown as Float32Array },
      { codes: Uint8Array.of(0x36, 0) },
      { codes: new Uint8Array(0) },
      { bits: 3 }, // 8 × 3 bits = 3 bytes of codes and 8 scales needed
    ] as Partial<QuantValues>[])
      expect([over, wireCode(() => encodeTrainingResult(base(over)))]).toEqual([over, 'inconsistent']);
  });

  it('every truncation and every single bit flip is rejected or decodes canonically', () => {
    const [sample] = fc.sample(
      quantResultArb.filter((t) => (t.values as QuantValues).bits === 3 && t.indices.length >= 6),
      { numRuns: 1, seed: 99 },
    );
    const frame = encodeTrainingResult(withTensors(sample!));
    for (let n = 0; n < frame.length; n++)
      expect(wireCode(() => decodeTrainingResult(frame.subarray(0, n)))).toBe('truncated');
    let decoded = 0;
    for (let bit = 0; bit < frame.length * 8; bit++) {
      const flipped = frame.slice();
      flipped[bit >> 3]! ^= 1 << (bit & 7);
      let back: TrainingResult;
      try {
        back = decodeTrainingResult(flipped);
      } catch (e) {
        expect(e).toBeInstanceOf(WireError);
        continue;
      }
      decoded++;
      expect(encodeTrainingResult(back)).toEqual(flipped);
    }
    expect(decoded).toBeGreaterThan(0);
  });
});
