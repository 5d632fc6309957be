// Orthonormal DCT-II basis (docs/protocol.md "DCT blocks and xshape"):
// F[n,k] = c_k·cos(π(2n+1)k/(2N)), c_0 = 1/√N, c_k = √(2/N).
// The forward transform of x is X[k] = Σ_n x[n]·F[n,k]; the inverse is x[n] = Σ_k X[k]·F[n,k] (F is orthogonal).
//
// These float tables feed compression and the residual, where last-bit differences between engines are
// allowed (docs/architecture.md "Numerics contract": each client's own compression may differ). The apply
// path never uses them: it uses the integer table of int-basis.ts, built without Math.cos.

const cache64 = new Map<number, Float64Array>();
const cache32 = new Map<number, Float32Array>();

/** Basis functions by row: `table[k·N + n] = F[n,k]`, float64. */
export function dctBasis64(N: number): Float64Array {
  let t = cache64.get(N);
  if (!t) {
    t = new Float64Array(N * N);
    for (let k = 0; k < N; k++) {
      const c = k === 0 ? Math.sqrt(1 / N) : Math.sqrt(2 / N);
      for (let n = 0; n < N; n++) t[k * N + n] = c * Math.cos((Math.PI * (2 * n + 1) * k) / (2 * N));
    }
    cache64.set(N, t);
  }
  return t;
}

/** The same table rounded to float32 (what the WGSL kernels multiply with). */
export function dctBasis32(N: number): Float32Array {
  let t = cache32.get(N);
  if (!t) {
    t = Float32Array.from(dctBasis64(N));
    cache32.set(N, t);
  }
  return t;
}
