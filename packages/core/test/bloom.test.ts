import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BloomFilter, WitnessError, bloomSize } from '../src/witness/index.ts';

// xorshift32: test-local deterministic item generator.
function rng(seed: number): (len: number) => Uint8Array {
  let s = seed >>> 0 || 1;
  return (len) => {
    const out = new Uint8Array(len);
    for (let i = 0; i < len; i++) {
      s ^= s << 13;
      s >>>= 0;
      s ^= s >>> 17;
      s ^= s << 5;
      s >>>= 0;
      out[i] = s & 0xff;
    }
    return out;
  };
}

describe('bloom sizing', () => {
  it('follows m = ceil(-n ln p / ln²2) rounded to a byte, k = round(m/n ln 2)', () => {
    expect(bloomSize(10, 0.01)).toEqual({ numBits: 96, numHashes: 7 });
    expect(bloomSize(10_000, 0.001)).toEqual({ numBits: 143_776, numHashes: 10 });
    expect(bloomSize(0, 0.01)).toEqual({ numBits: 64, numHashes: 32 });
    expect(bloomSize(1, 0.5).numBits).toBe(64);
    expect(() => bloomSize(10, 0)).toThrow(WitnessError);
    expect(() => bloomSize(-1, 0.1)).toThrow(/non-negative/);
  });
  it("beats Psyche's fixed 1024 bits at 256 items", () => {
    expect(bloomSize(256, 0.01).numBits).toBeGreaterThan(1024);
  });
});

describe('bloom membership', () => {
  it('never forgets an inserted item and round-trips through its data form', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 0, maxLength: 40 }), { maxLength: 200 }),
        fc.uint8Array({ maxLength: 16 }),
        (items, salt) => {
          const f = BloomFilter.of(items, 0.01, salt);
          const g = BloomFilter.fromData(f.toData());
          for (const item of items) {
            expect(f.has(item)).toBe(true);
            expect(g.has(item)).toBe(true);
          }
          expect(g.toData()).toEqual(f.toData());
        },
      ),
      { numRuns: 60 },
    );
  });

  it('depends on the salt', () => {
    const next = rng(9);
    const items = Array.from({ length: 50 }, () => next(32));
    const a = BloomFilter.of(items, 0.01, new Uint8Array([1]));
    const b = BloomFilter.of(items, 0.01, new Uint8Array([2]));
    expect(a.bits).not.toEqual(b.bits);
  });

  it('rejects malformed data with a typed error', () => {
    const ok = BloomFilter.of([new Uint8Array([1])], 0.01, new Uint8Array(8)).toData();
    expect(() => BloomFilter.fromData({ ...ok, numBits: 65 })).toThrow(/multiple of 8/);
    expect(() => BloomFilter.fromData({ ...ok, numHashes: 0 })).toThrow(/numHashes/);
    expect(() => BloomFilter.fromData({ ...ok, numHashes: 33 })).toThrow(/numHashes/);
    expect(() => BloomFilter.fromData({ ...ok, bits: new Uint8Array(3) })).toThrow(/bytes/);
    expect(() => BloomFilter.fromData({ ...ok, salt: new Uint8Array(65) })).toThrow(/salt/);
    expect(() => BloomFilter.fromData(ok, 32)).toThrow(/exceeds/);
  });
});

describe('bloom false-positive rate', () => {
  const target = 0.01;
  // Filters x queries per filter: enough that the expected number of false positives is in the thousands.
  const cases: Array<[n: number, filters: number, queries: number]> = [
    [1, 50, 2000],
    [10, 400, 1000],
    [256, 40, 5000],
    [10_000, 2, 100_000],
  ];
  for (const [n, filters, queries] of cases) {
    it(`stays within 1.5x of ${target} at n = ${n}`, () => {
      const next = rng(n * 7919 + 1);
      let fp = 0;
      for (let f = 0; f < filters; f++) {
        const filter = BloomFilter.of(
          Array.from({ length: n }, () => next(32)),
          target,
          next(8),
        );
        // Queries are 33 bytes, so they can never equal an inserted 32-byte item.
        for (let q = 0; q < queries; q++) if (filter.has(next(33))) fp++;
      }
      const measured = fp / (filters * queries);
      expect(measured).toBeLessThanOrEqual(1.5 * target);
      if (n >= 10) expect(measured).toBeGreaterThan(0.3 * target); // sized for n, not wastefully oversized
    });
  }

  it('a saturated filter reports its real false-positive rate', () => {
    const f = BloomFilter.fromData({
      numBits: 64,
      numHashes: 4,
      salt: new Uint8Array(),
      bits: new Uint8Array(8).fill(0xff),
    });
    expect(f.fillRatio()).toBe(1);
    expect(f.estimatedFalsePositiveRate()).toBe(1);
    expect(f.has(new Uint8Array([42]))).toBe(true);
  });
});
