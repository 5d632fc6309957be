import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sha256 } from '@noble/hashes/sha2.js';
import {
  RoundSelection,
  SwapOrNot,
  assignBatches,
  batchIdsForRound,
  dataIndexForStep,
  effectiveWitnessCount,
  globalBatchSize,
  lcgShuffle,
} from '../src/selection/index.ts';

// A deliberately naive transcription of docs/protocol.md "Committee and witness selection" (BigInt, no
// caching) to check the cached version.
function naiveSwapOrNot(index: number, n: number, seed: Uint8Array): number {
  const le = (b: Uint8Array): bigint => b.slice(0, 8).reduceRight((acc, x) => (acc << 8n) | BigInt(x), 0n);
  let idx = BigInt(index);
  const bn = BigInt(n);
  for (let r = 0; r < 90; r++) {
    const pivot = le(sha256(new Uint8Array([...seed, r]))) % bn;
    const flip = (pivot + bn - idx) % bn;
    const pos = idx > flip ? idx : flip;
    const block = pos / 256n;
    const blockBytes = [0, 1, 2, 3].map((i) => Number((block >> BigInt(8 * i)) & 0xffn));
    const src = sha256(new Uint8Array([...seed, r, ...blockBytes]));
    const bit = ((src[Number((pos % 256n) / 8n)] as number) >> Number(pos % 8n)) & 1;
    if (bit) idx = flip;
  }
  return Number(idx);
}

const seedArb = fc.uint8Array({ minLength: 32, maxLength: 32 });

describe('swap-or-not', () => {
  it('matches a naive transcription of the spec', () => {
    fc.assert(
      fc.property(seedArb, fc.integer({ min: 1, max: 1500 }), (seed, n) => {
        const s = new SwapOrNot(n, seed);
        for (const i of [0, n - 1, Math.floor(n / 2), Math.floor(n / 3)]) {
          expect(s.position(i)).toBe(naiveSwapOrNot(i, n, seed));
        }
      }),
      { numRuns: 15 },
    );
  });

  it('is a permutation and indexAt inverts position', () => {
    fc.assert(
      fc.property(seedArb, fc.integer({ min: 1, max: 2000 }), (seed, n) => {
        const s = new SwapOrNot(n, seed);
        const positions = s.positions();
        expect(new Set(positions).size).toBe(n);
        for (let i = 0; i < n; i += Math.max(1, Math.floor(n / 17))) {
          expect(s.indexAt(positions[i] as number)).toBe(i);
        }
      }),
      { numRuns: 20 },
    );
  });

  it('computes 10,000 positions from cached block hashes quickly', () => {
    const t0 = performance.now();
    const s = new SwapOrNot(10_000, new Uint8Array(32).fill(7));
    s.positions();
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  it('rejects indices outside the round', () => {
    const s = new SwapOrNot(5, new Uint8Array(32));
    expect(() => s.position(5)).toThrow(/outside/);
    expect(() => s.indexAt(-1)).toThrow(/outside/);
  });
});

describe('committee and witness selection', () => {
  const seeds = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((v) => v.toString(16).padStart(16, '0'));

  it('selects exactly W witnesses and verifies only honest proofs', () => {
    fc.assert(
      fc.property(seeds, fc.integer({ min: 1, max: 300 }), fc.integer({ min: 0, max: 40 }), (seed, n, wn) => {
        const w = effectiveWitnessCount(wn, 32, n);
        const sel = new RoundSelection({
          randomSeed: seed,
          clientsLen: n,
          witnessCount: w,
          verificationPercent: 0,
        });
        const witnesses = sel.witnesses();
        expect(new Set(witnesses).size).toBe(w);
        let count = 0;
        for (let i = 0; i < n; i++) {
          const proof = sel.witnessProof(i);
          expect(sel.verifyWitnessProof(proof)).toBe(true);
          expect(proof.witness).toBe(witnesses.includes(i));
          if (proof.witness) count++;
          expect(sel.verifyWitnessProof({ ...proof, witness: !proof.witness })).toBe(false);
          expect(sel.verifyWitnessProof({ ...proof, position: (proof.position + 1) % (n + 1) })).toBe(false);
        }
        expect(count).toBe(w);
        expect(sel.verifyWitnessProof({ position: 0, index: n, witness: true })).toBe(false);
      }),
      { numRuns: 25 },
    );
  });

  it('splits committees by position with verification_percent', () => {
    const sel = new RoundSelection({
      randomSeed: '00000000000000ff',
      clientsLen: 100,
      witnessCount: 4,
      verificationPercent: 10,
    });
    const counts = { TieBreaker: 0, Verifier: 0, Trainer: 0 };
    for (let i = 0; i < 100; i++) {
      const proof = sel.committeeProof(i);
      counts[proof.committee]++;
      expect(sel.verifyCommitteeProof(proof)).toBe(true);
      expect(
        sel.verifyCommitteeProof({
          ...proof,
          committee: proof.committee === 'Trainer' ? 'Verifier' : 'Trainer',
        }),
      ).toBe(false);
    }
    expect(counts).toEqual({ TieBreaker: 0, Verifier: 10, Trainer: 90 });
    expect(sel.trainers()).toHaveLength(90);
  });

  it('gives the same roles for the same seed and different roles for another', () => {
    const a = new RoundSelection({
      randomSeed: '0123456789abcdef',
      clientsLen: 64,
      witnessCount: 8,
      verificationPercent: 0,
    });
    const b = new RoundSelection({
      randomSeed: '0123456789abcdef',
      clientsLen: 64,
      witnessCount: 8,
      verificationPercent: 0,
    });
    const c = new RoundSelection({
      randomSeed: '0123456789abcdee',
      clientsLen: 64,
      witnessCount: 8,
      verificationPercent: 0,
    });
    expect(a.witnesses()).toEqual(b.witnesses());
    expect(a.witnesses()).not.toEqual(c.witnesses());
  });
});

describe('data assignment', () => {
  it('reproduces Psyche fixture: 23 trainers x 384 samples -> 7 x 16 + 16 x 17', () => {
    const trainers = Array.from({ length: 23 }, (_, i) => i);
    const out = assignBatches(trainers, '000000000000002a', 0, 384);
    const sizes = out.map((a) => a.batch.end - a.batch.start + 1);
    expect(sizes.filter((s) => s === 16)).toHaveLength(7);
    expect(sizes.filter((s) => s === 17)).toHaveLength(16);
    expect(new Set(out.map((a) => a.trainer)).size).toBe(23);
  });

  it('LCG shuffle follows Psyche (state = seed; j = next mod (i+1))', () => {
    // Hand-computed with the LCG constants: seed 0, 3 items.
    // i=2: s1 = C = 1442695040888963407, j = s1 mod 3 = 0 -> [c,b,a]; i=1: s2 = s1*A + C mod 2^64, j = s2 mod 2.
    const A = 6364136223846793005n;
    const C = 1442695040888963407n;
    const s1 = C;
    const s2 = (s1 * A + C) & ((1n << 64n) - 1n);
    const items = ['a', 'b', 'c'];
    const expected = items.slice();
    const j1 = Number(s1 % 3n);
    [expected[2], expected[j1]] = [expected[j1] as string, expected[2] as string];
    const j2 = Number(s2 % 2n);
    [expected[1], expected[j2]] = [expected[j2] as string, expected[1] as string];
    expect(lcgShuffle(items, 0n)).toEqual(expected);
  });

  it('assigns every sample index of a step exactly once', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 2000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
        (n, B, dataIndex, seed) => {
          const trainers = Array.from({ length: n }, (_, i) => i);
          const out = assignBatches(trainers, seed.toString(16).padStart(16, '0'), dataIndex, B);
          const seen = new Uint8Array(B);
          for (const { batch } of out) {
            expect(batch.end).toBeGreaterThanOrEqual(batch.start);
            for (let s = batch.start; s <= batch.end; s++) {
              const k = s - dataIndex;
              expect(k).toBeGreaterThanOrEqual(0);
              expect(k).toBeLessThan(B);
              expect(seen[k]).toBe(0);
              seen[k] = 1;
            }
          }
          if (n > 0) expect(seen.every((x) => x === 1)).toBe(true);
          expect(new Set(out.map((a) => a.trainer)).size).toBe(out.length);
          expect(out.length).toBe(n === 0 ? 0 : Math.min(n, B));
          expect(batchIdsForRound(dataIndex, B, n)).toEqual(out.map((a) => a.batch));
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('global batch size ramp', () => {
  const cfg = {
    global_batch_size_start: 8,
    global_batch_size_end: 32,
    global_batch_size_warmup_tokens: 1000,
    max_seq_len: 10,
  };
  it('ramps from start to end over the warmup tokens', () => {
    expect(globalBatchSize(cfg, 0)).toBe(8);
    expect(globalBatchSize(cfg, 50)).toBe(20); // 8 + 24 * 500/1000
    expect(globalBatchSize(cfg, 100)).toBe(32);
    expect(globalBatchSize({ ...cfg, global_batch_size_warmup_tokens: 0 }, 0)).toBe(32);
  });
  it('replays data indices from step 1', () => {
    expect(dataIndexForStep(cfg, 1)).toBe(0);
    expect(dataIndexForStep(cfg, 2)).toBe(8);
    expect(dataIndexForStep(cfg, 3)).toBe(8 + globalBatchSize(cfg, 8));
  });
});
