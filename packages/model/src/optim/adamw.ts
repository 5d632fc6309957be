// AdamW (Loshchilov & Hutter), with PyTorch's update order and bias correction, on Float32Array
// parameters: the single-process quality baseline that DisTrO runs are compared with. Moments are kept in
// float32 like torch.optim.AdamW; each element's update is computed in float64 and rounded once.
import type { Parameters } from '../checkpoint/checkpoint.ts';
import { DEFAULT_ADAMW_EPS } from '../defaults.ts';

export interface AdamWOptions {
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
  /**
   * Which tensors get weight decay. Default: matrices (embeddings and Linear weights) but not RMSNorm
   * gains: decaying a gain toward 0 shrinks activations instead of regularising.
   */
  decays?: (name: string, data: Float32Array) => boolean;
}

const isNormWeight = (name: string) => /(layernorm|norm)\.weight$/.test(name);

export class AdamW {
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  /** Number of steps taken (PyTorch's `state['step']`). */
  t = 0;
  private readonly m = new Map<string, Float32Array>();
  private readonly v = new Map<string, Float32Array>();
  private readonly decayed = new Set<string>();

  private readonly params: Parameters;

  constructor(params: Parameters, options: AdamWOptions = {}) {
    this.params = params;
    this.beta1 = options.beta1 ?? 0.9;
    this.beta2 = options.beta2 ?? 0.95;
    this.eps = options.eps ?? DEFAULT_ADAMW_EPS;
    this.weightDecay = options.weightDecay ?? 0.1;
    const decays = options.decays ?? ((name) => !isNormWeight(name));
    for (const [name, p] of params) {
      this.m.set(name, new Float32Array(p.length));
      this.v.set(name, new Float32Array(p.length));
      if (decays(name, p)) this.decayed.add(name);
    }
  }

  /** Whether `name` is weight-decayed. */
  decays(name: string): boolean {
    return this.decayed.has(name);
  }

  /** One update of every parameter in place from `grads` (same names and sizes). */
  step(grads: Map<string, Float32Array>, lr: number): void {
    this.t += 1;
    const { beta1: b1, beta2: b2, eps } = this;
    const bc1 = 1 - b1 ** this.t;
    const bc2Sqrt = Math.sqrt(1 - b2 ** this.t);
    const stepSize = lr / bc1;
    for (const [name, p] of this.params) {
      const g = grads.get(name);
      if (!g) throw new Error(`AdamW: no gradient for ${name}`);
      if (g.length !== p.length)
        throw new Error(`AdamW: gradient for ${name} has ${g.length} values, not ${p.length}`);
      const m = this.m.get(name) as Float32Array;
      const v = this.v.get(name) as Float32Array;
      const shrink = this.decayed.has(name) ? 1 - lr * this.weightDecay : 1;
      for (let i = 0; i < p.length; i++) {
        const gi = g[i] as number;
        const mi = (m[i] = b1 * (m[i] as number) + (1 - b1) * gi);
        const vi = (v[i] = b2 * (v[i] as number) + (1 - b2) * gi * gi);
        const denom = Math.sqrt(vi) / bc2Sqrt + eps;
        p[i] = (p[i] as number) * shrink - (stepSize * mi) / denom;
      }
    }
  }
}

/**
 * Scales all gradients in place so their global L2 norm is at most `maxNorm` (torch's
 * clip_grad_norm_); returns the norm before clipping.
 */
export function clipGradNorm(grads: Map<string, Float32Array>, maxNorm: number): number {
  let sq = 0;
  for (const g of grads.values())
    for (let i = 0; i < g.length; i++) sq += (g[i] as number) * (g[i] as number);
  const norm = Math.sqrt(sq);
  if (norm > maxNorm) {
    const scale = maxNorm / (norm + 1e-6);
    for (const g of grads.values()) for (let i = 0; i < g.length; i++) g[i] = (g[i] as number) * scale;
  }
  return norm;
}

export interface CosineSchedule {
  peak: number;
  warmupSteps: number;
  totalSteps: number;
  /** Final LR as a fraction of peak (the runs in docs/architecture.md "Measured defaults" used 0.1). */
  floor?: number;
}

/** Learning rate for 0-based `step`: linear warmup to `peak`, then cosine decay to floor·peak. */
export function cosineLr(step: number, s: CosineSchedule): number {
  const floor = (s.floor ?? 0.1) * s.peak;
  if (step < s.warmupSteps) return (s.peak * (step + 1)) / s.warmupSteps;
  const span = Math.max(1, s.totalSteps - s.warmupSteps);
  const progress = Math.min(1, (step - s.warmupSteps) / span);
  return floor + (s.peak - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
}
