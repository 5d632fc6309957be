// Which results of a round are verified and by whom (docs/protocol.md "Verification of work";
// protocol/verification.ts has the fingerprint and the measurements). A query on rounds like
// roundAssignments: every peer and the coordinator derive the same tasks from the same state.
import { sha256 } from '@noble/hashes/sha2.js';
import { hexToBytes } from '../crypto/bytes.ts';
import { CoordinatorError } from './errors.ts';
import { eject, strike } from './membership.ts';
import {
  currentRound,
  roundAdmitted,
  roundAssignments,
  roundAtHeight,
  withRound,
  type RoundAssignment,
} from './queries.ts';
import type { CoordinatorState, Round } from '../state/coordinator-state.ts';
import type { Ctx } from './context.ts';
import { isTrusted, onProbationIn, qualifiedIn, STRUCK_SAMPLING_FACTOR } from './trust.ts';

/** Independent verifiers per sampled result; a confirmed cheat needs all of them to fail it. */
export const VERIFIERS_PER_RESULT = 2;
/**
 * Results failed by all their verifiers (inconclusively) among the trainer's last STRIKE_WINDOW verified ones
 * that confirm a cheat. Honest DisTrO results fail one check now and then — on some rounds all of them at
 * once — so one is no proof; a fabricated result fails every time, so a cheater reaches 3 at its third
 * verified result.
 */
export const CONFIRMING_STRIKES = 3;
/** Verified results (every verifier reported) per trainer that `state.verified` remembers. */
export const STRIKE_WINDOW = 8;

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

function originOf(state: CoordinatorState, clientIndex: number): string | undefined {
  return state.epoch.clients[clientIndex]?.origin;
}

/**
 * Which results of `judged` (round h) the clients of `verifying` (round h+1) check, and who checks each: every
 * assignment is sampled with probability verification_percent / 100 from round h+1's seed — every result of
 * a trainer on probation when round h opened, and STRUCK_SAMPLING_FACTOR times as many of one with a recent failed judgement
 * (coordinator/trust.ts) — and two verifiers are drawn from round h+1's roster and its verify-only clients
 * (round.verifiers), without the trainer or any
 * client of the trainer's origin. In an anchored run the first verifier is a qualified one whenever round
 * h+1 has one (a trusted verifier for a trainer on probation, when one takes part), so a qualified verifier
 * checks any accusation in the same round; the second comes from another origin than the first where one is
 * left. Depends only on the two rounds (seeds, rosters, frozen trust) and the epoch's clients, so every peer
 * and the coordinator derive the same tasks at any time; a task whose result the host never admitted has
 * nothing to check.
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
  const isAnchored = verifying.qualified !== undefined;
  if (percent > 0) {
    const seed = hexToBytes(verifying.random_seed);
    roundAssignments(state, judged).forEach((trainer, slot) => {
      // The trainer's standing when it trained (round h), the verifiers' when they verify (round h+1).
      const probation = onProbationIn(judged, trainer.client_index);
      const struck = judged.struck?.includes(trainer.client_index) === true;
      const rate = probation ? 100 : struck ? Math.min(100, percent * STRUCK_SAMPLING_FACTOR) : percent;
      const h = hashOf(SAMPLE_TAG, seed, u32le(judged.height), u32le(slot));
      if (below(h, 0, 1_000_000) >= rate * 10_000) return;
      const own = originOf(state, trainer.client_index);
      // A trusted verifier checks anyone, whatever network it shares with them (the run creator vouches for it).
      const pool = [...verifying.roster, ...(verifying.verifiers ?? [])].filter(
        (ci) =>
          ci !== trainer.client_index &&
          (own === undefined ||
            originOf(state, ci) !== own ||
            isTrusted(state, state.epoch.clients[ci]?.id ?? '')),
      );
      const verifiers: string[] = [];
      const picked = new Set<string>();
      for (let k = 0; k < VERIFIERS_PER_RESULT && pool.length > 0; k++) {
        let candidates = pool;
        if (k === 0 && isAnchored) {
          const trusted = probation
            ? pool.filter((ci) => isTrusted(state, state.epoch.clients[ci]?.id ?? ''))
            : [];
          const qualified = pool.filter((ci) => qualifiedIn(verifying, ci));
          candidates = trusted.length > 0 ? trusted : qualified.length > 0 ? qualified : pool;
        } else if (picked.size > 0) {
          const elsewhere = pool.filter((ci) => {
            const o = originOf(state, ci);
            return o === undefined || !picked.has(o);
          });
          if (elsewhere.length > 0) candidates = elsewhere;
        }
        const pick = below(hashOf(VERIFIER_TAG, seed, u32le(slot), u32le(k)), 0, candidates.length);
        const ci = candidates[pick] as number;
        pool.splice(pool.indexOf(ci), 1);
        const o = originOf(state, ci);
        if (o !== undefined) picked.add(o);
        const id = state.epoch.clients[ci]?.id;
        if (id) verifiers.push(id);
      }
      if (verifiers.length > 0) tasks.push({ slot, trainer, verifiers });
    });
  }
  tasksMemo.set(verifying.roster, { judged: judged.roster, tasks });
  return tasks;
}

/**
 * `verdict`: a verifier of the open round h+1 reports on a sampled result of round h. Recorded in round h
 * (a failing verdict keeps the result from being applied; in an anchored run a qualified verifier's verdict
 * outweighs the others', queries.acceptedByEvidence). Refused from a verifier that is no longer a Healthy
 * client. Once every verifier of the task reported, the result counts in the trainer's record
 * (`state.verified`). A cheat is confirmed — the trainer ejected and listed in the epoch's cheats with the
 * height it was confirmed at (queries.acceptedCommitments excludes its results, queries.replayExclusions
 * tells replicas to rebuild without those already applied) — by:
 *  - a trusted verifier's conclusive failure, at once;
 *  - CONFIRMING_STRIKES failed results among the trainer's last STRIKE_WINDOW, where a result counts as
 *    failed when a trusted verifier failed it (anchored), or every verifier failed it and they are of two
 *    origins or more (without anchor).
 * In an anchored run the word of verifiers with a record is not enough to eject or strike anyone: a result
 * they fail, or pass against someone's conclusive failure, is kept out and costs the trainer its record, so
 * its next results are all sampled and go to a trusted verifier first (probation), which either catches the
 * cheat itself or passes the work and refutes whoever accuses it. An accusation that a trusted verifier
 * contradicts — passes the result, none fails it — is refuted: the accuser takes a strike, and MAX_STRIKES of
 * them eject it. A verified record is earned, and can be spent on lying once; it never lets colluders eject
 * or strike someone on their own.
 */
export interface VerdictSubmission {
  id: string;
  step: number;
  batch: { start: number; end: number };
  pass: boolean;
  /** A failure whose measurements prove the cheat on their own (protocol/verification.ts conclusiveFailure). */
  conclusive?: boolean;
  /** With `conclusive`: fingerprint and update agreement ×10 000 (events.ts). */
  evidence?: [number, number];
}

function checkEvidence(e: unknown): e is [number, number] {
  return (
    Array.isArray(e) &&
    e.length === 2 &&
    Number.isInteger(e[0]) &&
    Number.isInteger(e[1]) &&
    (e[0] as number) >= 0 &&
    (e[0] as number) <= 10_000 &&
    (e[1] as number) >= -10_000 &&
    (e[1] as number) <= 10_000
  );
}

type Verdict = NonNullable<Round['verdicts']>[number];

/** What a taken verdict is about: the open round, the judged one, its task and the verifier's epoch index. */
interface VerdictTarget {
  cur: Round;
  judged: Round;
  task: VerificationTask;
  by: number;
}

/** Why `v` is not taken in `state` (a CoordinatorError), or what it is about. */
function verdictTarget(state: CoordinatorState, v: VerdictSubmission): VerdictTarget | CoordinatorError {
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
  if (v.evidence !== undefined && (v.pass || v.conclusive !== true || !checkEvidence(v.evidence)))
    return new CoordinatorError(
      'BadEvent',
      'evidence comes with a conclusive failure: [fingerprint 0..10000, update −10000..10000]',
    );
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
  if (state.epoch.clients[by]?.state !== 'Healthy')
    return new CoordinatorError(
      'NotHealthy',
      `${v.id.slice(0, 12)}… is no longer a member of the epoch; its verdicts are not taken`,
    );
  if ((judged.verdicts ?? []).some((x) => x.slot === task.slot && x.by === by))
    return new CoordinatorError('DuplicateVerdict', 'this verifier already reported on that result');
  return { cur, judged, task, by };
}

/** How the verdicts on one result come out once every verifier reported. */
interface Ruling {
  next: CoordinatorState;
  /** The result failed (a strike in the trainer's verified record). */
  failed: boolean;
}

/**
 * The ruling of an anchored round (`cur.qualified` frozen): only a trusted verifier's word counts against
 * anyone. Its pass refutes every accuser, who takes a strike; its failure counts against the trainer. Verifiers
 * with a record keep a result out or let it through (queries.slotJudgement) but strike no one: colluders can
 * earn records before they lie, and no one else checked their word.
 */
function anchoredRuling(
  state: CoordinatorState,
  mine: readonly Verdict[],
  v: VerdictSubmission,
  trainerId: string,
  ctx: Ctx,
): Ruling {
  let next = state;
  const clients = next.epoch.clients;
  const accusers = mine.filter((x) => !x.pass && x.conclusive === true);
  const trusted = mine.filter((x) => isTrusted(next, clients[x.by]?.id ?? ''));
  const trustedPass = trusted.some((x) => x.pass) && !trusted.some((x) => !x.pass);
  const trustedFail = trusted.some((x) => !x.pass) && !trusted.some((x) => x.pass);
  if (trustedPass)
    for (const x of accusers) {
      const liar = clients[x.by]?.id ?? '';
      ctx.effects.push({ type: 'AccusationRefuted', step: v.step, trainer: trainerId, verifier: liar });
      next = strike(
        next,
        liar,
        `its conclusive failure of step ${v.step} was refuted by a trusted verifier`,
        ctx,
      );
    }
  return { next, failed: trustedFail };
}

/**
 * The ruling of an unanchored round: the verifiers' agreement alone, and never at once. Two accusers that
 * agree may be colluders, and nothing outranks them, so a result they fail only counts against its trainer as
 * one of CONFIRMING_STRIKES among its last STRIKE_WINDOW: three verifier pairs, drawn apart by three round
 * seeds, must each fail one of its results.
 */
function unanchoredRuling(state: CoordinatorState, mine: readonly Verdict[], verifiers: number): Ruling {
  // Failures from one origin are one voice: they keep the result out but count against nobody.
  const failed =
    verifiers >= VERIFIERS_PER_RESULT &&
    mine.every((x) => !x.pass) &&
    originsOf(state.epoch.clients, mine).size >= 2;
  return { next: state, failed };
}

function originsOf(clients: CoordinatorState['epoch']['clients'], verdicts: readonly Verdict[]): Set<string> {
  return new Set(verdicts.map((x) => clients[x.by]?.origin ?? `#${x.by}`));
}

export function verdict(
  state: CoordinatorState,
  v: VerdictSubmission,
  ctx: Ctx,
): CoordinatorState | CoordinatorError {
  const target = verdictTarget(state, v);
  if (target instanceof CoordinatorError) return target;
  const { cur, judged, task, by } = target;
  const conclusive = !v.pass && v.conclusive === true;
  const recorded = [
    ...(judged.verdicts ?? []),
    {
      slot: task.slot,
      by,
      pass: v.pass,
      ...(conclusive ? { conclusive } : {}),
      ...(conclusive && v.evidence ? { evidence: [v.evidence[0], v.evidence[1]] as [number, number] } : {}),
    },
  ];
  const next = withRound(state, { ...judged, verdicts: recorded });
  const trainerId = task.trainer.id;
  ctx.effects.push({
    type: 'VerdictRecorded',
    step: v.step,
    trainer: trainerId,
    verifier: v.id,
    pass: v.pass,
  });
  if (next.ejected.includes(trainerId)) return next;
  if (conclusive && isTrusted(state, v.id))
    return confirmCheat(next, task, cur.height, v.step, 'failed conclusively by a trusted verifier', ctx);
  const mine = recorded.filter((x) => x.slot === task.slot);
  // A result counts once every verifier reported; one that was never fully judged proves nothing either way.
  if (mine.length < task.verifiers.length) return next;
  const ruling =
    cur.qualified !== undefined
      ? anchoredRuling(next, mine, v, trainerId, ctx)
      : unanchoredRuling(next, mine, task.verifiers.length);
  return countStrike(ruling.next, task, cur.height, v.step, ruling.failed, ctx);
}

/** Records a fully judged result in the trainer's verified record; too many failures confirm a cheat. */
function countStrike(
  state: CoordinatorState,
  task: VerificationTask,
  height: number,
  step: number,
  failed: boolean,
  ctx: Ctx,
): CoordinatorState {
  const trainerId = task.trainer.id;
  const next = withVerified(state, trainerId, failed ? 1 : 0);
  const strikes = (next.verified?.[trainerId] ?? []).reduce((a, b) => a + b, 0);
  if (failed && strikes >= CONFIRMING_STRIKES)
    return confirmCheat(
      next,
      task,
      height,
      step,
      `${strikes} of its last ${STRIKE_WINDOW} verified results failed`,
      ctx,
    );
  return next;
}

function confirmCheat(
  state: CoordinatorState,
  task: VerificationTask,
  height: number,
  step: number,
  why: string,
  ctx: Ctx,
): CoordinatorState {
  const id = task.trainer.id;
  const cheats = [...(state.epoch.cheats ?? []), { client_index: task.trainer.client_index, height }];
  let next: CoordinatorState = { ...state, epoch: { ...state.epoch, cheats } };
  if (next.verified && Object.hasOwn(next.verified, id)) {
    const verified = { ...next.verified };
    delete verified[id];
    next = { ...next, verified };
  }
  next = eject(next, id, `failed verification of step ${step}: ${why}`, ctx);
  ctx.effects.push({ type: 'CheatConfirmed', id, step });
  return next;
}

/**
 * `state.verified` with `outcome` appended to `id`'s record (its last STRIKE_WINDOW kept). The record moves to
 * the end of the object, so the first entries are the least recently verified: beyond max_clients ids they are
 * forgotten, which bounds the table whoever joins (a trainer forgotten that way starts afresh).
 */
function withVerified(state: CoordinatorState, id: string, outcome: 0 | 1): CoordinatorState {
  const old = state.verified ?? {};
  const record = [...(Object.hasOwn(old, id) ? (old[id] as number[]) : []), outcome].slice(-STRIKE_WINDOW);
  const ids = Object.keys(old).filter((k) => k !== id);
  const keep = ids.slice(Math.max(0, ids.length + 1 - Math.max(1, state.config.max_clients)));
  const verified: Record<string, number[]> = {};
  for (const k of keep) verified[k] = old[k] as number[];
  verified[id] = record;
  return { ...state, verified };
}
