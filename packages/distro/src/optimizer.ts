// One trainer's side of a DisTrO step (docs/protocol.md "Training step"), composed from backend operations,
// with Psyche's quirks fixed on purpose: delta starts at zero (callers create it with backend.tensor(shape));
// state is float32; the lookahead goes to a scratch copy (so nothing has to be undone, not even after a
// cancelled step); gradients are clipped by their global norm before the momentum update. Weight decay is not
// applied here: apply (apply.ts) does p·(1 − lr·wd) on every replica alike.
import type { DistroBackend, DistroTensor } from './backend.ts';
import { clipByGlobalNorm } from './clip.ts';
import { quantize1bit, type TensorResult } from './result.ts';

export interface DistroStepOptions {
  /** This step's learning rate. */
  lr: number;
  /** Psyche's compression_decay (β of the momentum). */
  decay: number;
  topk: number;
  quantize1bit: boolean;
  /** Clip gradients to this global L2 norm (Psyche's clip_grad_norm); off when absent or ≤ 0. */
  clipGradNorm?: number;
}

/** Psyche's lookahead, written to `scratch`: scratch ← params − prevLr·sign(delta). The forward pass reads it. */
export function lookahead(
  be: DistroBackend,
  scratch: readonly DistroTensor[],
  params: readonly DistroTensor[],
  delta: readonly DistroTensor[],
  prevLr: number,
): void {
  params.forEach((p, i) => be.signStep(scratch[i]!, p, delta[i]!, prevLr));
}

/**
 * Clip, subtract the previous own result (residual, one step late as in Psyche), momentum, compress. Returns
 * what to send (1-bit when asked) and the unquantised results to pass as `ownPrevious` next step.
 */
export async function distroStep(
  be: DistroBackend,
  delta: readonly DistroTensor[],
  grads: readonly DistroTensor[],
  ownPrevious: readonly TensorResult[] | undefined,
  o: DistroStepOptions,
): Promise<{ send: TensorResult[]; own: TensorResult[]; gradNorm: number }> {
  const gradNorm = await clipByGlobalNorm(be, grads, o.clipGradNorm);
  const own: TensorResult[] = [];
  for (const [i, d] of delta.entries()) {
    if (ownPrevious) be.subtractResidual(d, ownPrevious[i]!);
    be.momentum(d, grads[i]!, o.decay, o.lr);
    own.push(await be.compress(d, o.topk));
  }
  return { send: o.quantize1bit ? own.map(quantize1bit) : own, own, gradNorm };
}
