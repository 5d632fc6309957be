// Per-chunk top-k selection, defined so that the CPU and the WGSL kernel pick the same set: the k largest
// magnitudes, ties broken by the lower index, compared as float32 magnitude bits (monotonic for |x|), and
// reported in ascending index order. Psyche leaves the order and tie-breaking to torch (docs/protocol.md
// "Top-k and 1-bit signs"); any order is valid on the wire, and a fixed rule makes backends comparable.

/** Writes the selected positions of `mags` (float32 magnitude bits) into `out[0..k)`, ascending. */
export function selectTopK(mags: Uint32Array, k: number, out: Uint32Array): void {
  const n = mags.length;
  if (k >= n) {
    for (let i = 0; i < n; i++) out[i] = i;
    return;
  }
  // Keep the best k seen so far sorted by (magnitude desc, index asc); an element enters only if it beats
  // the current last one. Scanning indices in ascending order means an equal magnitude never beats an
  // earlier index, which is the tie rule.
  const bestIdx = new Uint32Array(k);
  const bestMag = new Uint32Array(k);
  let filled = 0;
  for (let i = 0; i < n; i++) {
    const m = mags[i] as number;
    if (filled === k && m <= (bestMag[k - 1] as number)) continue;
    let j = filled < k ? filled++ : k - 1;
    while (j > 0 && (bestMag[j - 1] as number) < m) {
      bestMag[j] = bestMag[j - 1] as number;
      bestIdx[j] = bestIdx[j - 1] as number;
      j--;
    }
    bestMag[j] = m;
    bestIdx[j] = i;
  }
  bestIdx.sort();
  out.set(bestIdx);
}
