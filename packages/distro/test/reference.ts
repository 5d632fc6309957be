// Independent float64 references for the tests: the DCT straight from the cosine formula (no basis tables,
// no separable passes), and a BigInt-exact correctly rounded float32 update.

export function cosineDct(N: number, k: number, n: number): number {
  const c = k === 0 ? Math.sqrt(1 / N) : Math.sqrt(2 / N);
  return c * Math.cos((Math.PI * (2 * n + 1) * k) / (2 * N));
}

/** 2-D DCT of one n1×n2 block given as rows, by the double sum. */
export function dct2d(block: number[][]): number[][] {
  const n1 = block.length;
  const n2 = block[0]!.length;
  const out: number[][] = [];
  for (let b = 0; b < n1; b++) {
    const row: number[] = [];
    for (let d = 0; d < n2; d++) {
      let s = 0;
      for (let h = 0; h < n1; h++)
        for (let w = 0; w < n2; w++) s += block[h]![w]! * cosineDct(n1, b, h) * cosineDct(n2, d, w);
      row.push(s);
    }
    out.push(row);
  }
  return out;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0] as number;
}
export function fromBits(b: number): number {
  u32[0] = b;
  return f32[0] as number;
}

/** A finite float32 as an exact rational m·2^e (BigInt m). */
function exact(x: number): { m: bigint; e: number } {
  const b = bitsOf(x);
  const exp = (b >>> 23) & 0xff;
  let m = BigInt(b & 0x7fffff);
  let e = -149;
  if (exp !== 0) {
    m += 1n << 23n;
    e = exp - 150;
  }
  return { m: b >>> 31 ? -m : m, e };
}

/** RN_f32(p·f − l·s) from exact BigInt arithmetic (zero results: signed as IEEE x − y gives). */
export function exactUpdateReference(p: number, f: number, l: number, s: number): number {
  const P = exact(p);
  const F = exact(f);
  const L = exact(l);
  const x = { m: P.m * F.m, e: P.e + F.e };
  const y = { m: L.m * BigInt(s), e: L.e };
  const e = Math.min(x.e, y.e);
  const v = (x.m << BigInt(x.e - e)) - (y.m << BigInt(y.e - e)); // value = v·2^e
  if (v === 0n) {
    const xv = p * f;
    const yv = l * s;
    return xv - yv; // signed-zero rule of IEEE subtraction; both operands are exact zeros or cancel
  }
  const neg = v < 0n;
  let mag = neg ? -v : v;
  let exp = e;
  // Normalise to a 24-bit mantissa (or the subnormal grid 2^-149), rounding half to even.
  const top = mag.toString(2).length - 1 + exp;
  const lsb = Math.max(top - 23, -149);
  if (lsb > exp) {
    const sh = BigInt(lsb - exp);
    const q = mag >> sh;
    const rem = mag - (q << sh);
    const half = 1n << (sh - 1n);
    mag = rem > half || (rem === half && (q & 1n) === 1n) ? q + 1n : q;
    exp = lsb;
  }
  const r = Number(mag) * 2 ** exp;
  const out = Math.fround(r); // exact: mag·2^exp is representable (or overflows to ∞ as RN would)
  return neg ? -out : out;
}
