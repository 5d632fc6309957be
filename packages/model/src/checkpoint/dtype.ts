// Element types a safetensors file may hold, and their conversion to float32 (the only precision we
// train in). Pure arithmetic on bit patterns, so the result is the same on every JS engine.

export type FloatDType = 'F32' | 'F64' | 'BF16' | 'F16';

export const DTYPE_BYTES: Record<FloatDType, number> = { F32: 4, F64: 8, BF16: 2, F16: 2 };

export function isFloatDType(s: string): s is FloatDType {
  return s === 'F32' || s === 'F64' || s === 'BF16' || s === 'F16';
}

/** bfloat16 is the top half of a float32, so widening is a 16-bit shift: exact. */
export function bf16ToF32(src: Uint16Array): Float32Array {
  const out = new Uint32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = (src[i] as number) << 16;
  return new Float32Array(out.buffer);
}

/** IEEE half → float32, exact for every input (subnormals, infinities and NaN payloads included). */
export function f16ToF32(src: Uint16Array): Float32Array {
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) {
    const h = src[i] as number;
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    if (exp === 0) out[i] = sign * frac * 2 ** -24;
    else if (exp === 0x1f) out[i] = frac ? NaN : sign * Infinity;
    else out[i] = sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  return out;
}

/** float32 → bfloat16 with round-to-nearest-even (PyTorch's rounding); NaN stays a quiet NaN. */
export function f32ToBf16(src: Float32Array): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) {
    const b = bits[i] as number;
    if ((b & 0x7fffffff) > 0x7f800000) {
      out[i] = (b >>> 16) | 0x40;
      continue;
    }
    const rounded = b + 0x7fff + ((b >>> 16) & 1);
    out[i] = (rounded >>> 16) & 0xffff;
  }
  return out;
}
