// Which results of a round are verified and by whom (docs/protocol.md "Verification of work";
// protocol/verification.ts has the fingerprint and the measurements). A query on rounds like
// roundAssignments: every peer and the coordinator derive the same tasks from the same state.
import { sha256 } from '@noble/hashes/sha2.js';
import { hexToBytes } from '../selection/hex.ts';
import { CoordinatorError } from './errors.ts';
import { eject } from './membership.ts';
import {
  currentRound,
  roundAdmitted,
  roundAssignments,
  roundAtHeight,
  withRound,
  type RoundAssignment,
} from './queries.ts';
import type { CoordinatorState, Round } from './state.ts';
import type { Ctx } from './transitions.ts';

/** Independent verifiers per sampled result; a confirmed cheat needs all of them to fail it. */
export const VERIFIERS_PER_RESULT = 2;

const SAMPLE_TAG = new TextEncoder().encode('meshtrain/verify-sample/v1');
const VERIFIER_TAG = new TextEncoder().encode('meshtrain/verifier/v1');

export function u32le(v: number): Uint8Array {
  return new Uint8Array([v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff]);
}

export function hashOf(...parts: Uint8Array[]): Uint8Array {
  const n = parts.reduce((a, p) => a + p.length, 0);
  const m = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    m.set(p, o);
    o += p.length;
  }
  return sha256(m);
}

/** A uniform integer in [0, n) from 8 hash bytes at `at` (n ≤ 2^53; the modulo bias is below 2^-11). */
export function below(h: Uint8Array, at: number, n: number): number {
  const v = new DataView(h.buffer, h.byteOffset + at, 8);
  return Number(v.getBigUint64(0, true) % BigInt(n));
}

export interface VerificationTask {
  /** Index of the result in `roundAssignments(judged)` (and in its admitted record). */
  slot: number;
  trainer: RoundAssignment;
  /** Coordinator ids of the verifiers, in order (two, or one when only one other client exists). */
  verifiers: string[];
}

const tasksMemo = new WeakMap<readonly number[], { judged: readonly number[]; tasks: VerificationTask[] }>();

/**
 * Which results of `judged` (round h) the clients of `verifying` (round h+1) check, and who checks each: every
 * assignment is sampled with probability verification_percent / 100 from round h+1's seed, and two verifiers
 * are drawn from round h+1's roster without the trainer. Depends only on the two rounds' seeds and rosters,
 * so every peer and the coordinator derive the same tasks at any time; a task whose result the host never
 * admitted has nothing to check.
 */
export function verificationTasks(
  state: CoordinatorState,
  judged: Round,
  verifying: Round,
): VerificationTask[] {
  const memo = tasksMemo.get(verifying.roster);
  if (memo && memo.judged === judged.roster) return memo.tasks;
  const percent = verifying.verification_percent;
  const tasks: VerificationTask[] = [];
  if (percent > 0) {
    const seed = hexToBytes(verifying.random_seed);
    roundAssignments(state, judged).forEach((trainer, slot) => {
      const h = hashOf(SAMPLE_TAG, seed, u32le(judged.height), u32le(slot));
      if (below(h, 0, 1_000_000) >= percent * 10_000) return;
      const pool = verifying.roster.filter((ci) => ci !== trainer.client_index);
      const verifiers: string[] = [];
      for (let k = 0; k < VERIFIERS_PER_RESULT && pool.length > 0; k++) {
        const pick = below(hashOf(VERIFIER_TAG, seed, u32le(slot), u32le(k)), 0, pool.length);
        const [ci] = pool.splice(pick, 1);
        const id = state.epoch.clients[ci as number]?.id;
        if (id) verifiers.push(id);
      }
      if (verifiers.length > 0) tasks.push({ slot, trainer, verifiers });
    });
  }
  tasksMemo.set(verifying.roster, { judged: judged.roster, tasks });
  return tasks;
}

/**
 * `verdict`: a verifier of the open round h+1 reports on a sampled result of round h. Recorded in round h;
 * the second failing verdict (all verifiers of the task failed it) confirms the cheat: the trainer is ejected
 * and listed in the epoch's cheats with the height it was confirmed at (queries.acceptedCommitments excludes
 * its results, queries.replayExclusions tells replicas to rebuild without those already applied).
 */
export interface VerdictSubmission {
  id: string;
  step: number;
  batch: { start: number; end: number };
  pass: boolean;
}

export function verdict(
  state: CoordinatorState,
  v: VerdictSubmission,
  ctx: Ctx,
): CoordinatorState | CoordinatorError {
  if (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness')
    return new CoordinatorError(
      'WrongPhase',
      `verdicts are taken in RoundTrain or RoundWitness (run is ${state.run_state})`,
    );
  const cur = currentRound(state);
  const judged = cur ? roundAtHeight(state, cur.height - 1) : null;
  if (!cur || !judged || judged.step !== v.step)
    return new CoordinatorError(
      'StaleRound',
      `verdicts are for the round before the open one, not step ${String(v.step)}`,
    );
  if (typeof v.pass !== 'boolean' || typeof v.batch !== 'object' || v.batch === null)
    return new CoordinatorError('BadEvent', 'a verdict names a batch and pass: true | false');
  const task = verificationTasks(state, judged, cur).find(
    (t) => t.trainer.batch.start === v.batch.start && t.trainer.batch.end === v.batch.end,
  );
  if (!task || !task.verifiers.includes(v.id))
    return new CoordinatorError(
      'NotAVerifier',
      `${v.id.slice(0, 12)}… does not verify that batch of step ${v.step}`,
    );
  if ((roundAdmitted(judged)[task.slot] ?? null) === null)
    return new CoordinatorError('NothingToVerify', 'the host admitted no result for that batch');
  const by = state.epoch.clients.findIndex((c) => c.id === v.id);
  const verdicts = judged.verdicts ?? [];
  if (verdicts.some((x) => x.slot === task.slot && x.by === by))
    return new CoordinatorError('DuplicateVerdict', 'this verifier already reported on that result');
  const recorded = [...verdicts, { slot: task.slot, by, pass: v.pass }];
  let next = withRound(state, { ...judged, verdicts: recorded });
  const trainerId = task.trainer.id;
  ctx.effects.push({
    type: 'VerdictRecorded',
    step: v.step,
    trainer: trainerId,
    verifier: v.id,
    pass: v.pass,
  });
  const fails = recorded.filter((x) => x.slot === task.slot && !x.pass).length;
  if (fails >= VERIFIERS_PER_RESULT) {
    const cheats = [
      ...(next.epoch.cheats ?? []),
      { client_index: task.trainer.client_index, height: cur.height },
    ];
    next = { ...next, epoch: { ...next.epoch, cheats } };
    next = eject(next, trainerId, `failed verification of step ${v.step} by ${fails} verifiers`, ctx);
    ctx.effects.push({ type: 'CheatConfirmed', id: trainerId, step: v.step });
  }
  return next;
}
