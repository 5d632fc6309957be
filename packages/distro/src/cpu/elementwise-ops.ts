// DisTrO's per-element float kernels on the CPU reference backend, each step rounded to float32 as the WGSL
// kernels round it.

/** delta ← decay·delta + lr·grad (two separately rounded float32 steps). */
export function momentum(d: Float32Array, g: Float32Array, decay: number, lr: number): void {
  const fd = Math.fround(decay);
  const fl = Math.fround(lr);
  for (let i = 0; i < d.length; i++) {
    const kept = fd === 1 ? (d[i] as number) : Math.fround(fd * (d[i] as number));
    d[i] = kept + Math.fround(fl * (g[i] as number));
  }
}

export function scale(d: Float32Array, factor: number): void {
  const f = Math.fround(factor);
  for (let i = 0; i < d.length; i++) d[i] = f * (d[i] as number);
}

/** out ← params − lr·sign(delta). */
export function signStep(o: Float32Array, p: Float32Array, d: Float32Array, lr: number): void {
  const fl = Math.fround(lr);
  for (let i = 0; i < o.length; i++) o[i] = (p[i] as number) - fl * Math.sign(d[i] as number);
}
