// The per-epoch hostile-majority figures of the testnet summary, from round history rows like the relay's API
// returns, the verdicts and drops the watcher saw, and the adversaries' fabricated commitments.
import { describe, expect, it } from 'vitest';
import { integrityByEpoch } from '../src/testnet/integrity.ts';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const H = 'h'.repeat(64);

/** A round whose accepted results came from these [client, commitment] pairs (commitment null: none). */
const round = (step: number, epoch: number, height: number, from: [string, string | null][]) => ({
  step,
  epoch,
  height,
  data_index: 0,
  training: true,
  quorum_reached: true,
  accepted: from.map(([client, commitment], i) => ({ batch: { start: i, end: i }, client, commitment })),
});

const verdict = (step: number, trainer: string, verifier: string, pass: boolean, conclusive = false) => ({
  epoch: 9, // what the watcher saw; the history's epoch of the step wins
  step,
  trainer,
  verifier,
  pass,
  conclusive,
});

describe('integrityByEpoch', () => {
  // Epoch 0: heights 0..4 (3, 4 never applied). Epoch 1: heights 0..3 (2, 3 never applied).
  const rows = [
    round(1, 0, 0, [
      [A, 'a1'],
      [H, 'h1'],
    ]),
    round(2, 0, 1, [
      [B, 'b2'],
      [H, 'h2'],
      [A, null],
    ]),
    round(3, 0, 2, [[H, 'h3']]),
    round(4, 0, 3, [[A, 'a4']]),
    round(5, 0, 4, []),
    round(6, 1, 0, [
      [A, 'a6'],
      [B, 'b6'],
    ]),
    round(7, 1, 1, [[H, 'h7']]),
    round(8, 1, 2, [[A, 'a8']]),
    round(9, 1, 3, []),
  ];
  const x = {
    rows,
    // B confirmed a cheat at epoch 1 height 1: its results of epoch 1 are replayed away, not epoch 0's.
    cheats: [{ epoch: 1, id: B, height: 1 }],
    verdicts: [
      verdict(1, H, A, false, true),
      verdict(1, H, B, false, true),
      verdict(2, B, H, false),
      verdict(2, B, A, true),
      verdict(6, B, H, false, true),
      verdict(6, B, H.replace(/h/g, 'i'), false, true),
    ],
    attackers: new Set([A, B]),
    honest: new Set([H]),
    fabricated: new Set(['a1', 'b2', 'a6', 'b6', 'a8']),
    droppedIn: new Map([
      [H, 1],
      [B, 1],
    ]),
    ejectedIn: new Map([[B, 1]]),
  };

  it('counts applied results, the attackers’ share and garbage per epoch, less what a confirmed cheat lost', () => {
    const [e0, e1] = integrityByEpoch(x);
    expect(e0).toMatchObject({
      epoch: 0,
      results_accepted: 5,
      attacker_results_accepted: 2,
      results_applied: 5,
      attacker_results_applied: 2,
      attacker_share: 2 / 5,
      fabricated_applied: 2,
    });
    expect(e1).toMatchObject({
      epoch: 1,
      results_accepted: 3,
      attacker_results_accepted: 2,
      results_applied: 2,
      attacker_results_applied: 1,
      attacker_share: 1 / 2,
      fabricated_applied: 1,
    });
  });

  it('counts honest drops and ejections, attackers’ verdicts and the strikes they took', () => {
    const [e0, e1] = integrityByEpoch(x);
    // A failed H conclusively, B too; A passed B's result (so that one is no strike).
    expect(e0).toMatchObject({
      attacker_verdicts_pass: 1,
      attacker_verdicts_fail: 2,
      attacker_verdicts_conclusive: 2,
      attacker_strikes: 0,
      honest_dropped: 0,
    });
    // Both verifiers failed B's result of step 6.
    expect(e1).toMatchObject({
      attacker_strikes: 1,
      attackers_ejected: 1,
      honest_dropped: 1,
      honest_ejected: 0,
    });
    // A drop that chaos caused is not the attackers'.
    expect(integrityByEpoch({ ...x, killed: new Set([H]) })[1]?.honest_dropped).toBe(0);
  });

  it('counts an attacker’s conclusive failure of a result a trusted verifier passed as refuted', () => {
    const T = 't'.repeat(64);
    const verdicts = [
      verdict(1, H, T, true),
      verdict(1, H, A, false, true),
      // Failed, not conclusively: an honest-looking low score, no accusation.
      verdict(2, H, T, true),
      verdict(2, H, B, false),
      // The trusted verifier failed this one too: the attacker's accusation stands.
      verdict(7, H, T, false, true),
      verdict(7, H, A, false, true),
    ];
    const refuted = (trusted: Set<string>) =>
      integrityByEpoch({ ...x, verdicts, trusted }).map((e) => e.attacker_accusations_refuted);
    expect(refuted(new Set([T]))).toEqual([1, 0]);
    // Without the anchor nobody's pass refutes anything.
    expect(refuted(new Set())).toEqual([0, 0]);
  });
});
