// One round's apply, shared by every backend: aggregate in exact integers (on the host, or on the device by a
// backend that can), then each backend decodes and updates. Results come peer-major, as Psyche's
// Vec<Vec<DistroResult>>: results[peer][tensor], tensors in the parameter order (ascending byte-lexicographic
// names).
import { aggregateTensor, checkAggregateInputs } from './aggregate.ts';
import type { DistroBackend, DistroTensor } from './backend.ts';
import { updateScalars } from './exact-update.ts';
import { DistroShapeError, tensorLayout } from './layout.ts';
import type { TensorResult } from './result.ts';

export interface ApplyOptions {
  lr: number;
  weightDecay?: number;
}

/**
 * p ← p·(1 − lr·wd) − lr·sign(IDCT(mean over peers)) for every tensor. With no results nothing changes
 * (Psyche skips the step, weight decay included).
 */
export function applyResults(
  backend: DistroBackend,
  params: readonly DistroTensor[],
  results: readonly (readonly TensorResult[])[],
  options: ApplyOptions,
): void {
  const u = updateScalars(options.lr, options.weightDecay ?? 0);
  if (results.length === 0) return;
  for (const [peer, r] of results.entries())
    if (r.length !== params.length)
      throw new DistroShapeError(`peer ${peer}: ${r.length} tensor results for ${params.length} parameters`);
  params.forEach((p, i) => {
    const layout = tensorLayout(p.shape, backend.chunk);
    const rs = results.map((r) => r[i] as TensorResult);
    checkAggregateInputs(layout, rs);
    // A backend that aggregates results itself (on the GPU) saves the host's pass over every entry.
    if (backend.applyResults?.(p, rs, u)) return;
    backend.applyAggregated(p, aggregateTensor(layout, rs), u);
  });
}
