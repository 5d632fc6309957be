// End to end on real processes, one attack per test: `node-trainer local-testnet --adversary KIND` starts a
// relay, three honest `node-trainer train` processes and one `train --adversary KIND` (micro preset), and the
// JSON summary says what the attack achieved. Whatever the attack, the honest trainers finish the run with
// equal parameter hashes and none of them is dropped; what happens to the attacker depends on the kind:
//  - fabricated results (random signs, flipped signs, a replayed result, another batch's gradient): the run
//    verifies every result (verification_percent 100, so detection never depends on the sample); both
//    verifiers fail each of the cheater's results, so none is applied; the cheat is confirmed at the first
//    conclusive failure (sign-flip, stale-replay, other-batch) or the third strike (random signs), the
//    coordinator ejects it and every replica removes whatever of its results it had applied: none stays in
//    the model;
//  - malformed results (dense, a tensor missing): the relay refuses each one at admission (bad_result);
//  - equivocation: the second result for a batch ejects the sender at once;
//  - a lying witness (an all-zero attestation, accusing everyone) cannot block quorum or drop anyone alone;
//  - a designated checkpoint uploader that never uploads: a standby voter uploads, and a trainer that joins
//    at the next epoch still starts from the checkpoint;
//  - a poisoned checkpoint: the relay refuses the upload (409) and keeps advertising the honest hash;
//  - idle sybils (one process, 50 identities that never witness): see the test (colluding ones:
//    testnet-sybil.test.ts).
// (The summary's own fields count the honest trainers; the adversary_* and cheater_* fields the attackers.)
// Measured on this 2-core machine while others' work kept its load at 8-18: 65-115 s per run, 130 s for
// no-upload and sybil (two or three epochs), 16 min for all 11. The floor is timers, not compute: the first
// train step (an ORT warm-up) fills most of the first round, and a round that waits for a result that never
// comes (an ejected or refused attacker's) lasts max_round_train_time, 20 s. They run one after the other:
// four trainers and a relay already fill two cores.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { TestnetResult } from '../src/testnet/index.ts';

const bin = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));
/** Per run: generous for a loaded CI machine, far above the minute an idle one takes. */
const TIMEOUT_S = 420;

async function testnet(...args: string[]): Promise<TestnetResult> {
  const { stdout, stderr, code } = await new Promise<{ stdout: string; stderr: string; code: number }>(
    (resolve) =>
      execFile(
        process.execPath,
        [bin, 'local-testnet', '--num-clients', '3', '--json', '--timeout', String(TIMEOUT_S), ...args],
        { timeout: (TIMEOUT_S + 60) * 1000, maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) =>
          resolve({ stdout, stderr, code: err ? ((err as { code?: number }).code ?? 1) : 0 }),
      ),
  );
  const lines = stdout.trim().split('\n');
  if (code !== 0) console.error(stderr.slice(-4000));
  expect(lines).toHaveLength(1);
  const r = JSON.parse(lines[0] as string) as TestnetResult;
  if (code !== 0) console.error(JSON.stringify(r));
  expect(code).toBe(0);
  return r;
}

/** What every adversary run must leave intact. */
function honestUnaffected(r: TestnetResult): void {
  expect(r.completed).toBe(true);
  expect(r.param_hash_reports).toBeGreaterThanOrEqual(3);
  expect(r.param_hash_mismatches).toBe(0);
  expect(r.honest_dropped).toBe(0);
  expect(r.errors).toBe(0);
  expect(r.batches_lost).toBe(0);
  expect(r.samples_applied_twice).toBe(0);
  expect(r.advertised_hash_honest).toBe(true);
  expect(r.checkpoints_dishonest).toBe(0);
  expect(r.adversaries_joined).toBeGreaterThanOrEqual(1);
}

const MINUTES = 60_000;

/**
 * A run that cannot end inside its first epoch on any machine: epochs of 30 s (the shortest the run's timers
 * allow) and rounds of at least 3 s whatever the machine's speed (RoundWitness lasts round_witness_time), so 24
 * steps take over 72 s and span at least two epoch ends (with 1 s rounds an idle CI machine once finished all
 * 24 steps in the first epoch).
 */
const EPOCH_TIMERS = ['--epoch-time', '30', '--round-witness-time', '3'] as const;
const SEVERAL_EPOCHS = [...EPOCH_TIMERS, '--steps', '24'] as const;

describe('local-testnet --adversary', () => {
  for (const kind of ['random-signs', 'sign-flip', 'stale-replay', 'other-batch'])
    it(
      `${kind}: the cheater is ejected and none of its results stays applied`,
      async () => {
        const r = await testnet('--adversary', kind, '--steps', '8', '--verification-percent', '100');
        honestUnaffected(r);
        expect(r.cheaters_ejected).toBe(1);
        expect(r.cheater_results_applied).toBe(0);
      },
      8 * MINUTES,
    );

  for (const kind of ['dense', 'wrong-shape'])
    it(
      `${kind}: every result is refused at admission (bad_result)`,
      async () => {
        const r = await testnet('--adversary', kind, '--steps', '8');
        honestUnaffected(r);
        expect(r.adversary_refusals.bad_result).toBeGreaterThanOrEqual(1);
        expect(r.cheater_results_accepted).toBe(0);
        expect(r.cheater_results_applied).toBe(0);
      },
      8 * MINUTES,
    );

  it(
    'equivocate: ejected at its first second result',
    async () => {
      const r = await testnet('--adversary', 'equivocate', '--steps', '8');
      honestUnaffected(r);
      expect(r.cheaters_ejected).toBe(1);
      expect(r.adversary_refusals.equivocation).toBe(1);
      // Its first result of that round was admitted before the second one: an ejection for equivocation
      // does not exclude it (only a verified cheat's results are removed), so it may stay applied.
      expect(r.cheater_results_applied).toBeLessThanOrEqual(1);
    },
    8 * MINUTES,
  );

  it(
    'lying-witness: rounds keep reaching quorum and nobody honest is dropped',
    async () => {
      const r = await testnet('--adversary', 'lying-witness', '--steps', '8');
      honestUnaffected(r);
      expect(r.quorum_failures).toBe(0);
    },
    8 * MINUTES,
  );

  it(
    'no-upload: a standby voter uploads the checkpoint and the next epoch’s joiner starts from it',
    async () => {
      // The late joiner comes in at the second epoch.
      const r = await testnet('--adversary', 'no-upload', '--late-joiners', '1', ...SEVERAL_EPOCHS);
      honestUnaffected(r);
      // The adversary joined first, so it was the designated uploader of every epoch end.
      expect(r.adversary_designated_uploads).toBeGreaterThanOrEqual(2);
      expect(r.checkpoints_stored).toBe(r.adversary_designated_uploads);
      expect(r.rejoined_with_checkpoint).toBeGreaterThanOrEqual(1);
    },
    8 * MINUTES,
  );

  it(
    'poison-checkpoint: the fake upload is refused and the relay keeps the honest hash and checkpoint',
    async () => {
      const r = await testnet('--adversary', 'poison-checkpoint', '--steps', '8');
      honestUnaffected(r);
      expect(r.adversary_designated_uploads).toBe(1);
      // Its made-up parameters for the real epoch end, refused against the agreed hash.
      expect(r.adversary_refusals.param_hash_mismatch).toBeGreaterThanOrEqual(1);
      expect(r.adversary_refusals.http_409).toBeGreaterThanOrEqual(1);
      // Its made-up hash report was a minority one.
      expect(r.adversary_hash_mismatches).toBe(1);
      expect(r.checkpoints_stored).toBe(1);
    },
    8 * MINUTES,
  );

  // What happens: every process of a testnet shares 127.0.0.1 and the relay takes at most 16 identities per
  // address into a run, so 13 of the 50 sybils get in (the 3 honest trainers hold the other slots) and the
  // sybil process stops after 3 refusals. The sybils join during the first epoch and enter the second with the
  // honest trainers: 16 clients, W = 16 witnesses, quorum 10, only 3 of them witnessing. That round misses
  // quorum, its silent witnesses — every sybil — are dropped, the epoch ends (its unapplied rounds rewound:
  // nothing lost), and the next epoch runs with the honest trainers alone. A sybil swarm that rejoins after
  // every drop would cost the run an epoch each time: only the join puzzle and the per-address cap bound it.
  it(
    'sybil-idle: the per-address cap admits a few of 50 idle identities; they cost one epoch and are all dropped',
    async () => {
      // 36 steps, not 24: a loaded machine can start the sybil process late enough that its identities enter
      // the third epoch, which then still has rounds to drop them in.
      const r = await testnet('--adversary', 'sybil-idle:50', ...EPOCH_TIMERS, '--steps', '36');
      honestUnaffected(r);
      expect(r.adversary_identities).toBe(50);
      expect(r.adversaries_joined).toBeLessThanOrEqual(16 - 3);
      expect(r.adversaries_dropped).toBe(r.adversaries_joined);
      expect(r.quorum_failures).toBeGreaterThanOrEqual(1);
    },
    8 * MINUTES,
  );
});
