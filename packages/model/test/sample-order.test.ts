import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DataLocation } from '@meshtrain/core';
import {
  MAX_ORDERED_SAMPLES,
  PassPermutation,
  corpusOrder,
  sampleOrderFor,
  seededOrder,
  shuffleSeedOf,
} from '../src/index.ts';

const seedOf = (b: number) => Uint8Array.from({ length: 32 }, (_, i) => (b * 131 + i * 7) % 256);
const SEED = seedOf(1);

/** π_p over the whole of [0, n). */
const permutation = (seed: Uint8Array, n: number, pass = 0) => {
  const p = new PassPermutation(seed, n, pass);
  return Array.from({ length: n }, (_, j) => p.at(j));
};

const isPermutation = (xs: readonly number[]) => {
  const seen = new Uint8Array(xs.length);
  for (const x of xs) {
    if (!Number.isInteger(x) || x < 0 || x >= xs.length || seen[x]) return false;
    seen[x] = 1;
  }
  return true;
};

/** Unordered pairs of samples read one after the other. */
const neighbours = (xs: readonly number[]) =>
  new Set(xs.slice(1).map((x, j) => (x < xs[j]! ? `${x},${xs[j]}` : `${xs[j]},${x}`)));

describe('PassPermutation', () => {
  it('is a bijection of [0, n) for small, prime and power-of-two n, on several passes', () => {
    const sizes = [1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 64, 97, 100, 127, 128, 129, 1000, 1023];
    for (const n of [...sizes, 1024, 1025, 4096, 7919, 65_536, 65_537])
      for (const pass of [0, 1, 2, 1_000_003])
        expect(isPermutation(permutation(SEED, n, pass)), `n=${n}`).toBe(true);
  });

  it('is a bijection for any seed, size and pass (property)', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        (seed, n, pass) => isPermutation(permutation(seed, n, pass)),
      ),
      { numRuns: 60 },
    );
  });

  it('is a function of (seed, n, pass) alone', () => {
    expect(permutation(seedOf(3), 500, 7)).toEqual(permutation(seedOf(3), 500, 7));
    // A copy of the seed, not the same array object.
    expect(permutation(Uint8Array.from(seedOf(3)), 500, 7)).toEqual(permutation(seedOf(3), 500, 7));
  });

  it('differs between seeds, between passes and between sizes', () => {
    const n = 1000;
    const base = permutation(SEED, n);
    const agree = (xs: number[]) => xs.filter((x, j) => x === base[j]).length;
    // A random permutation agrees with another at about one position.
    expect(agree(permutation(seedOf(2), n))).toBeLessThan(10);
    expect(agree(permutation(SEED, n, 1))).toBeLessThan(10);
    const flipped = Uint8Array.from(SEED);
    flipped[31] = flipped[31]! ^ 1;
    expect(agree(permutation(flipped, n))).toBeLessThan(10);
    expect(agree(permutation(SEED, n + 1).slice(0, n))).toBeLessThan(10);
    // The identity would agree everywhere: the order is really shuffled.
    expect(base.filter((x, j) => x === j).length).toBeLessThan(10);
  });

  it('gives a sample other neighbours on the next pass', () => {
    const n = 2000;
    const first = neighbours(permutation(SEED, n, 0));
    const second = [...neighbours(permutation(SEED, n, 1))];
    // Expected about (n − 1)² · 2 / (n (n − 1)) ≈ 2 shared pairs.
    expect(second.filter((p) => first.has(p)).length).toBeLessThan(12);
    // And samples adjacent in the corpus are rarely adjacent in the order (about 2 such pairs expected).
    const corpusPairs = [...first].filter((p) => {
      const [a, b] = p.split(',').map(Number) as [number, number];
      return b - a === 1;
    });
    expect(corpusPairs.length).toBeLessThan(12);
  });

  // χ² of counts that `passes` independent uniform permutations would spread evenly. The seed is fixed, so this
  // never flakes; the bounds are 5 sd above the statistic's mean. Networks of 8 rounds, or of XOR rounds, fail
  // them at n = 5 or 6 (3-bit networks, z of 17 to 68 at these pass counts); this one stays within 1.5 sd.
  const chi2 = (counts: readonly number[], expected: number) =>
    counts.reduce((a, c) => a + (c - expected) ** 2 / expected, 0);

  it('puts samples at positions, and pairs of samples next to each other, about equally often', () => {
    for (const [n, passes] of [
      [5, 40_000],
      [6, 40_000],
      [7, 40_000],
      [12, 6000],
      [16, 6000],
    ] as const) {
      const atPosition = Array.from({ length: n * n }, () => 0);
      const pairs = Array.from({ length: n * n }, () => 0);
      for (let p = 0; p < passes; p++) {
        const xs = permutation(SEED, n, p);
        xs.forEach((x, j) => atPosition[j * n + x]!++);
        for (const j of [0, n - 2]) pairs[xs[j]! * n + xs[j + 1]!]!++;
      }
      // Position × sample: mean n(n − 1), sd ≈ √2 (n − 1).
      expect(chi2(atPosition, passes / n), `n=${n}`).toBeLessThan(n * (n - 1) + 5 * Math.SQRT2 * (n - 1));
      // Ordered pairs of distinct samples (the diagonal never occurs): mean cells − 1, sd ≈ √(2 (cells − 1)).
      const cells = n * (n - 1);
      const offDiagonal = pairs.filter((_, k) => k % (n + 1) !== 0);
      expect(offDiagonal.every((c) => c > 0)).toBe(true);
      expect(chi2(offDiagonal, (2 * passes) / cells), `n=${n}`).toBeLessThan(
        cells - 1 + 5 * Math.sqrt(2 * (cells - 1)),
      );
    }
  });

  it('spreads the first part of a pass over the whole split (the issue corpus order had)', () => {
    // Brown's training split at seq 128 has ~45k samples; 300 steps × 64 read 19,200 of them.
    const n = 45_000;
    const p = new PassPermutation(SEED, n, 0);
    const early = Array.from({ length: 19_200 }, (_, j) => p.at(j));
    const tenths = Array.from({ length: 10 }, () => 0);
    for (const x of early) tenths[Math.floor((x * 10) / n)]!++;
    // Each tenth of the corpus holds ~1,920 of them (binomial sd ≈ 42).
    for (const t of tenths) expect(Math.abs(t - 1920)).toBeLessThan(250);
    const mean = early.reduce((a, x) => a + x, 0) / early.length;
    expect(Math.abs(mean - (n - 1) / 2)).toBeLessThan(n * 0.02);
  });

  it('handles splits up to 2^52 samples', () => {
    for (const n of [2 ** 40 + 1, MAX_ORDERED_SAMPLES]) {
      const p = new PassPermutation(SEED, n, 3);
      const xs = [0, 1, 2, n - 2, n - 1].map((j) => p.at(j));
      for (const x of xs) expect(Number.isInteger(x) && x >= 0 && x < n).toBe(true);
      expect(new Set(xs).size).toBe(xs.length);
    }
  });

  it('refuses bad seeds, sizes and indices', () => {
    expect(() => new PassPermutation(new Uint8Array(31), 10, 0)).toThrow(RangeError);
    expect(() => new PassPermutation(SEED, 0, 0)).toThrow(RangeError);
    expect(() => new PassPermutation(SEED, 2.5, 0)).toThrow(RangeError);
    expect(() => new PassPermutation(SEED, MAX_ORDERED_SAMPLES + 1, 0)).toThrow(RangeError);
    expect(() => new PassPermutation(SEED, 10, -1)).toThrow(RangeError);
    const p = new PassPermutation(SEED, 10, 0);
    for (const j of [-1, 10, 1.5, NaN]) expect(() => p.at(j)).toThrow(RangeError);
  });
});

describe('run sample orders', () => {
  it('corpus order reads sample id mod n', () => {
    const o = corpusOrder(7);
    expect(o.kind).toBe('corpus');
    expect([0, 6, 7, 13, 15, 7e12].map((i) => o.at(i))).toEqual([0, 6, 0, 6, 1, 7e12 % 7]);
    expect(() => o.at(-1)).toThrow(RangeError);
  });

  it('seeded order reads pass ⌊id/n⌋ of the seed’s permutations: each pass once through the split', () => {
    const n = 37;
    const o = seededOrder(n, SEED);
    expect(o.kind).toBe('seeded');
    for (const pass of [0, 1, 2, 50]) {
      const ids = Array.from({ length: n }, (_, j) => pass * n + j);
      // Read out of order, so the pass cache is exercised going back and forth.
      const got = ids
        .reverse()
        .map((id) => o.at(id))
        .reverse();
      expect(got).toEqual(permutation(SEED, n, pass));
    }
    expect(o.at(0)).toBe(new PassPermutation(SEED, n, 0).at(0));
    expect(() => o.at(2 ** 53)).toThrow(RangeError);
  });

  it('follows the data location: Seeded shuffles, DontShuffle and no shuffle key keep corpus order', () => {
    const seed = [...SEED];
    const relay = (shuffle: 'DontShuffle' | { Seeded: number[] }): DataLocation => ({
      Relay: { dataset: 'brown', token_size_in_bytes: 'TwoBytes', shuffle },
    });
    expect(shuffleSeedOf(relay({ Seeded: seed }))).toEqual(SEED);
    expect(shuffleSeedOf(relay('DontShuffle'))).toBeNull();
    expect(shuffleSeedOf('Dummy')).toBeNull();
    expect(shuffleSeedOf({ Local: '/data' })).toBeNull();
    const http: DataLocation = {
      Http: {
        location: { SingleUrl: 'https://x/a' },
        token_size_in_bytes: 'TwoBytes',
        shuffle: { Seeded: seed },
      },
    };
    expect(shuffleSeedOf(http)).toEqual(SEED);
    const seeded = sampleOrderFor(relay({ Seeded: seed }), 100);
    expect(seeded.kind).toBe('seeded');
    expect(Array.from({ length: 100 }, (_, j) => seeded.at(j))).toEqual(permutation(SEED, 100));
    expect(sampleOrderFor(relay('DontShuffle'), 100).kind).toBe('corpus');
  });
});
