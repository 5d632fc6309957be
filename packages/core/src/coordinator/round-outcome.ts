// What becomes final when a round's witness phase ends, recorded in the state as decisions rather than
// re-derived from evidence by every reader (docs/protocol.md "Round outcomes and light replicas").
//
// When round h ends, two things can no longer change: round h's admitted record (results are taken only while
// their round is open) and the fate of round h−1's results (its attesting round h took its last witness, its
// verifiers reported during h, and a cheat confirmed later is excluded by replayExclusions, not here). The
// coordinator judges both from the evidence at that moment — the host's admitted commitments, round h's
// attestations, the verdicts, the epoch's cheats — and stores the outcome: bitmaps over the rounds' result
// slots. (The address under which peers serve the round's admitted list is a replica's concern, derived from
// the commitments: replica/admitted-lists.ts.) Everything that runs later (the retry queue, apply) reads the outcome, so a replica that holds the outcome but not the
// evidence takes the same decisions.
import { attestationOf, attests, checkAttestation } from '../witness/attestation.ts';
import { healthScore } from '../witness/health.ts';
import { quorum } from '../witness/quorum.ts';
import {
  acceptedByEvidence,
  liveWitnessCount,
  roundAdmitted,
  roundAssignments,
  roundAtHeight,
  slotJudgement,
  withRound,
} from './queries.ts';
import { isTrusted, qualifiedIn, withTrust } from './trust.ts';
import type { CoordinatorState, Round } from '../state/coordinator-state.ts';
import { loadSlotBits, roundAttestations, toBase64 } from './stored-attestation.ts';

export interface RoundOutcome {
  /** Height of the round that ended. */
  height: number;
  /** Its slots (in `roundAssignments` order) with an admitted result: base64, attestation bit layout. */
  admitted_bits: string;
  /** The round before it: the slots every peer applies (base64 bitmap), or null when the ring holds no such round. */
  accepted_bits: string | null;
  /**
   * The round before it: the slots whose trainer got through — admitted, or seen by a quorum of the ended
   * round's witnesses — which health checks may not accuse (coordinator/witnessing.ts); null as above.
   */
  alive_bits: string | null;
  /**
   * In an anchored run (the ended round has a frozen `qualified` list), the round before it: the slots a
   * qualified verifier passed and the slots one failed (`slotJudgement`), which extend the trainers' records
   * (`state.trust`). Absent or null otherwise.
   */
  vetted_bits?: string | null;
  struck_bits?: string | null;
}

/** The outcome of round `ended` (the current round, at its witness timeout), from the evidence in `state`. */
export function judgeRound(state: CoordinatorState, ended: Round): RoundOutcome {
  const slots = roundAssignments(state, ended).length;
  const admitted = roundAdmitted(ended);
  const judged = roundAtHeight(state, ended.height - 1);
  let accepted_bits: string | null = null;
  let alive_bits: string | null = null;
  let trust: Pick<RoundOutcome, 'vetted_bits' | 'struck_bits'> = {};
  if (judged) {
    const accepted = acceptedByEvidence(state, judged.height) ?? [];
    accepted_bits = toBase64(attestationOf(accepted.length, (i) => accepted[i]?.commitment != null));
    const alive = aliveFromEvidence(state, judged, ended);
    alive_bits = toBase64(attestationOf(alive.length, (i) => alive[i] === true));
    if (ended.qualified !== undefined) {
      const verdicts = judged.verdicts ?? [];
      const n = roundAssignments(state, judged).length;
      const judgement = Array.from({ length: n }, (_, slot) =>
        slotJudgement(
          state,
          ended,
          verdicts.filter((v) => v.slot === slot),
        ),
      );
      const qualifiedVerdict = (slot: number): boolean =>
        verdicts.some(
          (v) =>
            v.slot === slot &&
            (qualifiedIn(ended, v.by) || isTrusted(state, state.epoch.clients[v.by]?.id ?? '')),
        );
      trust = {
        vetted_bits: toBase64(attestationOf(n, (i) => judgement[i] === 'vetted')),
        struck_bits: toBase64(attestationOf(n, (i) => judgement[i] === 'failed' && qualifiedVerdict(i))),
      };
    }
  }
  return {
    height: ended.height,
    admitted_bits: toBase64(attestationOf(slots, (i) => (admitted[i] ?? null) !== null)),
    accepted_bits,
    alive_bits,
    ...trust,
  };
}

/**
 * Why `outcome` cannot be the outcome of round `ended` in `state` (null when it can): a replica without the
 * evidence still checks that each bitmap covers exactly the slots of its round (no bit past the last) and
 * that the round before has bits exactly when the ring holds it.
 */
export function outcomeShapeError(
  state: CoordinatorState,
  ended: Round,
  outcome: RoundOutcome,
): string | null {
  if (typeof outcome !== 'object' || outcome === null) return 'the round outcome must be an object';
  if (outcome.height !== ended.height) return `the outcome is for round ${String(outcome.height)}`;
  // Canonical base64 of exactly the round's slots, no bit set past the last.
  const fits = (text: unknown, round: Round): boolean => {
    if (typeof text !== 'string') return false;
    const slots = roundAssignments(state, round).length;
    const bits = loadSlotBits(text, slots);
    if (!bits || toBase64(bits) !== text) return false;
    try {
      checkAttestation(bits, slots);
      return true;
    } catch {
      return false;
    }
  };
  if (!fits(outcome.admitted_bits, ended)) return 'admitted_bits must cover exactly the slots of the round';
  const judged = roundAtHeight(state, ended.height - 1);
  const vetted = outcome.vetted_bits ?? null;
  const struck = outcome.struck_bits ?? null;
  if (!judged) {
    if (outcome.accepted_bits !== null || outcome.alive_bits !== null || vetted !== null || struck !== null)
      return 'there is no round before this one to judge';
  } else if (!fits(outcome.accepted_bits, judged) || !fits(outcome.alive_bits, judged))
    return 'accepted_bits and alive_bits must cover exactly the slots of the round before';
  else if (
    ended.qualified === undefined
      ? vetted !== null || struck !== null
      : !fits(vetted, judged) || !fits(struck, judged)
  )
    return 'vetted_bits and struck_bits cover the slots of the round before exactly when the run is anchored';
  return null;
}

export function sameOutcome(a: RoundOutcome, b: RoundOutcome): boolean {
  return (
    a.height === b.height &&
    a.admitted_bits === b.admitted_bits &&
    a.accepted_bits === b.accepted_bits &&
    a.alive_bits === b.alive_bits &&
    (a.vetted_bits ?? null) === (b.vetted_bits ?? null) &&
    (a.struck_bits ?? null) === (b.struck_bits ?? null)
  );
}

/** The state with `outcome` recorded on its two rounds. */
export function applyRoundOutcome(state: CoordinatorState, outcome: RoundOutcome): CoordinatorState {
  let next = state;
  const ended = roundAtHeight(next, outcome.height);
  if (ended) next = withRound(next, { ...ended, admitted_bits: outcome.admitted_bits });
  const judged = roundAtHeight(next, outcome.height - 1);
  if (judged && outcome.accepted_bits !== null && outcome.alive_bits !== null) {
    const vetted = outcome.vetted_bits ?? null;
    const struck = outcome.struck_bits ?? null;
    next = withRound(next, {
      ...judged,
      accepted_bits: outcome.accepted_bits,
      alive_bits: outcome.alive_bits,
      ...(vetted !== null && struck !== null ? { vetted_bits: vetted, struck_bits: struck } : {}),
    });
    if (vetted !== null && struck !== null) next = recordJudgements(next, judged, vetted, struck);
  }
  return next;
}

/** Each judged trainer's qualified pass (1) or failure (0) appended to its record, in slot order. */
function recordJudgements(
  state: CoordinatorState,
  judged: Round,
  vetted: string,
  struck: string,
): CoordinatorState {
  const assignments = roundAssignments(state, judged);
  const v = loadSlotBits(vetted, assignments.length);
  const f = loadSlotBits(struck, assignments.length);
  if (!v || !f) return state;
  let next = state;
  assignments.forEach((a, slot) => {
    if (next.ejected.includes(a.id)) return;
    if (attests(f, slot)) next = withTrust(next, a.id, 0);
    else if (attests(v, slot)) next = withTrust(next, a.id, 1);
  });
  return next;
}

/**
 * Which slots of the round at `height` every peer applies, once its attesting round has ended (null before,
 * or when the ring no longer holds it). Reads the recorded outcome, so it needs no evidence.
 */
export function acceptedSlots(state: CoordinatorState, height: number): boolean[] | null {
  const round = roundAtHeight(state, height);
  if (!round || typeof round.accepted_bits !== 'string') return null;
  return slotBits(state, round, round.accepted_bits);
}

/** Which trainers of the round at `height` got through, once its attesting round has ended (else null). */
export function aliveSlots(state: CoordinatorState, height: number): boolean[] | null {
  const round = roundAtHeight(state, height);
  if (!round || typeof round.alive_bits !== 'string') return null;
  return slotBits(state, round, round.alive_bits);
}

/** Which slots of the round at `height` the host admitted, once that round has ended (else null). */
export function admittedSlots(state: CoordinatorState, height: number): boolean[] | null {
  const round = roundAtHeight(state, height);
  if (!round || typeof round.admitted_bits !== 'string') return null;
  return slotBits(state, round, round.admitted_bits);
}

function slotBits(state: CoordinatorState, round: Round, text: string): boolean[] | null {
  const slots = roundAssignments(state, round).length;
  const bits = loadSlotBits(text, slots);
  return bits && Array.from({ length: slots }, (_, i) => attests(bits, i));
}

/** For each slot of `judged`, whether its trainer got through by the evidence (admitted, or seen by a quorum). */
export function aliveFromEvidence(state: CoordinatorState, judged: Round, attesting: Round): boolean[] {
  const attestations = roundAttestations(attesting);
  return roundAssignments(state, judged).map((_, slot) => seenAlive(judged, attesting, attestations, slot));
}

/**
 * Whether the trainer of `judged`'s result slot got through: admitted by the host, or attested by a quorum of
 * `attesting`'s witnesses (`attestations`, over `judged`'s slots).
 */
export function seenAlive(
  judged: Round,
  attesting: Round,
  attestations: readonly Uint8Array[],
  slot: number,
): boolean {
  if ((roundAdmitted(judged)[slot] ?? null) !== null) return true;
  return healthScore(slot, attestations) >= quorum(liveWitnessCount(attesting));
}
