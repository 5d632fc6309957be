// What an honest client tells the coordinator, computed from coordinator state alone: shared by the
// coordinator tests and the simulator benchmark. Results are not really trained: a trainer's "commitment"
// for a batch is SHA-256(step ‖ batch start ‖ batch end ‖ trainer id), enough to exercise attestations and
// consensus.
import { sha256 } from '@noble/hashes/sha2.js';
import {
  attestationOf,
  currentRound,
  isWitness,
  roundAdmitted,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  type CoordinatorEvent,
  type CoordinatorState,
  type Round,
} from '../../packages/core/src/index.ts';

export function clientId(i: number): string {
  return bytesHex(sha256(new TextEncoder().encode(`meshtrain-sim-client-${i}`)));
}

export function bytesHex(b: Uint8Array): string {
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}

export function hexBytes(h: string): Uint8Array {
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function fakeCommitment(step: number, start: number, end: number, id: string): Uint8Array {
  return sha256(new TextEncoder().encode(`${step}:${start}:${end}:${id}`));
}

/**
 * What an honest witness of the current round attests: the previous round's result slots of the trainers it
 * received a result from (`alive`). Its commitment is the one the host admitted, if the host admitted any.
 */
export function observedSlots(state: CoordinatorState, alive: (id: string) => boolean): Uint8Array {
  const cur = currentRound(state);
  const prev = cur ? roundAtHeight(state, cur.height - 1) : null;
  if (!prev) return new Uint8Array(0);
  const assignments = roundAssignments(state, prev);
  return attestationOf(assignments.length, (slot) => alive(assignments[slot]!.id));
}

export function witnessEvent(
  state: CoordinatorState,
  round: Round,
  rosterIndex: number,
  attested: Uint8Array,
): CoordinatorEvent {
  const clientIndex = round.roster[rosterIndex] as number;
  return {
    type: 'witness',
    id: state.epoch.clients[clientIndex]!.id,
    step: round.step,
    proof: roundSelection(round).witnessProof(rosterIndex),
    attested,
  };
}

/**
 * The host's `result_admitted` events for the open round's results of the trainers that `delivered` them and
 * are not admitted yet: what an honest relay records as those results reach it (a round takes results until
 * it ends; the next round's witnesses attest them).
 */
export function honestAdmissionEvents(
  state: CoordinatorState,
  delivered: (id: string) => boolean,
): CoordinatorEvent[] {
  const prev = currentRound(state);
  if (!prev || (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness')) return [];
  const admitted = roundAdmitted(prev);
  return roundAssignments(state, prev).flatMap((a, i) =>
    (admitted[i] ?? null) === null && delivered(a.id)
      ? [
          {
            type: 'result_admitted' as const,
            id: a.id,
            step: prev.step,
            batch: { start: a.batch.start, end: a.batch.end },
            commitment: bytesHex(fakeCommitment(prev.step, a.batch.start, a.batch.end, a.id)),
          },
        ]
      : [],
  );
}

/**
 * What an honest host and the honest witnesses of the current round would send: the `alive` witnesses'
 * reports of the previous round's results of the trainers that are `seen` (by default: alive ones), then the
 * admissions of the open round's results that were `delivered` (by default: by alive trainers).
 */
export function honestWitnessEvents(
  state: CoordinatorState,
  alive: (id: string) => boolean = () => true,
  seen: (id: string) => boolean = alive,
  delivered: (id: string) => boolean = alive,
): CoordinatorEvent[] {
  const round = currentRound(state);
  if (!round || (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness')) return [];
  const admissions = honestAdmissionEvents(state, delivered);
  const observed = observedSlots(state, seen);
  const submitted = new Set(round.witnesses.map((w) => w.index));
  const witnesses = roundSelection(round)
    .witnesses()
    .filter(
      (i) =>
        !submitted.has(i) &&
        isWitness(state, i, round) &&
        alive(state.epoch.clients[round.roster[i] as number]!.id),
    )
    .map((i) => witnessEvent(state, round, i, observed));
  // Admissions last: once every witness has submitted, the round may leave RoundTrain, and it still takes
  // results in RoundWitness.
  return [...witnesses, ...admissions];
}
