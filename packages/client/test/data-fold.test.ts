import { describe, expect, it } from 'vitest';
import { chunkedDataSource, foldedDataSource, orderedDataSource } from '../src/data-fold.ts';

/**
 * A split of 10 samples, 3 ids each (sample i = [i, i, i]); records the ranges it was asked for. `runIds`: it
 * takes any id, as the relay does for a seeded order.
 */
function split(runIds = false) {
  const calls: [number, number][] = [];
  return {
    calls,
    async samples(start: number, end: number): Promise<Int32Array> {
      calls.push([start, end]);
      if (start < 0 || (end >= 10 && !runIds)) throw new Error(`out of the split: ${start}..${end}`);
      const out = new Int32Array((end - start + 1) * 3);
      for (let i = start; i <= end; i++) out.fill(i, (i - start) * 3, (i - start + 1) * 3);
      return out;
    },
  };
}

describe('foldedDataSource', () => {
  it('folds global indices into the split and splits a range at its end', async () => {
    const inner = split();
    const src = foldedDataSource(inner, async () => 10);
    expect([...(await src.samples(23, 24))]).toEqual([3, 3, 3, 4, 4, 4]);
    expect([...(await src.samples(8, 11))]).toEqual([8, 8, 8, 9, 9, 9, 0, 0, 0, 1, 1, 1]);
    expect(inner.calls).toEqual([
      [3, 4],
      [8, 9],
      [0, 1],
    ]);
  });
  it('cuts requests to maxPerRequest', async () => {
    const inner = split();
    const src = foldedDataSource(inner, async () => 10, 3);
    expect((await src.samples(12, 19)).length).toBe(8 * 3);
    expect(inner.calls).toEqual([
      [2, 4],
      [5, 7],
      [8, 9],
    ]);
  });
  it('asks for the split size once, again after a failure, and refuses a bad size', async () => {
    let asked = 0;
    const flaky = foldedDataSource(split(), async () => {
      asked++;
      if (asked === 1) throw new Error('manifest unavailable');
      return 10;
    });
    await expect(flaky.samples(0, 0)).rejects.toThrow(/manifest unavailable/);
    await flaky.samples(0, 0);
    await flaky.samples(1, 1);
    expect(asked).toBe(2);
    await expect(foldedDataSource(split(), async () => 0).samples(0, 0)).rejects.toThrow(/0 samples/);
  });
});

describe('orderedDataSource', () => {
  it('folds in corpus order, passes run ids through (cut at maxPerRequest) in a seeded order', async () => {
    const corpus = split();
    const folded = orderedDataSource(
      corpus,
      { samplesInSplit: async () => 10, order: async () => 'corpus' },
      3,
    );
    expect([...(await folded.samples(9, 10))]).toEqual([9, 9, 9, 0, 0, 0]);
    expect(corpus.calls).toEqual([
      [9, 9],
      [0, 0],
    ]);
    const relay = split(true);
    const seeded = orderedDataSource(
      relay,
      { samplesInSplit: async () => 10, order: async () => 'seeded' },
      3,
    );
    expect([...(await seeded.samples(9, 15))].filter((_, k) => k % 3 === 0)).toEqual([
      9, 10, 11, 12, 13, 14, 15,
    ]);
    expect(relay.calls).toEqual([
      [9, 11],
      [12, 14],
      [15, 15],
    ]);
  });

  it('asks for the order once, and again after a failure', async () => {
    let asked = 0;
    const src = orderedDataSource(split(true), {
      samplesInSplit: async () => 10,
      order: async () => {
        asked++;
        if (asked === 1) throw new Error('manifest unavailable');
        return 'seeded';
      },
    });
    await expect(src.samples(0, 0)).rejects.toThrow(/manifest unavailable/);
    expect((await src.samples(12, 12))[0]).toBe(12);
    await src.samples(13, 13);
    expect(asked).toBe(2);
  });

  it('chunkedDataSource keeps a short range in one request', async () => {
    const inner = split(true);
    await chunkedDataSource(inner, 4).samples(20, 23);
    await chunkedDataSource(inner).samples(0, 9);
    expect(inner.calls).toEqual([
      [20, 23],
      [0, 9],
    ]);
  });
});
