// The inner optimiser of SparseLoCo: AdamW with decoupled weight decay, the update torch.optim.AdamW makes
// (single-tensor path, amsgrad off), step by step on float32 state:
//   p ← p·(1 − lr·wd)
//   m ← m + (1 − β1)·(g − m)                    (torch's lerp)
//   v ← β2·v + (1 − β2)·g·g
//   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + ε)
// The host folds the step-dependent scalars once per step (float64, then float32), the backends do the
// elementwise part. The inner steps are local to one peer, so this need not be bit-identical across devices
// (a GPU may fuse multiply-adds); the tests hold both backends to a float64 reference.

import { DEFAULT_ADAMW_EPS } from '@meshtrain/model';

export interface InnerAdamWOptions {
  lr: number;
  /** Default 0.9. */
  beta1?: number;
  /** Default 0.999. */
  beta2?: number;
  /** Default 1e-8. */
  eps?: number;
  /** Decoupled weight decay; default 0.01 (torch.optim.AdamW's). */
  weightDecay?: number;
}

/** Float32 scalars of one AdamW step, as the kernels read them. */
export interface AdamWScalars {
  /** fround(1 − lr·wd). */
  readonly decay: number;
  /** fround(1 − β1): the lerp weight of the first moment. */
  readonly gradWeight: number;
  /** fround(β2). */
  readonly beta2: number;
  /** fround(1 − β2). */
  readonly sqWeight: number;
  /** fround(lr / (1 − β1^t)). */
  readonly stepSize: number;
  /** fround(√(1 − β2^t)). */
  readonly bc2Sqrt: number;
  /** fround(ε). */
  readonly eps: number;
}

function check(name: string, v: number, lo: number, hi: number, loOpen = false, hiOpen = false): void {
  if (!Number.isFinite(v) || (loOpen ? v <= lo : v < lo) || (hiOpen ? v >= hi : v > hi))
    throw new RangeError(
      `${name} must be in ${loOpen ? '(' : '['}${lo}, ${hi}${hiOpen ? ')' : ']'}, got ${v}`,
    );
}

/** The scalars of step `step` (1 for the first step after creating the state). */
export function adamwScalars(o: InnerAdamWOptions, step: number): AdamWScalars {
  const beta1 = o.beta1 ?? 0.9;
  const beta2 = o.beta2 ?? 0.999;
  const eps = o.eps ?? DEFAULT_ADAMW_EPS;
  const wd = o.weightDecay ?? 0.01;
  check('lr', o.lr, 0, 3.4e38);
  check('beta1', beta1, 0, 1, false, true);
  check('beta2', beta2, 0, 1, false, true);
  check('eps', eps, 0, 3.4e38, true);
  check('weight decay', wd, 0, 3.4e38);
  if (!Number.isSafeInteger(step) || step < 1)
    throw new RangeError(`step must be an integer ≥ 1, got ${step}`);
  const decay = 1 - o.lr * wd;
  if (decay < 0) throw new RangeError(`lr·weight_decay = ${o.lr * wd} > 1 would flip every parameter's sign`);
  return {
    decay: Math.fround(decay),
    gradWeight: Math.fround(1 - beta1),
    beta2: Math.fround(beta2),
    sqWeight: Math.fround(1 - beta2),
    stepSize: Math.fround(o.lr / (1 - beta1 ** step)),
    bc2Sqrt: Math.fround(Math.sqrt(1 - beta2 ** step)),
    eps: Math.fround(eps),
  };
}
