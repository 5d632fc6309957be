// Test helpers: a seeded PRNG, ONNX Runtime sessions on the CPU / WebGPU EPs, and error metrics.
import * as ort from 'onnxruntime-node';
import { type Device, configureWebgpu, createSession } from '../../../apps/node-trainer/src/ort/session.ts';
import { type LlamaConfig, parameterSpecs } from '../src/config.ts';
import type { FloatDType } from '../src/graph/ir.ts';

/** mulberry32: tiny, seeded, good enough to draw test weights reproducibly. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal draws (Box–Muller) from a seeded uniform source. */
export function normal(rand: () => number): () => number {
  return () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

export function randomArray(n: number, rand: () => number, scale = 1, offset = 0): Float64Array {
  const g = normal(rand);
  return Float64Array.from({ length: n }, () => offset + scale * g());
}

/** True when a Vulkan ICD for Dawn is configured or the Chromium SwiftShader one can be used. */
export function webgpuAvailable(): boolean {
  return configureWebgpu().icd !== null;
}

export type { Device };

/**
 * A session on one EP through the node-trainer's session helper (`dtype` is the graph's float type). WebGPU
 * sessions disable the CPU fallback, so creation fails if any node would be placed on the CPU.
 */
export function session(
  onnx: Uint8Array,
  device: Device,
  dtype: FloatDType = 'float32',
): Promise<ort.InferenceSession> {
  return createSession(onnx, { device, dtype });
}

export function tensor(dtype: FloatDType, data: Float64Array, shape: readonly number[]): ort.Tensor {
  return new ort.Tensor(dtype, dtype === 'float64' ? Float64Array.from(data) : Float32Array.from(data), [
    ...shape,
  ]);
}

export function int32Tensor(data: ArrayLike<number>, shape: readonly number[]): ort.Tensor {
  return new ort.Tensor('int32', Int32Array.from(data), [...shape]);
}

export function toF64(t: ort.Tensor | undefined): Float64Array {
  if (!t) throw new Error('missing output');
  return Float64Array.from(t.data as Float32Array | Float64Array);
}

/** ‖a − b‖₂ / ‖b‖₂ */
export function relL2(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < b.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    num += d * d;
    den += (b[i] ?? 0) ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-300);
}

/**
 * Seeded weights at a scale where every nonlinearity matters (unlike HF's 0.02 init, under which the model is
 * nearly linear and a wrong second-order term could hide): Linear W ~ N(0, 1/in), norms 1 + N(0, 0.1²),
 * embeddings N(0, 0.5²).
 */
export function randomParams(c: LlamaConfig, seed: number): Map<string, Float64Array> {
  const rand = rng(seed);
  const params = new Map<string, Float64Array>();
  for (const p of parameterSpecs(c)) {
    const n = p.shape.reduce((a, d) => a * d, 1);
    if (p.shape.length === 1) params.set(p.name, randomArray(n, rand, 0.1, 1));
    else if (p.name.includes('embed_tokens') || p.name.startsWith('lm_head'))
      params.set(p.name, randomArray(n, rand, 0.5));
    else params.set(p.name, randomArray(n, rand, 1 / Math.sqrt(p.shape[1] ?? 1)));
  }
  return params;
}

export function randomTokens(c: LlamaConfig, batch: number, len: number, seed: number): number[][] {
  const rand = rng(seed);
  return Array.from({ length: batch }, () =>
    Array.from({ length: len }, () => Math.floor(rand() * c.vocab_size)),
  );
}

/** Feeds for a train-step / inference graph: every parameter (in the graph dtype) plus int32 tokens. */
export function feeds(
  c: LlamaConfig,
  params: Map<string, Float64Array>,
  tokens: number[][],
  dtype: FloatDType,
): Record<string, ort.Tensor> {
  const out: Record<string, ort.Tensor> = {};
  for (const p of parameterSpecs(c))
    out[p.name] = tensor(dtype, params.get(p.name) ?? new Float64Array(0), p.shape);
  out.tokens = int32Tensor(tokens.flat(), [tokens.length, tokens[0]?.length ?? 0]);
  return out;
}
