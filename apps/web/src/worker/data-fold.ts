// Global sample indices grow without bound (every step takes the next global batch), while the relay's split has
// `n` samples and serves index i as sample i mod n. Folding requests into [0, n) before the data cache lets a
// later pass over the split hit the blocks the first pass stored, instead of keying the same samples anew.
import type { DataSource } from '@meshtrain/client';

export function foldedDataSource(inner: DataSource, samplesInSplit: () => Promise<number>): DataSource {
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
        const len = Math.min(end - id + 1, size - s);
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
