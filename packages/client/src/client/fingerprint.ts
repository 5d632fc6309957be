// Gradient fingerprints (docs/protocol.md "Verification of work"): the trainer's gradient at positions core
// derives from the round seed and the result's slot, read from wherever the gradient lives (host or GPU) with
// the DisTrO backend's gather — a few thousand values, never the whole gradient.
import { fingerprintPositions } from '@meshtrain/core';
import type { DistroBackend, DistroTensor } from '@meshtrain/distro';

/**
 * The gradient values at the result's fingerprint positions, in position order. `grads` are the parameters'
 * gradients in variable order (the replica's order), so a global position is an offset into them laid end to
 * end.
 */
export async function fingerprintValues(
  d: DistroBackend,
  grads: readonly DistroTensor[],
  roundSeed: string,
  slot: number,
): Promise<Float32Array> {
  const total = grads.reduce((n, g) => n + g.size, 0);
  const positions = fingerprintPositions(roundSeed, slot, total);
  const starts: number[] = [];
  let acc = 0;
  for (const g of grads) {
    starts.push(acc);
    acc += g.size;
  }
  // Group the positions by tensor (one gather each), then put the values back in position order.
  const byTensor = grads.map(() => ({ at: [] as number[], offsets: [] as number[] }));
  positions.forEach((p, i) => {
    let t = 0;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((starts[mid] as number) <= p) {
        t = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    byTensor[t]!.at.push(i);
    byTensor[t]!.offsets.push(p - (starts[t] as number));
  });
  const out = new Float32Array(positions.length);
  for (let t = 0; t < grads.length; t++) {
    const { at, offsets } = byTensor[t]!;
    if (at.length === 0) continue;
    const values = await d.gather(grads[t] as DistroTensor, Uint32Array.from(offsets));
    at.forEach((i, j) => (out[i] = values[j] as number));
  }
  return out;
}
