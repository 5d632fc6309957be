// Phase changes of the coordinator (docs/protocol.md "Phases and timers"), with the deliberate departures
// from Psyche marked "FIX (Psyche)". Every function returns a new state; arrays are copied only when they
// change.
import { effectiveWitnessCount } from '../selection/committee.ts';
import { roundBatchSize } from '../selection/batch-size.ts';
import { quorum } from '../witness/quorum.ts';
import { changeState, type Ctx } from './context.ts';
import { currentHeight, healthyCount, retireClients } from './membership.ts';
import { currentRound, liveWitnessCount, roundAtHeight, roundSelection } from './queries.ts';
import { queueUnattested, requeueUnapplied, takeRetries } from './retries.ts';
import { CoordinatorError } from './errors.ts';
import { applyRoundOutcome, judgeRound, outcomeShapeError, sameOutcome } from './round-outcome.ts';
import { deriveRoundSeed } from './seed.ts';
import { frozenTrust } from './trust.ts';
import type { CoordinatorState, EpochClient, Round } from '../state/coordinator-state.ts';

/** WaitingForMembers → Warmup: the first `max_clients` members form the epoch (FIX (Psyche): no 256 cap). */
export function startEpoch(state: CoordinatorState, ctx: Ctx): CoordinatorState {
  const clients: EpochClient[] = state.members.slice(0, state.config.max_clients).map((m) => ({
    id: m.id,
    p2p_id: m.p2p_id,
    ...(m.origin !== undefined ? { origin: m.origin } : {}),
    ...(m.verifier_only ? { verifier_only: true as const } : {}),
    state: 'Healthy',
    exited_height: -1,
  }));
  const next: CoordinatorState = {
    ...state,
    epoch: {
      clients,
      rounds: [],
      rounds_head: 0,
      start_step: state.progress.step,
      last_step: 0,
      start_timestamp: ctx.now,
      cold_start_epoch: state.epoch.cold_start_epoch,
      warmup_witnesses: [],
    },
  };
  ctx.effects.push({ type: 'EpochStarted', epoch: state.progress.epoch, clients: clients.length });
  return changeState(next, 'Warmup', ctx);
}

function pruneAttestations(round: Round): Round {
  if (round.witnesses.every((w) => w.attested === null)) return round;
  return { ...round, witnesses: round.witnesses.map((w) => ({ ...w, attested: null })) };
}

/** Opens the next round of the epoch (or its first) and enters RoundTrain. */
export function startRoundTrain(state: CoordinatorState, ctx: Ctx): CoordinatorState {
  const { epoch, config, progress } = state;
  const prev = epoch.rounds.length > 0 ? currentRound(state) : null;
  const height = prev ? prev.height + 1 : 0;
  // Consecutive rounds read consecutive samples; drain rounds have batch_size 0 so they consume nothing.
  const dataIndex = prev ? prev.data_index + prev.batch_size : progress.epoch_start_data_index;
  // FIX (Psyche): Psyche's drain rounds still consume steps *and* data indices, so their samples are never
  // trained. Here a drain round has no batch: the next epoch starts exactly where training stopped.
  const training = epoch.last_step === 0;
  const roster: number[] = [];
  const verifiers: number[] = [];
  epoch.clients.forEach((c, i) => {
    if (c.state === 'Healthy') (c.verifier_only === true ? verifiers : roster).push(i);
  });
  const open: Round = {
    height,
    step: progress.step,
    data_index: dataIndex,
    batch_size: 0,
    training,
    random_seed: deriveRoundSeed(state.run_seed, progress.epoch, progress.step, state.entropy),
    roster,
    witness_count: effectiveWitnessCount(config.witness_nodes, config.max_witnesses, roster.length),
    verification_percent: config.verification_percent,
    witnesses: [],
    retries: [],
    ...frozenTrust(state),
    ...(verifiers.length > 0 ? { verifiers } : {}),
  };
  // Retries first (coordinator/retries.ts): one whole interval per trainer, the first trainers of the shuffled
  // order; the rest split the fresh samples. Drain rounds train nothing, so they take no retries either.
  const trainers = training ? roundSelection(open).trainers().length : 0;
  const took = takeRetries(state, trainers);
  // With every trainer on a retry no fresh sample is read: batch_size 0 so the data index does not skip any.
  const freshTrainers = trainers - took.taken.length;
  const round: Round = {
    ...open,
    batch_size: training && freshTrainers > 0 ? roundBatchSize(config, dataIndex) : 0,
    retries: took.taken,
  };
  // Attestations are read for one round after they are submitted (consensus of round h-1's batches during
  // round h+1, health checks in round h+1); older ones only cost state size.
  const rounds = epoch.rounds.map((r) => (r.height < height - 1 ? pruneAttestations(r) : r));
  rounds[height % 4] = round;
  ctx.effects.push({
    type: 'RoundStarted',
    epoch: progress.epoch,
    step: round.step,
    height,
    random_seed: round.random_seed,
    data_index: dataIndex,
    batch_size: round.batch_size,
    training,
    clients: roster.length,
    retries: took.taken.length,
  });
  return changeState(
    { ...took.state, epoch: { ...epoch, rounds, rounds_head: height % 4 } },
    'RoundTrain',
    ctx,
  );
}

function epochTimedOut(state: CoordinatorState, now: number): boolean {
  const start = state.epoch.start_timestamp;
  return now !== start && now >= start + state.config.epoch_time;
}

/** RoundWitness timeout: close the round and start the next one or cool down. */
export function endRound(state: CoordinatorState, ctx: Ctx): CoordinatorState {
  const ended = currentRound(state);
  if (!ended) return changeState(state, 'Cooldown', ctx);
  // Round h's admitted record and round h−1's fate are final now: record them before anything reads them.
  // A light replica takes the host's outcome as given; a full one judges the evidence itself and, handed the
  // host's outcome too, checks it (a mismatch proves the host wrong). Thrown, and turned into a refusal by tickIn.
  const own = ctx.light ? null : judgeRound(state, ended);
  const outcome = own ?? ctx.outcome;
  if (!outcome || outcome.height !== ended.height)
    throw new CoordinatorError(
      'MissingOutcome',
      `ending round ${ended.height} needs the host's round outcome`,
    );
  const misshapen = own ? null : outcomeShapeError(state, ended, outcome);
  if (misshapen) throw new CoordinatorError('BadEvent', misshapen);
  if (own && ctx.outcome && !sameOutcome(own, ctx.outcome))
    throw new CoordinatorError(
      'OutcomeMismatch',
      `the host's outcome of round ${ended.height} is not the evidence's`,
    );
  const judged = applyRoundOutcome(state, outcome);
  const round = currentRound(judged) as Round;
  let next: CoordinatorState = {
    ...judged,
    progress: { ...judged.progress, step: judged.progress.step + 1 },
  };
  // FIX (Psyche): Psyche compares the submitted count with quorum(submitted count) when witness_nodes = 0, a
  // check that can never fail. The quorum here is always that of W, the witnesses selected for the round, less
  // those that left the epoch before they submitted (liveWitnessCount).
  const q = quorum(liveWitnessCount(round));
  const reached = round.witnesses.length >= q;
  ctx.effects.push({
    type: 'RoundEnded',
    step: round.step,
    height: round.height,
    witnesses: round.witnesses.length,
    quorum: q,
    quorum_reached: reached,
  });
  if (!reached) {
    // FIX (Psyche): Psyche withdraws *every* client when no witness submitted. The clients that made the round
    // fail are the selected witnesses that stayed silent; only they are dropped, and the epoch ends.
    const submitted = new Set(round.witnesses.map((w) => w.index));
    const silent = roundSelection(round)
      .witnesses()
      .filter((i) => !submitted.has(i))
      .map((i) => round.roster[i] as number);
    next = retireClients(next, silent, 'Dropped');
    for (const i of silent) {
      const c = next.epoch.clients[i];
      if (c && c.state === 'Dropped' && c.exited_height === round.height) {
        ctx.effects.push({
          type: 'ClientDropped',
          id: c.id,
          reason: 'selected witness stayed silent in a round that missed quorum',
        });
      }
    }
    return changeState(next, 'Cooldown', ctx);
  }
  const step = next.progress.step;
  if (next.epoch.last_step === 0 && (epochTimedOut(next, ctx.now) || step >= next.config.total_steps)) {
    // FIX (Psyche): Psyche sets last_step only "if >= 4" and ends the run abruptly at total_steps, losing the
    // last two rounds' results (they are applied two rounds later). Both paths now drain: two rounds without
    // training so that every trained round is witnessed and applied before Cooldown.
    next = { ...next, epoch: { ...next.epoch, last_step: step + 2 } };
  }
  if (next.epoch.last_step !== 0 && step >= next.epoch.last_step) return changeState(next, 'Cooldown', ctx);
  if (healthyCount(next) < next.config.min_clients || next.pending_pause)
    return changeState(next, 'Cooldown', ctx);
  // The epoch goes on, so round h-1 will be applied at the start of round h+1: queue its intervals that this
  // round's witnesses did not attest. (When the epoch ends instead, endEpoch rewinds h-1 and h; see retries.ts.)
  next = queueUnattested(next, round);
  return startRoundTrain(next, ctx);
}

/** Healthy epoch clients → Withdrawn (pause). They stay members and rejoin the next epoch. */
export function withdrawAll(state: CoordinatorState): CoordinatorState {
  const height = currentHeight(state);
  if (!state.epoch.clients.some((c) => c.state === 'Healthy')) return state;
  const clients = state.epoch.clients.map((c) =>
    c.state === 'Healthy' ? { ...c, state: 'Withdrawn' as const, exited_height: height } : c,
  );
  return { ...state, epoch: { ...state.epoch, clients } };
}

/**
 * Where the next epoch resumes reading data. Results of round h are applied at the start of round h+2
 * (docs/protocol.md "The two-round apply lag"), so when the epoch's last round is H, rounds H-1 and H were
 * never applied by anyone.
 * FIX (Psyche): Psyche resumes after round H, silently skipping those samples whenever an epoch ends early
 * (pause, lost quorum, too few clients). Resuming at round H-1's data index trains every sample exactly once;
 * after a normal drain H-1 is a drain round whose index is exactly where training stopped.
 */
function resumeDataIndex(state: CoordinatorState): number {
  const cur = currentRound(state);
  if (!cur) return state.progress.epoch_start_data_index;
  const firstUnapplied = roundAtHeight(state, Math.max(0, cur.height - 1)) ?? cur;
  return firstUnapplied.data_index;
}

/** Cooldown timeout: close the epoch. */
export function endEpoch(state: CoordinatorState, ctx: Ctx): CoordinatorState {
  ctx.effects.push({ type: 'EpochEnded', epoch: state.progress.epoch, success: true });
  // resumeDataIndex rewinds the fresh samples of the last two rounds; their retries go back on the queue.
  const last = currentRound(state);
  const requeued = last ? requeueUnapplied(state, last) : state;
  let next: CoordinatorState = {
    ...requeued,
    progress: {
      ...requeued.progress,
      epoch: state.progress.epoch + 1,
      epoch_start_data_index: resumeDataIndex(state),
    },
  };
  if (next.pending_pause) {
    next = withdrawAll({ ...next, pending_pause: false, epoch: { ...next.epoch, cold_start_epoch: true } });
    return changeState(next, 'Paused', ctx);
  }
  next = { ...next, epoch: { ...next.epoch, cold_start_epoch: false } };
  return changeState(
    next,
    next.progress.step >= next.config.total_steps ? 'Finished' : 'WaitingForMembers',
    ctx,
  );
}

/** Warmup ends without a round (too few clients left): back to waiting, nothing consumed. */
export function abortWarmup(state: CoordinatorState, ctx: Ctx): CoordinatorState {
  ctx.effects.push({ type: 'EpochEnded', epoch: state.progress.epoch, success: false });
  return changeState(
    state,
    state.progress.step >= state.config.total_steps ? 'Finished' : 'WaitingForMembers',
    ctx,
  );
}
