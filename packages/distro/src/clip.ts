// Clipping by global norm (Psyche's clip_grad_norm), shared by DisTrO's step, SparseLoCo's inner AdamW, the
// client's trainer and node-trainer's resident AdamW: one readback for the norm of every gradient.
import type { DistroBackend, DistroTensor } from './backend.ts';

/** Added to the norm in the scale factor, as torch.nn.utils.clip_grad_norm_ does. */
export const CLIP_EPSILON = 1e-6;

/**
 * The global L2 norm of `grads` (their sums of squares added in order, in float64). When `clip` > 0 and the
 * norm is above it, every gradient is first scaled by clip / (norm + CLIP_EPSILON). Returns the norm before
 * clipping.
 */
export async function clipByGlobalNorm(
  be: DistroBackend,
  grads: readonly DistroTensor[],
  clip: number | undefined,
): Promise<number> {
  let sq = 0;
  for (const s of await be.sumsOfSquares(grads)) sq += s;
  const norm = Math.sqrt(sq);
  if (clip !== undefined && clip > 0 && norm > clip)
    for (const g of grads) be.scale(g, clip / (norm + CLIP_EPSILON));
  return norm;
}
