// What one backend operation hands the GPU: its dispatches recorded into one compute pass and submitted once,
// so an operation costs one submit whatever the number of segments it covers. context.ts implements it; the
// operation modules record into it.

export interface GpuOp {
  /** Records a dispatch of `code`; `words` (u32) are its uniform, bound at 0, `bindings` at 1, 2, … */
  add(code: string, words: number[], bindings: GPUBindingResource[], groups: { x: number; y: number }): void;
  /** Submits everything recorded, then `after(encoder)`'s commands, in one command buffer. */
  submit(after?: (enc: GPUCommandEncoder) => void): void;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The float32 bit pattern of x, for uniform words. */
export function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0] as number;
}
