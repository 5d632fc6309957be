// Integer DCT basis for the exact decode: Bq[k·N + n] = round(2^15 · F[n,k]), correctly rounded.
//
// Every replica must build the identical table, and Math.cos is not guaranteed to return the same last bits
// on every JS engine. So the table is computed in BigInt fixed point with 128 fractional bits: π from a
// 50-digit decimal constant, cos by its Taylor series, √(1/N) and √(2/N) by integer Newton iteration. The
// error of that computation is far below 2^-100, and rounding to 15 fractional bits is only ambiguous when
// the exact value lies within that error of a half-integer; `integerDctBasis` refuses such a case (the test
// checks it never happens for N ≤ 256: the exact values are irrational or integers, never half-integers).

export const BASIS_BITS = 15;

const FRAC = 128n;
const ONE = 1n << FRAC;
const PI_DIGITS = 314159265358979323846264338327950288419716939937510n; // π·10^50, truncated
const PI = (PI_DIGITS << FRAC) / 10n ** 50n;

function isqrt(x: bigint): bigint {
  if (x < 2n) return x;
  let r = 1n << BigInt((x.toString(2).length + 1) >> 1);
  for (;;) {
    const next = (r + x / r) >> 1n;
    if (next >= r) return r;
    r = next;
  }
}

/** cos(π·a/b) in 2^-128 fixed point, for integers a ≥ 0, b > 0. */
function cosPiFraction(a: number, b: number): bigint {
  const A = BigInt(a) % BigInt(2 * b); // period 2π
  const theta = (PI * A) / BigInt(b);
  const theta2 = (theta * theta) >> FRAC;
  let term = ONE;
  let sum = ONE;
  for (let j = 1n; j <= 60n; j++) {
    term = -(term * theta2) / (ONE * (2n * j - 1n) * (2n * j));
    if (term === 0n) break;
    sum += term;
  }
  return sum;
}

const cache = new Map<number, Int32Array>();

export function integerDctBasis(N: number): Int32Array {
  let t = cache.get(N);
  if (t) return t;
  t = new Int32Array(N * N);
  const c0 = isqrt((ONE * ONE) / BigInt(N)); // √(1/N) · 2^128
  const ck = isqrt((2n * ONE * ONE) / BigInt(N)); // √(2/N) · 2^128
  const drop = FRAC - BigInt(BASIS_BITS);
  const half = 1n << (drop - 1n);
  const guard = 1n << (drop - 40n);
  // cos(π(2n+1)k/(2N)) only depends on (2n+1)k mod 4N: 4N Taylor evaluations instead of N².
  const cosines: bigint[] = [];
  for (let j = 0; j < 4 * N; j++) cosines.push(cosPiFraction(j, 2 * N));
  for (let k = 0; k < N; k++) {
    for (let n = 0; n < N; n++) {
      const v = ((k === 0 ? c0 : ck) * (cosines[((2 * n + 1) * k) % (4 * N)] as bigint)) >> FRAC;
      const neg = v < 0n;
      const mag = neg ? -v : v;
      const rem = mag & ((1n << drop) - 1n);
      const diff = rem > half ? rem - half : half - rem;
      if (diff < guard) throw new Error(`integer DCT basis N=${N}: F[${n},${k}] too close to a rounding tie`);
      const q = Number((mag >> drop) + (rem > half ? 1n : 0n));
      t[k * N + n] = neg ? -q : q;
    }
  }
  cache.set(N, t);
  return t;
}
