// Global sample indices grow without bound (every step takes the next global batch), while a split has `n`
// samples: index i is sample i mod n, so a run longer than its dataset goes over it again instead of failing.
// The relay's data source folds this way; the tab folds before its data cache too, so a later pass over the
// split hits the blocks the first pass stored instead of keying the same samples anew.
import type { DataSource } from './interfaces.ts';

/** `inner` asked only for ranges inside [0, n), each at most `maxPerRequest` samples long. */
export function foldedDataSource(
  inner: DataSource,
  samplesInSplit: () => Promise<number>,
  maxPerRequest = Infinity,
): DataSource {
  let n: Promise<number> | null = null;
  return {
    async samples(start: number, end: number): Promise<Int32Array> {
      n ??= samplesInSplit().then(
        (v) => {
          if (!(Number.isInteger(v) && v > 0)) throw new Error(`the split has ${v} samples`);
          return v;
        },
        (e: unknown) => {
          n = null;
          throw e;
        },
      );
      const size = await n;
      const parts: Int32Array[] = [];
      for (let id = start; id <= end;) {
        const s = id % size;
        const len = Math.min(end - id + 1, size - s, maxPerRequest);
        parts.push(await inner.samples(s, s + len - 1));
        id += len;
      }
      if (parts.length === 1) return parts[0] as Int32Array;
      const out = new Int32Array(parts.reduce((a, p) => a + p.length, 0));
      let o = 0;
      for (const p of parts) {
        out.set(p, o);
        o += p.length;
      }
      return out;
    },
  };
}
