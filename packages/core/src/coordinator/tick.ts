// The coordinator: `tick(state, event, now)` is the only way state changes. Psyche's server and Solana
// program call one such function; our relay does too. It never throws for a bad event: the error comes back
// in the result with the state unchanged (apart from strikes/ejection for provable lies).
//
// Deliberate departures from Psyche (docs/protocol.md "Differences from Psyche and why"), each marked
// "FIX (Psyche)" in place:
//  1. Quorum is quorum(W) with W the witnesses selected for the round (min(witness_nodes or max_witnesses,
//     roster)); Psyche's check with witness_nodes = 0 compares #submitted with quorum(#submitted) and never
//     fails. W is capped by the roster so it stays reachable when clients leave, and selected witnesses that
//     leave the epoch before submitting are neither waited for nor counted.
//                                                          (transitions.endRound, queries.liveWitnessCount)
//  2. A round missing quorum drops the selected witnesses that stayed silent and ends the epoch; Psyche
//     withdraws every client when zero witnesses submitted.                            (transitions.endRound)
//  3. Drain rounds (after epoch_time or at total_steps) train nothing and consume no data; Psyche's consume
//     both. `last_step = step + 2` is always set (Psyche: "only if >= 4"), and reaching total_steps drains
//     too instead of cutting off the last two rounds' results.      (transitions.startRoundTrain, endRound)
//  4. An epoch that ends early resumes data at the first round whose results nobody applied, so no sample
//     is skipped or trained twice.                                             (transitions.resumeDataIndex)
//  5. Only Healthy clients are in a round's roster, witness, or report health; client indices are stable for
//     the whole epoch (roster = indices), so historical proofs never resolve to the wrong client.
//  6. No 256-client cap: config.max_clients bounds members and epoch size; leaving frees a slot.
//  7. Health checks only judge trainers that were assigned samples, only witnesses accuse, a trainer whose
//     result the host admitted cannot be accused, and quorum(W) accusers are needed to drop.   (witnessing.ts)
//  8. Ejected is assigned: on a shell `eject` event (proven bad signature/commitment), on equivocation (two
//     admitted results for one batch), and after MAX_STRIKES provably invalid witness submissions (bad
//     proof, not a witness, a malformed attestation).
//  9. What peers apply is the host's admitted commitment of each batch (one per batch, refused results never
//     admitted), accepted when quorum(W) − 1 witnesses saw it: the host's record is the other vote, so a
//     witness minority cannot veto a delivered result.                        (results.ts, queries.ts)
// 10. Round seeds derive from the run seed, epoch, step and shell entropy (seed.ts), not a clock or RNG.
// 12. verification_percent is the share of results two other clients re-check (Psyche: a Verifier committee
//     that trains nothing, left todo!()); one failing verdict excludes a result; a confirmed cheat ejects the
//     trainer and excludes its results of the epoch. Trust is anchored by the run's trusted verifiers and
//     earned by verified history (trust.ts).                        (verification.ts, queries.ts)
// 11. A batch whose trainer no witness quorum attested is queued and retried, whole, by another trainer in a
//     later round (Psyche never trains it again); the queue survives epoch ends.           (retries.ts)
import type { CoordinatorConfig } from '../state/coordinator-config.ts';
import { checkCoordinatorConfig } from './config-check.ts';
import { CoordinatorError } from './errors.ts';
import type { CoordinatorEffect, CoordinatorEvent, TickResult } from './events.ts';
import { changeState, timedOut, type Ctx } from './context.ts';
import { eject, healthyCount, isKnown, join, leave, checkId } from './membership.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { abortWarmup, endEpoch, endRound, startEpoch, startRoundTrain, withdrawAll } from './transitions.ts';
import { resultAdmitted } from './results.ts';
import { verdict } from './verification.ts';
import { allWitnessesIn, healthCheck, warmupWitness, witness } from './witnessing.ts';
import { currentRound } from './queries.ts';

const ENTROPY = /^(?:[0-9a-f]{2}){0,64}$/;

export function tick(state: CoordinatorState, event: CoordinatorEvent, now: number): TickResult {
  return tickIn(state, event, now, {});
}

/**
 * `tick` for a replica that may lack the evidence: `outcome` is what the host judged for a round this event
 * ends (replica/light-replica.ts); with `light`, ending a round without it is an error.
 */
export function tickIn(
  state: CoordinatorState,
  event: CoordinatorEvent,
  now: number,
  extra: Pick<Ctx, 'outcome' | 'light'>,
): TickResult {
  const effects: CoordinatorEffect[] = [];
  const ctx: Ctx = { now, effects, ...extra };
  if (!Number.isSafeInteger(now) || now < 0)
    return refuse(
      state,
      new CoordinatorError('BadEvent', `now must be whole unix seconds, got ${String(now)}`),
    );
  if (typeof event !== 'object' || event === null)
    return refuse(state, new CoordinatorError('BadEvent', 'event must be an object'));
  try {
    return dispatch(state, event, ctx);
  } catch (e) {
    // Only endRound throws, and only for a replica handed no (or a wrong) round outcome.
    if (e instanceof CoordinatorError) return refuse(state, e);
    throw e;
  }
}

function dispatch(state: CoordinatorState, event: CoordinatorEvent, ctx: Ctx): TickResult {
  const { effects } = ctx;
  const done = (next: CoordinatorState | CoordinatorError): TickResult =>
    next instanceof CoordinatorError ? refuse(state, next) : { state: next, effects };
  switch (event.type) {
    case 'tick': {
      let s = state;
      if (event.entropy !== undefined) {
        if (typeof event.entropy !== 'string' || !ENTROPY.test(event.entropy))
          return refuse(state, badEntropy());
        s = { ...s, entropy: event.entropy };
      }
      return { state: onTimer(s, ctx), effects };
    }
    case 'entropy':
      if (typeof event.entropy !== 'string' || !ENTROPY.test(event.entropy))
        return refuse(state, badEntropy());
      return { state: { ...state, entropy: event.entropy }, effects };
    case 'join':
      return done(join(state, event.id, event.p2p_id, ctx, event.origin, event.verifier_only));
    case 'leave':
      return done(leave(state, event.id, ctx));
    case 'eject': {
      const bad = checkId(event.id);
      if (bad) return refuse(state, bad);
      if (!isKnown(state, event.id))
        return refuse(
          state,
          new CoordinatorError('UnknownClient', `client ${event.id.slice(0, 12)}… is not in this run`),
        );
      return done(eject(state, event.id, String(event.reason ?? 'reported by the shell'), ctx));
    }
    case 'warmup_witness':
      return done(warmupWitness(state, event.id, ctx));
    case 'witness': {
      const r = witness(state, event, ctx);
      return r.error ? { state: r.state, effects, error: r.error } : { state: r.state, effects };
    }
    case 'result_admitted': {
      const bad = checkId(event.id);
      if (bad) return refuse(state, bad);
      const r = resultAdmitted(state, event, ctx);
      return r.error ? { state: r.state, effects, error: r.error } : { state: r.state, effects };
    }
    case 'verdict': {
      const bad = checkId(event.id);
      if (bad) return refuse(state, bad);
      return done(verdict(state, event, ctx));
    }
    case 'health_check':
      return done(healthCheck(state, event.id, event.checks, ctx));
    case 'pause':
      return done(pause(state, ctx));
    case 'resume':
      return done(resume(state, ctx));
    case 'update_config':
      return done(updateConfig(state, event.config, ctx));
    default:
      return refuse(
        state,
        new CoordinatorError('BadEvent', `unknown event type ${String((event as { type?: unknown }).type)}`),
      );
  }
}

function refuse(state: CoordinatorState, error: CoordinatorError): TickResult {
  return { state, effects: [], error };
}

function badEntropy(): CoordinatorError {
  return new CoordinatorError('BadEvent', 'entropy must be lowercase hex of at most 64 bytes');
}

function onTimer(state: CoordinatorState, ctx: Ctx): CoordinatorState {
  const c = state.config;
  switch (state.run_state) {
    case 'WaitingForMembers':
      if (
        state.members.filter((m) => m.verifier_only !== true).length >= c.init_min_clients &&
        timedOut(state, ctx.now, c.waiting_for_members_extra_time)
      )
        return startEpoch(state, ctx);
      return state;
    case 'Warmup':
      if (healthyCount(state) < c.min_clients) return abortWarmup(state, ctx);
      if (timedOut(state, ctx.now, c.warmup_time)) return startRoundTrain(state, ctx);
      return state;
    case 'RoundTrain': {
      // A witness that leaves can make the others all that is left to wait for.
      const round = currentRound(state);
      return timedOut(state, ctx.now, c.max_round_train_time) || (round !== null && allWitnessesIn(round))
        ? changeState(state, 'RoundWitness', ctx)
        : state;
    }
    case 'RoundWitness':
      return timedOut(state, ctx.now, c.round_witness_time) ? endRound(state, ctx) : state;
    case 'Cooldown':
      return timedOut(state, ctx.now, c.cooldown_time) ? endEpoch(state, ctx) : state;
    case 'Uninitialized':
    case 'Paused':
    case 'Finished':
      return state;
  }
}

function pause(state: CoordinatorState, ctx: Ctx): CoordinatorState | CoordinatorError {
  switch (state.run_state) {
    case 'Uninitialized':
    case 'Paused':
    case 'Finished':
      return new CoordinatorError('WrongPhase', `cannot pause a run that is ${state.run_state}`);
    case 'RoundTrain':
    case 'RoundWitness':
    case 'Cooldown':
      // Active: finish the round, cool down (so a checkpoint is written), then pause.
      if (state.pending_pause) return new CoordinatorError('WrongPhase', 'a pause is already pending');
      return { ...state, pending_pause: true };
    case 'WaitingForMembers':
    case 'Warmup':
      return changeState(
        withdrawAll({ ...state, epoch: { ...state.epoch, cold_start_epoch: true } }),
        'Paused',
        ctx,
      );
  }
}

function resume(state: CoordinatorState, ctx: Ctx): CoordinatorState | CoordinatorError {
  if (state.run_state !== 'Paused')
    return new CoordinatorError('WrongPhase', `only a Paused run can resume (run is ${state.run_state})`);
  return changeState(
    { ...state, pending_pause: false },
    state.progress.step >= state.config.total_steps ? 'Finished' : 'WaitingForMembers',
    ctx,
  );
}

function updateConfig(
  state: CoordinatorState,
  config: CoordinatorConfig,
  ctx: Ctx,
): CoordinatorState | CoordinatorError {
  if (state.run_state !== 'Paused' && state.run_state !== 'Uninitialized') {
    return new CoordinatorError(
      'WrongPhase',
      `config can only change while Paused or Uninitialized (run is ${state.run_state}); pause first`,
    );
  }
  const problems =
    typeof config === 'object' && config !== null
      ? checkCoordinatorConfig(config)
      : ['config must be an object'];
  if (problems.length > 0) return new CoordinatorError('InvalidConfig', problems.join('; '));
  ctx.effects.push({ type: 'ConfigUpdated' });
  const next: CoordinatorState = { ...state, config: { ...config } };
  // Psyche's only way out of Uninitialized is to become Paused with a config; resume then starts it.
  return state.run_state === 'Uninitialized' ? changeState(next, 'Paused', ctx) : next;
}
