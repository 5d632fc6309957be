// local-testnet --trusted-verifiers N: which processes the testnet plans (a `node-trainer verify` process per
// trusted verifier, its key known before launch) and the run file that lists those keys as trusted. Core waits
// for init_min_clients members at every epoch start, so the run file counts only the honest trainers there:
// an ejected adversary must not leave the next epoch waiting for a member that cannot come back.
import { describe, expect, it } from 'vitest';
import { coordinatorConfigOf, parseRunConfig } from '@meshtrain/core';
import { idsOf } from '../src/testnet/adversaries.ts';
import { extraClients, hasTrained, plan, trustedVerifierIds } from '../src/testnet/launch.ts';
import { testnetToml } from '../src/testnet/index.ts';

const adversaries = [
  { kind: 'lying-verifier' as const, count: 2 },
  { kind: 'sybil' as const, count: 4 },
];

describe('local-testnet with trusted verifiers', () => {
  it('plans a verify process per trusted verifier after the adversaries, leaving every other index as it was', () => {
    const without = plan({ numClients: 2, lateJoiners: 1, adversaries });
    const withTwo = plan({ numClients: 2, lateJoiners: 1, adversaries, trustedVerifiers: 2 });
    const verifiers = withTwo.filter((p) => p.role === 'verifier');
    expect(verifiers.map((p) => ({ index: p.index, command: p.command, phase: p.phase }))).toEqual([
      { index: 5, command: 'verify', phase: 'anchor' },
      { index: 6, command: 'verify', phase: 'anchor' },
    ]);
    for (const p of withTwo.filter((x) => x.role !== 'verifier')) expect(p.command).toBe('train');
    // The trainers and adversaries keep their indices (and so their keys); only the late joiner moves.
    const keyed = (ps: typeof without) => ps.filter((p) => p.phase !== 'late').map((p) => [p.name, p.ids]);
    expect(keyed(withTwo.filter((p) => p.role !== 'verifier'))).toEqual(keyed(without));
    expect(trustedVerifierIds(withTwo)).toEqual([...idsOf(5), ...idsOf(6)]);
    expect(trustedVerifierIds(without)).toEqual([]);
  });

  it('lists their keys as trusted_verifiers and counts only the honest trainers in init_min_clients', () => {
    const keys = trustedVerifierIds(
      plan({ numClients: 2, lateJoiners: 0, adversaries, trustedVerifiers: 1 }),
    );
    const base = {
      numClients: 2,
      steps: 12,
      preset: 'micro' as const,
      randomKillNum: 0,
      randomKillInterval: 20,
      seed: 1,
      extraClients: extraClients(adversaries),
    };
    const anchored = coordinatorConfigOf(
      parseRunConfig(testnetToml({ ...base, trustedVerifiers: keys })).config,
    );
    expect(anchored.trusted_verifiers).toEqual(keys);
    expect(anchored.init_min_clients).toBe(2);
    // The lying verifiers still count in the global batch: they train in the first epoch.
    expect(anchored.global_batch_size_start).toBe(4 * (2 + 2));
    const plain = coordinatorConfigOf(parseRunConfig(testnetToml(base)).config);
    expect(plain.trusted_verifiers ?? []).toEqual([]);
  });
});

describe('when the sybils and late joiners start', () => {
  const polled = (runState: string, rounds: number) => ({
    runState,
    history: () => Array.from({ length: rounds }, (_, step) => ({ step }) as never),
  });

  it('once a poll finds the run in either phase of a round, or a round on record', () => {
    // A fast model's RoundTrain lasts a fraction of a round: a poll that finds RoundWitness must count.
    expect(hasTrained(polled('RoundWitness', 0))).toBe(true);
    expect(hasTrained(polled('RoundTrain', 0))).toBe(true);
    // A poll that falls in the epoch's Cooldown after its rounds.
    expect(hasTrained(polled('Cooldown', 3))).toBe(true);
    for (const state of ['unknown', 'Paused', 'WaitingForMembers', 'Warmup'])
      expect(hasTrained(polled(state, 0))).toBe(false);
  });
});
