// warmup_witness, witness and health_check events (docs/protocol.md "Phases and timers",
// "Witnesses and quorum", "Health checks and client removal").
import type { CommitteeProof, WitnessProof } from '../selection/committee.ts';
import { effectiveWitnessCount } from '../selection/committee.ts';
import { checkAttestation } from '../witness/attestation.ts';
import { WitnessError } from '../witness/errors.ts';
import { quorum } from '../witness/quorum.ts';
import { CoordinatorError } from './errors.ts';
import { checkId, healthyCount, retireClients, strike } from './membership.ts';
import {
  currentRound,
  liveWitnessCount,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  withRound,
  type RoundAssignment,
} from './queries.ts';
import { aliveFromEvidence, aliveSlots, seenAlive } from './round-outcome.ts';
import type { CoordinatorState, Round, WitnessRecord } from '../state/coordinator-state.ts';
import { roundAttestations, toBase64 } from './stored-attestation.ts';
import { changeState, type Ctx } from './context.ts';
import { startRoundTrain } from './transitions.ts';
import { isHex32 } from '../crypto/bytes.ts';

function healthyClient(state: CoordinatorState, id: string): number | CoordinatorError {
  const bad = checkId(id);
  if (bad) return bad;
  const i = state.epoch.clients.findIndex((c) => c.id === id);
  if (i < 0)
    return new CoordinatorError('UnknownClient', `client ${id.slice(0, 12)}… is not in the current epoch`);
  if (state.epoch.clients[i]?.state !== 'Healthy')
    return new CoordinatorError(
      'NotHealthy',
      `client ${id.slice(0, 12)}… is ${state.epoch.clients[i]?.state}, not Healthy`,
    );
  return i;
}

export function warmupWitness(
  state: CoordinatorState,
  id: string,
  ctx: Ctx,
): CoordinatorState | CoordinatorError {
  if (state.run_state !== 'Warmup')
    return new CoordinatorError(
      'WrongPhase',
      `warmup_witness is only accepted in Warmup (run is ${state.run_state})`,
    );
  const i = healthyClient(state, id);
  if (typeof i !== 'number') return i;
  if (state.epoch.warmup_witnesses.includes(i))
    return new CoordinatorError('DuplicateWitness', 'this client already sent warmup_witness');
  const next: CoordinatorState = {
    ...state,
    epoch: { ...state.epoch, warmup_witnesses: [...state.epoch.warmup_witnesses, i] },
  };
  const healthy = healthyCount(next);
  const w = effectiveWitnessCount(next.config.witness_nodes, next.config.max_witnesses, healthy);
  // A verify-only client's warmup witness says it is ready; the round waits for the trainers'.
  const ready = next.epoch.warmup_witnesses.filter((k) => next.epoch.clients[k]?.verifier_only !== true);
  if (healthy >= next.config.min_clients && ready.length >= w) return startRoundTrain(next, ctx);
  return next;
}

function isProofShape(p: unknown): p is WitnessProof {
  const o = p as WitnessProof | null;
  return (
    typeof o === 'object' &&
    o !== null &&
    Number.isInteger(o.position) &&
    Number.isInteger(o.index) &&
    typeof o.witness === 'boolean'
  );
}

export interface WitnessSubmission {
  id: string;
  step: number;
  proof: WitnessProof;
  attested: Uint8Array;
  broadcast_merkle?: string;
}

export function witness(
  state: CoordinatorState,
  sub: WitnessSubmission,
  ctx: Ctx,
): { state: CoordinatorState; error?: CoordinatorError } {
  if (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness') {
    return {
      state,
      error: new CoordinatorError(
        'WrongPhase',
        `witness is only accepted in RoundTrain or RoundWitness (run is ${state.run_state})`,
      ),
    };
  }
  const round = currentRound(state);
  if (!round) return { state, error: new CoordinatorError('WrongPhase', 'no round is open') };
  if (sub.step !== round.step) {
    return {
      state,
      error: new CoordinatorError(
        'StaleRound',
        `witness is for step ${String(sub.step)} but the open round is step ${round.step}`,
      ),
    };
  }
  const clientIndex = healthyClient(state, sub.id);
  if (typeof clientIndex !== 'number') return { state, error: clientIndex };
  const penalise = (code: 'BadProof' | 'NotAWitness' | 'BadAttestation', message: string) => ({
    state: strike(state, sub.id, message, ctx),
    error: new CoordinatorError(code, message),
  });
  if (!isProofShape(sub.proof))
    return penalise('BadProof', 'witness proof must be {position, index, witness}');
  if (round.roster[sub.proof.index] !== clientIndex)
    return penalise('BadProof', `proof index ${sub.proof.index} is not the sender's slot in this round`);
  if (!roundSelection(round).verifyWitnessProof(sub.proof))
    return penalise('BadProof', 'witness proof does not match the round seed');
  if (!sub.proof.witness) return penalise('NotAWitness', 'the sender is not a witness of this round');
  if (round.witnesses.some((w) => w.index === sub.proof.index)) {
    return {
      state,
      error: new CoordinatorError('DuplicateWitness', 'this witness already submitted for the round'),
    };
  }
  if (sub.broadcast_merkle !== undefined && !isHex32(sub.broadcast_merkle)) {
    return {
      state,
      error: new CoordinatorError('BadEvent', 'broadcast_merkle must be 64 lowercase hex digits'),
    };
  }
  // The attestation covers the previous round's result slots, whose admitted record is final since this
  // round opened. No saturation rule is needed (unlike Psyche's blooms): a set bit can only vote for the one
  // commitment the host admitted for that slot, or, where the host admitted none, count towards the slot's
  // trainer being seen alive, which takes quorum(W) witnesses (docs/protocol.md "Witnesses and quorum").
  const prev = roundAtHeight(state, round.height - 1);
  const slots = prev ? roundAssignments(state, prev).length : 0;
  try {
    checkAttestation(sub.attested, slots);
  } catch (e) {
    if (e instanceof WitnessError) return penalise('BadAttestation', e.message);
    throw e;
  }
  const record: WitnessRecord = {
    index: sub.proof.index,
    attested: toBase64(sub.attested),
    broadcast_merkle: sub.broadcast_merkle ?? null,
  };
  return { state: recordWitness(state, round, record, sub.id, ctx) };
}

function recordWitness(
  state: CoordinatorState,
  round: Round,
  record: WitnessRecord,
  id: string,
  ctx: Ctx,
): CoordinatorState {
  const updated: Round = { ...round, witnesses: [...round.witnesses, record] };
  let next = withRound(state, updated);
  ctx.effects.push({ type: 'WitnessAccepted', step: round.step, index: record.index, id });
  // Opportunistic witnessing: once every witness that still can has spoken there is nothing left to wait for.
  if (next.run_state === 'RoundTrain' && allWitnessesIn(updated))
    next = changeState(next, 'RoundWitness', ctx);
  return next;
}

/**
 * Whether every selected witness of `round` that is still in the epoch has submitted (at least one has): the
 * train phase need not wait any longer (tick.ts checks it on the timer too, for witnesses that leave).
 */
export function allWitnessesIn(round: Round): boolean {
  return round.witnesses.length > 0 && round.witnesses.length >= liveWitnessCount(round);
}

/**
 * A light replica's record of a witness the host accepted (replica/light-replica.ts): the witness's roster
 * index without its attestation, which only the host and full replicas keep. Checked for what the replica
 * can check itself — the open round, a selected witness, not yet recorded.
 */
export function witnessSeen(
  state: CoordinatorState,
  step: number,
  index: number,
  ctx: Ctx,
): CoordinatorState | CoordinatorError {
  if (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness')
    return new CoordinatorError('WrongPhase', `no round takes witnesses (run is ${state.run_state})`);
  const round = currentRound(state);
  if (!round || round.step !== step)
    return new CoordinatorError('StaleRound', `witness_seen is for step ${String(step)}, not the open round`);
  if (
    !Number.isInteger(index) ||
    index < 0 ||
    index >= round.roster.length ||
    !roundSelection(round).isWitness(index)
  )
    return new CoordinatorError(
      'NotAWitness',
      `roster index ${String(index)} is not a witness of this round`,
    );
  if (round.witnesses.some((w) => w.index === index))
    return new CoordinatorError('DuplicateWitness', 'this witness is already recorded for the round');
  const id = state.epoch.clients[round.roster[index] as number]?.id ?? '';
  return recordWitness(state, round, { index, attested: null, broadcast_merkle: null }, id, ctx);
}

function isCommitteeProofShape(p: unknown): p is CommitteeProof {
  const o = p as CommitteeProof | null;
  return (
    typeof o === 'object' &&
    o !== null &&
    Number.isInteger(o.position) &&
    Number.isInteger(o.index) &&
    typeof o.committee === 'string'
  );
}

/**
 * Trainers of round h−2 that the witnesses of the open round h should report: Healthy, assigned samples, and
 * with no sign their result got through — the host admitted none and fewer than quorum(W) of round h−1's
 * witnesses saw them. The coordinator applies the same test to every accusation, so an honest witness's
 * report is never refused.
 */
export function unhealthyTrainers(state: CoordinatorState): RoundAssignment[] {
  const cur = currentRound(state);
  if (!cur || cur.height < 2) return [];
  const judged = roundAtHeight(state, cur.height - 2);
  const attesting = roundAtHeight(state, cur.height - 1);
  if (!judged || !attesting) return [];
  // The recorded outcome (round h−1 has ended, so it is there); a light replica has nothing else.
  const alive = aliveSlots(state, judged.height) ?? aliveFromEvidence(state, judged, attesting);
  return roundAssignments(state, judged).filter(
    (a, slot) => state.epoch.clients[a.client_index]?.state === 'Healthy' && !alive[slot],
  );
}

/**
 * Accusations against trainers whose results did not get through
 * (docs/protocol.md "Health checks and client removal"). In round h the judged round is h−2 and the evidence
 * is the host's admitted record of it plus the attestations of round h−1's witnesses. All-or-nothing as
 * in Psyche: if any reported client is healthy the whole report is refused. FIX (Psyche): only witnesses of
 * the open round may accuse, a trainer whose result the host admitted cannot be accused at all, and a client
 * is dropped only once quorum(W) distinct witnesses accused it — one liar (or one identity per liar short of
 * a quorum) cannot drop anyone.
 */
export function healthCheck(
  state: CoordinatorState,
  reporter: string,
  checks: ReadonlyArray<{ id: string; proof: CommitteeProof }>,
  ctx: Ctx,
): CoordinatorState | CoordinatorError {
  if (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness') {
    return new CoordinatorError(
      'WrongPhase',
      `health_check is only accepted in RoundTrain or RoundWitness (run is ${state.run_state})`,
    );
  }
  const cur = currentRound(state);
  if (!cur || cur.height < 2)
    return new CoordinatorError('TooEarly', 'health checks need two completed rounds in this epoch');
  const r = healthyClient(state, reporter);
  if (typeof r !== 'number') return r;
  const accuser = cur.roster.indexOf(r);
  if (accuser < 0 || !roundSelection(cur).isWitness(accuser))
    return new CoordinatorError('NotAWitness', 'only witnesses of the open round report health');
  if (!Array.isArray(checks) || checks.length === 0)
    return new CoordinatorError('BadEvent', 'health_check needs a non-empty list of checks');
  const judged = roundAtHeight(state, cur.height - 2);
  const attesting = roundAtHeight(state, cur.height - 1);
  if (!judged || !attesting)
    return new CoordinatorError('TooEarly', 'the rounds this check refers to are gone');
  const sel = roundSelection(judged);
  const assignments = roundAssignments(state, judged);
  const attestations = roundAttestations(attesting);
  const accused: number[] = [];
  for (const check of checks) {
    const proof = check?.proof;
    if (!isCommitteeProofShape(proof) || !sel.verifyCommitteeProof(proof))
      return new CoordinatorError('BadProof', 'a committee proof does not match the judged round');
    const clientIndex = judged.roster[proof.index] as number;
    const client = state.epoch.clients[clientIndex];
    if (!client || client.id !== check.id)
      return new CoordinatorError(
        'BadProof',
        `committee proof index ${proof.index} does not belong to ${String(check.id).slice(0, 12)}…`,
      );
    // FIX (Psyche): Psyche judges anyone in the round, so a trainer that was assigned no samples (batch
    // smaller than the trainer count) or a non-trainer "fails" and is dropped for sending nothing.
    const slot = assignments.findIndex((a) => a.index === proof.index);
    if (proof.committee !== 'Trainer' || slot < 0) {
      return new CoordinatorError(
        'NotJudgeable',
        `client ${check.id.slice(0, 12)}… had no batch in the judged round`,
      );
    }
    if (client.state !== 'Healthy') continue;
    if (seenAlive(judged, attesting, attestations, slot)) {
      return new CoordinatorError(
        'ClientIsHealthy',
        `client ${check.id.slice(0, 12)}… delivered its result (admitted by the host or seen by a witness quorum)`,
      );
    }
    if (!accused.includes(clientIndex)) accused.push(clientIndex);
  }
  // Against all W, not liveWitnessCount: an accuser that leaves the epoch after accusing would otherwise lower
  // the bar for the accusers that stay.
  const need = quorum(cur.witness_count);
  const accusations = (cur.accusations ?? []).map((a) => ({ client_index: a.client_index, by: a.by }));
  const drop: number[] = [];
  for (const clientIndex of accused) {
    let entry = accusations.find((a) => a.client_index === clientIndex);
    if (!entry) accusations.push((entry = { client_index: clientIndex, by: [] }));
    if (!entry.by.includes(accuser)) entry.by = [...entry.by, accuser];
    if (entry.by.length >= need) drop.push(clientIndex);
  }
  const next = retireClients(withRound(state, { ...cur, accusations }), drop, 'Dropped');
  for (const i of new Set(drop))
    ctx.effects.push({
      type: 'ClientDropped',
      id: state.epoch.clients[i]!.id,
      reason: `health check: results not delivered, reported by ${need} witnesses`,
    });
  return next;
}
