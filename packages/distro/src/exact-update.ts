// The one float operation of the apply path: p ← RN_f32(p·f − l·s), rounded ONCE from the exact real value.
// f = fround(1 − fround(lr·wd)) and l = fround(lr) are computed on the host by `updateScalars`, s ∈ {−1,0,1}.
//
// The CPU computes it in float64: p·f and l·s are exact there (24-bit × 24-bit mantissas), their difference
// d = RN64(x − y) plus the exact error e of that subtraction (TwoSum, valid because JS float64 arithmetic is
// never contracted into FMA) pin down the exact value d + e. RN32(d + e) = RN32(d) except when d sits exactly
// on a float32 midpoint and e ≠ 0: then e decides the direction. The WGSL kernel computes the same value with
// integer arithmetic only (gpu/shaders.ts), a different method; the tests check both against BigInt.
// Special values: a non-finite p is left unchanged (bit for bit). Signed zeros follow IEEE for x − y.

export interface UpdateScalars {
  /** fround(1 − fround(lr·wd)), in [0, 1]. */
  readonly factor: number;
  /** fround(lr) ≥ 0. */
  readonly step: number;
}

export function updateScalars(lr: number, weightDecay = 0): UpdateScalars {
  if (!Number.isFinite(lr) || lr < 0) throw new RangeError(`lr must be a finite number ≥ 0, got ${lr}`);
  if (!Number.isFinite(weightDecay) || weightDecay < 0)
    throw new RangeError(`weight decay must be a finite number ≥ 0, got ${weightDecay}`);
  const decay = Math.fround(Math.fround(lr) * Math.fround(weightDecay));
  if (decay > 1)
    throw new RangeError(`lr·weight_decay = ${decay} > 1 would flip the sign of every parameter`);
  return { factor: Math.fround(1 - decay), step: Math.fround(lr) };
}

const f32 = new Float32Array(2);
const u32 = new Uint32Array(f32.buffer);

/** The float32 adjacent to finite `r` in the direction of `toward` (±Infinity beyond the largest finite). */
function adjacentF32(r: number, toward: number): number {
  f32[0] = r;
  const bits = u32[0] as number;
  if (r === 0) {
    u32[1] = 1; // smallest subnormal
    return toward > 0 ? (f32[1] as number) : -(f32[1] as number);
  }
  const away = toward > r === r > 0; // moving away from zero increases the magnitude bits
  u32[1] = away ? bits + 1 : bits - 1;
  return f32[1] as number;
}

/**
 * RN_f32(p·factor − step·s), rounded once from the exact value. `s` may be any float32 (the sign-SGD
 * apply passes −1, 0 or 1; SparseLoCo's outer step passes the aggregate): every product of two float32
 * is exact in float64, so the argument holds for any s.
 */
export function updateValue(p: number, factor: number, step: number, s: number): number {
  const x = p * factor;
  const y = step * s;
  const d = x - y;
  // TwoSum(x, −y): e is the exact rounding error of d.
  const b = -y;
  const bv = d - x;
  const e = x - (d - bv) + (b - bv);
  return roundToF32(d, e);
}

/**
 * RN_f32(d + e) for an exact value given as d = RN64(d + e) plus its error e (a TwoSum pair). Overflow
 * gives ±Infinity as RN does.
 */
export function roundToF32(d: number, e: number): number {
  const r = Math.fround(d);
  if (e === 0 || r === d) return r;
  // d is not a float32 (or rounded to ±Infinity): is it exactly a midpoint between two float32 neighbours?
  const lo = Number.isFinite(r) ? r : Math.sign(r) * 3.4028234663852886e38;
  const other = adjacentF32(lo, d);
  const otherAsReal = Number.isFinite(other) ? other : Math.sign(other) * 2 ** 128;
  if ((lo + otherAsReal) / 2 !== d) return r;
  const up = e > 0;
  const hi = Math.max(lo, other);
  const low = Math.min(lo, other);
  return up ? hi : low;
}

/** Applies the update to float32 bits in place; `signs[i]` ∈ {−1, 0, 1}. */
export function updateBits(bits: Uint32Array, index: number, u: UpdateScalars, s: number): void {
  const b = bits[index] as number;
  if ((b & 0x7f800000) === 0x7f800000) return; // Inf/NaN stay as they are
  u32[0] = b;
  f32[0] = updateValue(f32[0] as number, u.factor, u.step, s);
  bits[index] = u32[0] as number;
}
