// Global sample indices grow without bound (every step takes the next global batch), while a split has `n`
// samples: in corpus order index i is sample i mod n, so a run longer than its dataset goes over it again
// instead of failing. The relay's data source folds this way; the tab folds before its data cache too, so a
// later pass over the split hits the blocks the first pass stored instead of keying the same samples anew.
// In a seeded order (relay-api's DataOrder) each pass is a different permutation, so the pass must reach the
// relay: ids are not folded, only cut into requests.
import type { DataSource } from './interfaces.ts';
import type { DataOrder } from './relay-api/types.ts';

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
      return concat(parts);
    },
  };
}

/** `inner` asked for run ids as they are, in ranges of at most `maxPerRequest` samples. */
export function chunkedDataSource(inner: DataSource, maxPerRequest = Infinity): DataSource {
  return {
    async samples(start: number, end: number): Promise<Int32Array> {
      if (end - start + 1 <= maxPerRequest) return inner.samples(start, end);
      const parts: Int32Array[] = [];
      for (let id = start; id <= end; id += maxPerRequest)
        parts.push(await inner.samples(id, Math.min(end, id + maxPerRequest - 1)));
      return concat(parts);
    },
  };
}

/**
 * Run ids onto `inner` as the split's order wants them: folded into [0, n) in corpus order, passed through
 * (cut at `maxPerRequest`) in a seeded order. The order is asked once, when the first samples are.
 */
export function orderedDataSource(
  inner: DataSource,
  split: { samplesInSplit(): Promise<number>; order(): Promise<DataOrder> },
  maxPerRequest = Infinity,
): DataSource {
  let chosen: Promise<DataSource> | null = null;
  return {
    async samples(start: number, end: number): Promise<Int32Array> {
      chosen ??= split.order().then(
        (order) =>
          order === 'seeded'
            ? chunkedDataSource(inner, maxPerRequest)
            : foldedDataSource(inner, () => split.samplesInSplit(), maxPerRequest),
        (e: unknown) => {
          chosen = null;
          throw e;
        },
      );
      return (await chosen).samples(start, end);
    },
  };
}

function concat(parts: readonly Int32Array[]): Int32Array {
  if (parts.length === 1) return parts[0] as Int32Array;
  const out = new Int32Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
