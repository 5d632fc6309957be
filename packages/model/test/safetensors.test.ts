import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  SafetensorsError,
  bf16ToF32,
  decodeSafetensors,
  encodeSafetensors,
  f16ToF32,
  f32ToBf16,
  tensorToFloat32,
  type TensorToEncode,
} from '../src/checkpoint/index.ts';

/** Builds a safetensors file from a header object and raw data, bypassing our encoder. */
function rawFile(header: unknown, data: Uint8Array, pad = true): Uint8Array {
  let json = new TextEncoder().encode(JSON.stringify(header));
  if (pad && json.length % 8) {
    const p = new Uint8Array(Math.ceil(json.length / 8) * 8).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setUint32(0, json.length, true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SafetensorsError);
    return (err as SafetensorsError).code;
  }
  throw new Error('expected a SafetensorsError');
}

const bytesOf = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

describe('safetensors encode/decode', () => {
  it('keeps a tensor named __proto__ (found by the property test below)', () => {
    const tensors = Object.create(null) as Record<string, TensorToEncode>;
    tensors['__proto__'] = { shape: [1], data: Float32Array.of(1.5) };
    tensors['w'] = { shape: [2], data: Float32Array.of(2, 3) };
    const decoded = decodeSafetensors(encodeSafetensors(tensors));
    expect([...decoded.tensors.keys()].sort()).toEqual(['__proto__', 'w']);
  });

  it('round-trips random float32 tensors bit-exactly, NaN payloads included', () => {
    const tensor = fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 0, maxLength: 3 }).chain((shape) =>
      fc
        .array(fc.integer({ min: 0, max: 0xffffffff }), {
          minLength: shape.reduce((a, b) => a * b, 1),
          maxLength: shape.reduce((a, b) => a * b, 1),
        })
        .map((bits) => ({ shape, data: new Float32Array(Uint32Array.from(bits).buffer) })),
    );
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string({ minLength: 1, maxLength: 12 }).filter((s) => s !== '__metadata__'),
          tensor,
          {
            maxKeys: 6,
          },
        ),
        fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
        (tensors, metadata) => {
          const file = encodeSafetensors(tensors as Record<string, TensorToEncode>, metadata);
          const headerLen = new DataView(file.buffer).getUint32(0, true);
          expect(headerLen % 8).toBe(0);
          const decoded = decodeSafetensors(file);
          expect(decoded.metadata).toEqual(Object.keys(metadata).length ? metadata : {});
          expect([...decoded.tensors.keys()].sort()).toEqual(Object.keys(tensors).sort());
          for (const [name, t] of Object.entries(tensors)) {
            const got = decoded.tensors.get(name)!;
            expect(got.dtype).toBe('F32');
            expect(got.shape).toEqual(t.shape);
            expect(got.bytes).toEqual(bytesOf(t.data));
            expect(bytesOf(tensorToFloat32(name, got))).toEqual(bytesOf(t.data));
          }
          // Encoding is a function of the tensors: same input, same bytes.
          expect(encodeSafetensors(tensors as Record<string, TensorToEncode>, metadata)).toEqual(file);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('writes BF16 rounded to nearest-even and reads it back widened', () => {
    // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to the even one (1.0);
    // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): it goes up.
    const data = new Float32Array([1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.5, 1 + 2 ** -7]);
    expect([...f32ToBf16(data)]).toEqual([0x3f80, 0x3f80, 0x3f82, 0xc020, 0x3f81]);
    const file = encodeSafetensors({ w: { shape: [5], data, dtype: 'BF16' } });
    const t = decodeSafetensors(file).tensors.get('w')!;
    expect(t.dtype).toBe('BF16');
    expect([...tensorToFloat32('w', t)]).toEqual([1, 1, 1 + 2 ** -6, -2.5, 1 + 2 ** -7]);
  });

  it('widens F16 and F64 exactly', () => {
    const h = new Uint16Array([0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0xfc00, 0x8000, 0x3555]);
    const f = f16ToF32(h);
    expect([...f.slice(0, 7)]).toEqual([1, -2, 65504, 2 ** -24, Infinity, -Infinity, -0]);
    expect(f[7]).toBe(Math.fround(0.333251953125));
    expect(Number.isNaN(f16ToF32(new Uint16Array([0x7e00]))[0])).toBe(true);
    expect([...bf16ToF32(new Uint16Array([0x4049]))]).toEqual([3.140625]);
    const f64 = new Float64Array([0.1, -3]);
    const file = rawFile(
      { x: { dtype: 'F64', shape: [2], data_offsets: [0, 16] } },
      new Uint8Array(f64.buffer),
    );
    expect([...tensorToFloat32('x', decodeSafetensors(file).tensors.get('x')!)]).toEqual([
      Math.fround(0.1),
      -3,
    ]);
  });

  it('accepts unpadded headers and unaligned tensor offsets', () => {
    const a = new Uint16Array([0x3f80, 0x4000, 0x4040]); // bf16 1, 2, 3: 6 bytes, so the F32 after it is unaligned
    const b = new Float32Array([7.5]);
    const data = new Uint8Array(10);
    data.set(new Uint8Array(a.buffer), 0);
    data.set(bytesOf(b), 6);
    const file = rawFile(
      {
        b: { dtype: 'F32', shape: [1], data_offsets: [6, 10] },
        a: { dtype: 'BF16', shape: [3], data_offsets: [0, 6] },
      },
      data,
      false,
    );
    const d = decodeSafetensors(file);
    expect([...d.tensors.keys()]).toEqual(['a', 'b']);
    expect([...tensorToFloat32('a', d.tensors.get('a')!)]).toEqual([1, 2, 3]);
    expect([...tensorToFloat32('b', d.tensors.get('b')!)]).toEqual([7.5]);
  });

  it('decodes from a Node Buffer inside a larger ArrayBuffer (slice() there is a view, not a copy)', () => {
    const file = encodeSafetensors({
      a: { shape: [2], data: new Float32Array([1, 2]) },
      b: { shape: [3], data: new Float32Array([3, 4, 5]) },
    });
    const big = Buffer.alloc(file.length + 12);
    big.set(file, 4);
    const d = decodeSafetensors(big.subarray(4, 4 + file.length));
    expect([...tensorToFloat32('a', d.tensors.get('a')!)]).toEqual([1, 2]);
    expect([...tensorToFloat32('b', d.tensors.get('b')!)]).toEqual([3, 4, 5]);
  });

  it('rejects every truncation of a valid file', () => {
    const file = encodeSafetensors(
      { a: { shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) } },
      { format: 'pt' },
    );
    for (let cut = 0; cut < file.length; cut++)
      expect(code(() => decodeSafetensors(file.subarray(0, cut)))).toBe('truncated');
  });

  it('rejects corrupt headers with the rule they break', () => {
    const four = new Uint8Array(4);
    expect(code(() => decodeSafetensors(rawFile('not an object', four)))).toBe('header-schema');
    const bad = rawFile({}, four);
    bad.set(new TextEncoder().encode('{"a":'), 8);
    expect(code(() => decodeSafetensors(bad))).toBe('header-json');
    const f32 = (offsets: unknown, shape: unknown = [1], dtype: unknown = 'F32') => ({
      dtype,
      shape,
      data_offsets: offsets,
    });
    expect(code(() => decodeSafetensors(rawFile({ a: f32([0, 4], [2]) }, four)))).toBe('size-mismatch');
    expect(code(() => decodeSafetensors(rawFile({ a: f32([0, 4], [1], 'Q7') }, four)))).toBe(
      'unsupported-dtype',
    );
    expect(code(() => decodeSafetensors(rawFile({ a: f32([0, 4], [-1]) }, four)))).toBe('header-schema');
    expect(code(() => decodeSafetensors(rawFile({ a: f32([4]) }, four)))).toBe('header-schema');
    expect(code(() => decodeSafetensors(rawFile({ a: f32([4, 0]) }, four)))).toBe('offsets');
    // Overlap, hole, and bytes the header does not describe.
    const eight = new Uint8Array(8);
    expect(code(() => decodeSafetensors(rawFile({ a: f32([0, 4]), b: f32([0, 4]) }, eight)))).toBe('offsets');
    expect(code(() => decodeSafetensors(rawFile({ a: f32([4, 8]) }, eight)))).toBe('offsets');
    expect(code(() => decodeSafetensors(rawFile({ a: f32([0, 4]) }, eight)))).toBe('offsets');
    expect(code(() => decodeSafetensors(rawFile({ a: f32([0, 8], [2]) }, four)))).toBe('truncated');
    expect(code(() => decodeSafetensors(rawFile({ __metadata__: { a: 1 } }, new Uint8Array(0))))).toBe(
      'header-schema',
    );
    const huge = new Uint8Array(16);
    new DataView(huge.buffer).setUint32(4, 1, true); // header length 2^32
    expect(code(() => decodeSafetensors(huge))).toBe('header-schema');
    const ints = rawFile({ i: { dtype: 'I32', shape: [1], data_offsets: [0, 4] } }, four);
    expect(code(() => tensorToFloat32('i', decodeSafetensors(ints).tensors.get('i')!))).toBe(
      'unsupported-dtype',
    );
  });

  it('refuses to encode data that does not match its shape', () => {
    expect(code(() => encodeSafetensors({ a: { shape: [3], data: new Float32Array(2) } }))).toBe(
      'size-mismatch',
    );
  });
});
