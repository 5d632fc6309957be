// The protocol's rules for what a client sends its coordinator host: each function turns one decoded message
// plus the coordinator state into the coordinator event to feed `tick`, or a typed refusal. The relay's
// session and the in-process hub call these and nothing else, so "who may submit what, when" is written once.
// Checks run cheapest first (run, identity, round, assignee, shape) so that a flood of junk costs no
// signature verification.
import type { CoordinatorEvent } from '../coordinator/events.ts';
import {
  openRoundByStep,
  resultRoundByStep,
  roundAdmitted,
  roundAssignments,
} from '../coordinator/queries.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import type { BatchId } from '../selection/data-assignment.ts';
import { bytesToHex } from '../crypto/bytes.ts';
import { checkJoinPow } from '../crypto/join-pow.ts';
import type { Announce } from '../wire/announce.ts';
import { verifyAnnounce } from '../wire/announce.ts';
import type { SignedResult } from '../wire/commitment.ts';
import { verifySignedResult } from '../wire/commitment.ts';
import { WireError } from '../wire/errors.ts';
import type { WireLimits } from '../wire/limits.ts';
import { DEFAULT_WIRE_LIMITS } from '../wire/limits.ts';
import type { Join, Leave } from '../wire/membership.ts';
import { verifyJoin } from '../wire/membership.ts';
import type { HealthCheck, WitnessMessage } from '../wire/witness.ts';
import type { WarmupWitness } from '../wire/warmup-witness.ts';
import type { Verdict } from '../wire/verdict.ts';
import { ProtocolRefusal } from './refusal.ts';
import { checkResultShape, type ResultSpec } from './result-shape.ts';
import { conclusiveFailure } from './verification.ts';

type EventOf<T extends CoordinatorEvent['type']> = Extract<CoordinatorEvent, { type: T }>;

/**
 * A Join whose (signed) device kind starts with this joins to verify only (`node-trainer verify`): the
 * coordinator never puts it in a round's roster and draws it as a verifier (docs/protocol.md "Trust").
 */
export const VERIFY_ONLY_DEVICE_PREFIX = 'verify-only ';

function checkRun(state: CoordinatorState, runId: string): ProtocolRefusal | null {
  return runId === state.run_id
    ? null
    : new ProtocolRefusal('wrong_run', `the message names run '${runId}', this is '${state.run_id}'`);
}

function signatureRefusal(e: unknown): ProtocolRefusal {
  if (e instanceof WireError) return new ProtocolRefusal('bad_signature', e.message);
  throw e;
}

/**
 * A join: the proof of work the connection's challenge asked for (`powBits`; cheap to check, so first), the
 * signature over the challenge, then the coordinator's `join` event, with the host's `origin` tag of where
 * it came from (protocol/origin.ts) when it has one.
 */
export function joinEvent(
  state: CoordinatorState,
  j: Join,
  challenge: Uint8Array,
  powBits = 0,
  origin?: string,
): EventOf<'join'> | ProtocolRefusal {
  const wrong = checkRun(state, j.runId);
  if (wrong) return wrong;
  if (!checkJoinPow(challenge, j.pubkey, j.powNonce, powBits))
    return new ProtocolRefusal(
      'insufficient_work',
      `the join's proof of work does not reach the ${powBits} bits this run asks (solveJoinPow)`,
    );
  try {
    verifyJoin(j, challenge);
  } catch (e) {
    return signatureRefusal(e);
  }
  const id = bytesToHex(j.pubkey);
  // A client without libp2p is reachable by its coordinator id only.
  const p2p_id = j.p2pPeerId === '' ? id : j.p2pPeerId;
  return {
    type: 'join',
    id,
    p2p_id,
    ...(origin !== undefined ? { origin } : {}),
    ...(j.deviceKind.startsWith(VERIFY_ONLY_DEVICE_PREFIX) ? { verifier_only: true as const } : {}),
  };
}

export function leaveEvent(
  state: CoordinatorState,
  sender: string,
  l: Leave,
): EventOf<'leave'> | ProtocolRefusal {
  return checkRun(state, l.runId) ?? { type: 'leave', id: sender };
}

export interface ResultAdmission {
  commitment: Uint8Array;
  /** What the host feeds `tick` once it stored the result (it is the host's delivery record). */
  event: EventOf<'result_admitted'>;
}

/**
 * A SignedResult from `sender`: its own, for a batch assigned to it in the round in progress, fitting the run's model
 * (`spec`; null skips that check, for hosts that do not know the model), with a signature and commitment
 * that verify. Duplicates and equivocation are the coordinator's to judge (it holds the admitted record).
 */
export function admitResult(
  state: CoordinatorState,
  sender: string,
  signed: SignedResult,
  spec: ResultSpec | null,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): ResultAdmission | ProtocolRefusal {
  const { envelope, result } = signed;
  const wrong = checkRun(state, result.runId);
  if (wrong) return wrong;
  if (bytesToHex(envelope.from) !== sender)
    return new ProtocolRefusal(
      'bad_signature',
      'envelope.from is not the identity that joined this connection',
    );
  const round = resultRoundByStep(state, result.step);
  if (!round) {
    const stored = state.epoch.rounds.some((r) => r.step === result.step);
    return stored
      ? new ProtocolRefusal('round_closed', `step ${result.step} has ended and takes no more results`, false)
      : new ProtocolRefusal('unknown_round', `no round in progress has step ${result.step}`, false);
  }
  const mine = roundAssignments(state, round).some(
    (a) => a.id === sender && sameBatch(a.batch, result.batch),
  );
  if (!mine)
    return new ProtocolRefusal(
      'not_assignee',
      `batch ${result.batch.start}..${result.batch.end} of step ${result.step} is not assigned to this client`,
    );
  if (spec) {
    const misfit = checkResultShape(result, spec);
    if (misfit) return misfit;
  }
  let commitment: Uint8Array;
  try {
    commitment = verifySignedResult(envelope, result, limits);
  } catch (e) {
    return signatureRefusal(e);
  }
  return {
    commitment,
    event: {
      type: 'result_admitted',
      id: sender,
      step: result.step,
      batch: { start: result.batch.start, end: result.batch.end },
      commitment: bytesToHex(commitment),
    },
  };
}

/** What the host holds of a submitted result, for checking announces against it. */
export interface SubmittedResult {
  sender: string;
  step: number;
  batch: BatchId;
  /** Hex. */
  commitment: string;
  /** Size of its TrainingResult frame (core's trainingResultBytesOf the SignedResult frame). */
  trainingResultBytes: number;
}

/**
 * An announce of a result `sender` already submitted (`submitted`: the host's copy of the result the
 * announce's commitment names, if any). The host forwards it unchanged to every peer: it is the trainer's own
 * signed claim, which peers need to fetch the payload from anyone.
 */
export function admitAnnounce(
  state: CoordinatorState,
  sender: string,
  a: Announce,
  submitted: SubmittedResult | undefined,
): ProtocolRefusal | null {
  const wrong = checkRun(state, a.runId);
  if (wrong) return wrong;
  if (bytesToHex(a.from) !== sender)
    return new ProtocolRefusal(
      'bad_signature',
      'announce.from is not the identity that joined this connection',
    );
  if (!submitted || submitted.sender !== sender)
    return new ProtocolRefusal(
      'unknown_result',
      'send the SignedResult of this commitment before announcing it',
    );
  if (
    submitted.step !== a.step ||
    !sameBatch(submitted.batch, a.batch) ||
    submitted.commitment !== bytesToHex(a.commitment) ||
    submitted.trainingResultBytes !== a.size
  )
    return new ProtocolRefusal(
      'announce_mismatch',
      'the announce claims a step, batch or size the submitted result does not have',
    );
  try {
    verifyAnnounce(a);
  } catch (e) {
    return signatureRefusal(e);
  }
  return null;
}

/** A round witness. The coordinator checks the proof, the step and the attestation (and strikes liars). */
export function witnessEvent(sender: string, w: WitnessMessage): EventOf<'witness'> {
  return {
    type: 'witness',
    id: sender,
    step: w.step,
    proof: w.proof,
    attested: w.attested,
    broadcast_merkle: bytesToHex(w.broadcastMerkle),
  };
}

/** A warmup witness ("my model is loaded") for the epoch that is warming up. */
export function warmupWitnessEvent(
  state: CoordinatorState,
  sender: string,
  m: WarmupWitness,
): EventOf<'warmup_witness'> | ProtocolRefusal {
  const wrong = checkRun(state, m.runId);
  if (wrong) return wrong;
  if (m.epoch !== state.progress.epoch)
    return new ProtocolRefusal(
      'stale',
      `warmup witness for epoch ${m.epoch}; the run is in epoch ${state.progress.epoch}`,
      false,
    );
  return { type: 'warmup_witness', id: sender };
}

/**
 * A health check of the open round: each report names a client by its index in the epoch's client list
 * (the coordinator then checks the committee proof names that client and judges it).
 */
export function healthCheckEvent(
  state: CoordinatorState,
  sender: string,
  h: HealthCheck,
): EventOf<'health_check'> | ProtocolRefusal {
  const open = openRoundByStep(state, h.step);
  if (!open || open.height !== state.epoch.rounds[state.epoch.rounds_head]?.height)
    return new ProtocolRefusal(
      'stale',
      `health check for step ${h.step}, which is not the open round`,
      false,
    );
  const clients = state.epoch.clients;
  const checks: { id: string; proof: HealthCheck['reports'][number]['committeeProof'] }[] = [];
  for (const r of h.reports) {
    const client = clients[r.clientIndex];
    if (!client)
      return new ProtocolRefusal(
        'bad_report',
        `client index ${r.clientIndex} is not in this epoch (${clients.length} clients)`,
      );
    checks.push({ id: client.id, proof: r.committeeProof });
  }
  return { type: 'health_check', id: sender, checks };
}

/**
 * A verifier's verdict on a sampled result of the round before the open one. The commitment must be the one
 * the host admitted for that batch (a verdict on anything else checks nothing); the coordinator then checks
 * the sender is one of that result's verifiers.
 */
export function verdictEvent(
  state: CoordinatorState,
  sender: string,
  v: Verdict,
): EventOf<'verdict'> | ProtocolRefusal {
  const wrong = checkRun(state, v.runId);
  if (wrong) return wrong;
  const round = openRoundByStep(state, v.step);
  const slot = round ? roundAssignments(state, round).findIndex((a) => sameBatch(a.batch, v.batch)) : -1;
  const admitted = round && slot >= 0 ? (roundAdmitted(round)[slot] ?? null) : null;
  if (admitted === null || admitted !== bytesToHex(v.commitment))
    return new ProtocolRefusal(
      'stale',
      `no admitted result ${bytesToHex(v.commitment).slice(0, 16)}… for that batch of step ${v.step}`,
      false,
    );
  return {
    type: 'verdict',
    id: sender,
    step: v.step,
    batch: { start: v.batch.start, end: v.batch.end },
    pass: v.pass,
    // Only a failing verdict can be conclusive; the field is left out otherwise (as in older logs). A
    // conclusive one carries its measurements: the evidence a qualified verifier's recomputation checks.
    ...(!v.pass && conclusiveFailure(v)
      ? {
          conclusive: true,
          evidence: [scaled(v.fingerprintAgreement), scaled(v.updateAgreement)] as [number, number],
        }
      : {}),
  };
}

/** An agreement in [−1, 1] as the integer evidence the coordinator stores (×10 000, rounded, clamped). */
function scaled(x: number): number {
  const v = Math.round(x * 10_000);
  return Math.max(-10_000, Math.min(10_000, Number.isFinite(v) ? v : 0));
}

function sameBatch(a: BatchId, b: BatchId): boolean {
  return a.start === b.start && a.end === b.end;
}
