import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sha256 } from '@noble/hashes/sha2.js';
import {
  BloomFilter,
  healthScore,
  isHealthy,
  participantItem,
  quorum,
  selectConsensusCommitment,
} from '../src/witness/index.ts';

const salt = (i: number): Uint8Array => new Uint8Array([i, i >> 8, 0xaa]);
const commitment = (s: string): Uint8Array => sha256(new TextEncoder().encode(s));

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

describe('per-batch consensus', () => {
  const a = commitment('a');
  const b = commitment('b');
  const blooms = (items: Uint8Array[][]): BloomFilter[] =>
    items.map((it, i) => BloomFilter.of(it, 0.001, salt(i)));

  it('accepts the commitment a quorum of witnesses saw', () => {
    const w = blooms([[a], [a], [b]]);
    expect(selectConsensusCommitment([b, a], w, 2)?.commitment).toEqual(a);
    expect(selectConsensusCommitment([b, a], w, 2)?.votes).toBe(2);
  });

  it('returns none below quorum', () => {
    const w = blooms([[a], [b], []]);
    expect(selectConsensusCommitment([a, b], w, 2)).toBeNull();
    expect(selectConsensusCommitment([], w, 1)).toBeNull();
  });

  it('breaks ties to the lowest commitment, whatever the arrival order', () => {
    const w = blooms([[a], [a], [b], [b]]);
    const low = [a, b].sort((x, y) => (x[0] as number) - (y[0] as number))[0] as Uint8Array;
    expect(selectConsensusCommitment([a, b], w, 2)?.commitment).toEqual(low);
    expect(selectConsensusCommitment([b, a], w, 2)?.commitment).toEqual(low);
  });

  it('is independent of candidate order (every peer picks the same)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 6 }),
        fc.array(fc.subarray([0, 1, 2, 3, 4, 5]), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 5 }),
        (cands, seen, q) => {
          const cs = cands.map((c) => commitment(String(c)));
          const w = seen.map((s, i) =>
            BloomFilter.of(
              s.map((c) => commitment(String(c))),
              0.001,
              salt(i),
            ),
          );
          const x = selectConsensusCommitment(cs, w, q);
          const y = selectConsensusCommitment([...cs].reverse(), w, q);
          expect(x).toEqual(y);
        },
      ),
      { numRuns: 100 },
    );
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
