// What an honest client tells the coordinator, computed from coordinator state alone: shared by the
// coordinator tests and the simulator benchmark. Results are not really trained: a trainer's "commitment"
// for a batch is SHA-256(step ‖ batch start ‖ batch end ‖ trainer id), enough to exercise blooms and
// consensus.
import { sha256 } from '@noble/hashes/sha2.js';
import {
  BloomFilter,
  currentRound,
  isWitness,
  participantItem,
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

const participantItems = new Map<string, Uint8Array>();
export function participantItemFor(id: string): Uint8Array {
  let item = participantItems.get(id);
  if (!item) {
    item = participantItem(hexBytes(id));
    participantItems.set(id, item);
  }
  return item;
}

/** What an honest witness of the current round received: the previous round's results from `alive` trainers. */
export function observedItems(
  state: CoordinatorState,
  alive: (id: string) => boolean,
): { participants: Uint8Array[]; commitments: Uint8Array[] } {
  const cur = currentRound(state);
  const prev = cur ? roundAtHeight(state, cur.height - 1) : null;
  const participants: Uint8Array[] = [];
  const commitments: Uint8Array[] = [];
  if (!prev) return { participants, commitments };
  for (const a of roundAssignments(state, prev)) {
    if (!alive(a.id)) continue;
    participants.push(participantItemFor(a.id));
    commitments.push(fakeCommitment(prev.step, a.batch.start, a.batch.end, a.id));
  }
  return { participants, commitments };
}

export function witnessEvent(
  state: CoordinatorState,
  round: Round,
  rosterIndex: number,
  observed: { participants: Uint8Array[]; commitments: Uint8Array[] },
  salt: Uint8Array,
): CoordinatorEvent {
  const clientIndex = round.roster[rosterIndex] as number;
  const fpr = state.config.bloom_false_positive_rate;
  return {
    type: 'witness',
    id: state.epoch.clients[clientIndex]!.id,
    step: round.step,
    proof: roundSelection(round).witnessProof(rosterIndex),
    participant_bloom: BloomFilter.of(observed.participants, fpr, salt).toData(),
    broadcast_bloom: BloomFilter.of(observed.commitments, fpr, salt).toData(),
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
  const observed = observedItems(state, seen);
  const submitted = new Set(round.witnesses.map((w) => w.index));
  const witnesses = roundSelection(round)
    .witnesses()
    .filter(
      (i) =>
        !submitted.has(i) &&
        isWitness(state, i, round) &&
        alive(state.epoch.clients[round.roster[i] as number]!.id),
    )
    .map((i) =>
      witnessEvent(
        state,
        round,
        i,
        observed,
        new Uint8Array([i & 0xff, (i >> 8) & 0xff, round.height & 0xff]),
      ),
    );
  // Admissions last: once every witness has submitted, the round may leave RoundTrain, and it still takes
  // results in RoundWitness.
  return [...witnesses, ...admissions];
}
