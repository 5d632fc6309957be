import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  WitnessError,
  attestationOf,
  attestedCount,
  attests,
  checkAttestation,
  healthScore,
  isHealthy,
  quorum,
} from '../src/witness/index.ts';

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
  it('falls by at most k when k of W witnesses leave: the votes that stay never pass more easily', () => {
    // A round's quorum is that of the witnesses that have not left before submitting (liveWitnessCount). If
    // the votes of those that stay reach quorum(W − k), the same votes plus the k leavers' reached quorum(W):
    // witnesses who leave, on purpose or not, never let fewer votes decide anything.
    for (let w = 1; w <= 2000; w++)
      for (let k = 0; k < w; k++) expect(quorum(w - k) + k).toBeGreaterThanOrEqual(quorum(w));
  });
});

describe('attestations', () => {
  it('sets one bit per claimed slot, LSB first, in ⌈slots/8⌉ bytes', () => {
    expect([...attestationOf(0, () => true)]).toEqual([]);
    expect([...attestationOf(10, (i) => i === 0 || i === 9)]).toEqual([0b1, 0b10]);
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 300 }), (claims) => {
        const bits = attestationOf(claims.length, (i) => claims[i]!);
        checkAttestation(bits, claims.length);
        expect(bits).toHaveLength(Math.ceil(claims.length / 8));
        expect(claims.map((_, i) => attests(bits, i))).toEqual(claims);
        expect(attests(bits, claims.length + 8)).toBe(false);
        expect(attestedCount(bits)).toBe(claims.filter(Boolean).length);
      }),
    );
  });
  it('refuses a wrong length, bits past the last slot and non-bytes with a typed error', () => {
    const code = (bits: unknown, slots: number) => {
      try {
        checkAttestation(bits, slots);
        return 'ok';
      } catch (e) {
        expect(e).toBeInstanceOf(WitnessError);
        return (e as WitnessError).code;
      }
    };
    expect(code(new Uint8Array(2), 9)).toBe('ok');
    expect(code(new Uint8Array(1), 9)).toBe('BadAttestation');
    expect(code(new Uint8Array(3), 9)).toBe('BadAttestation');
    expect(code(Uint8Array.of(0, 0b10), 9)).toBe('BadAttestation');
    expect(code(Uint8Array.of(0xff, 0b1), 9)).toBe('ok');
    expect(code(Uint8Array.of(0xff), 8)).toBe('ok');
    expect(code([0], 1)).toBe('BadAttestation');
    expect(code(new Uint8Array(0), 0)).toBe('ok');
    expect(code(new Uint8Array(0), -1)).toBe('BadArgument');
  });
});

describe('health', () => {
  it('scores a slot by the attestations that claim it', () => {
    const w = [
      [true, true],
      [true, false],
      [true, false],
    ].map((claims) => attestationOf(2, (i) => claims[i]!));
    expect(healthScore(0, w)).toBe(3);
    expect(healthScore(1, w)).toBe(1);
    expect(isHealthy(0, w, 3)).toBe(true);
    expect(isHealthy(1, w, 3)).toBe(false);
  });
});
