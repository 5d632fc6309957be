import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BloomFilter, healthScore, isHealthy, participantItem, quorum } from '../src/witness/index.ts';

const salt = (i: number): Uint8Array => new Uint8Array([i, i >> 8, 0xaa]);

describe('quorum', () => {
  it("matches Psyche's table", () => {
    const table: Array<[number, number]> = [
      [0, 1],
      [1, 1],
      [2, 2],
      [3, 2],
      [4, 2],
      [6, 4],
      [8, 5],
      [16, 10],
      [32, 21],
    ];
    for (const [w, q] of table) expect(quorum(w)).toBe(q);
  });
  it('is at least 1 and never more than W (W >= 1)', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 10_000 }), (w) => quorum(w) >= 1 && quorum(w) <= w));
  });
});

describe('health', () => {
  it('scores a client by the participant blooms that contain it', () => {
    const alice = participantItem(new Uint8Array(32).fill(1));
    const bob = participantItem(new Uint8Array(32).fill(2));
    const w = [[alice, bob], [alice], [alice]].map((it, i) => BloomFilter.of(it, 0.001, salt(i)));
    expect(healthScore(alice, w)).toBe(3);
    expect(healthScore(bob, w)).toBe(1);
    expect(isHealthy(alice, w, 3)).toBe(true);
    expect(isHealthy(bob, w, 3)).toBe(false);
  });
});
