// Read-only views of the state that clients and the coordinator share: roles, batch assignments, accepted
// results. Derived data is memoised per round, keyed by the round's roster array: a round's seed, roster,
// W, data index and batch size never change, and updates to a round (new witnesses, pruned attestations) copy the
// Round object but keep the same roster array, so asking every tick costs nothing after the first time.
import { RoundSelection } from '../selection/committee.ts';
import { assignBatches, type BatchId } from '../selection/data-assignment.ts';
import { hexToBytes } from '../crypto/bytes.ts';
import { attests } from '../witness/attestation.ts';
import { quorum } from '../witness/quorum.ts';
import type { CoordinatorState, Round } from '../state/coordinator-state.ts';
import { loadSlotBits, roundAttestations } from './stored-attestation.ts';
import { isTrusted, onProbationIn, PROBATION_SHARE_DIVISOR, qualifiedIn } from './trust.ts';
import { currentRound, roundAdmitted, roundAtHeight } from '../state/rounds.ts';

export { currentRound, roundAdmitted, roundAtHeight, withRound } from '../state/rounds.ts';

const selections = new WeakMap<readonly number[], RoundSelection>();
const assignments = new WeakMap<readonly number[], RoundAssignment[]>();

export function roundSelection(round: Round): RoundSelection {
  let sel = selections.get(round.roster);
  if (!sel) {
    sel = new RoundSelection({
      randomSeed: round.random_seed,
      clientsLen: round.roster.length,
      witnessCount: round.witness_count,
      // FIX (Psyche): Psyche makes verification_percent of the committee Verifiers that train nothing (and
      // never implemented what they do). Here every client trains, and verification_percent is the share of
      // results other clients re-check (coordinator/verification.ts), so no committee slot is a Verifier.
      verificationPercent: 0,
    });
    selections.set(round.roster, sel);
  }
  return sel;
}

/** The retry intervals a round took (coordinator/retries.ts); [] for rounds stored before retries existed. */
export function roundRetries(round: Round): readonly BatchId[] {
  return round.retries ?? [];
}

/** The retry queue, oldest first; [] for states stored before retries existed. */
export function retryQueue(state: CoordinatorState): readonly BatchId[] {
  return state.progress.retry_batches ?? [];
}

export interface RoundAssignment {
  /** Roster index (what proofs carry). */
  index: number;
  /** Index into `epoch.clients`. */
  client_index: number;
  id: string;
  batch: BatchId;
}

/**
 * Every trainer's batch in the round, in assignment order (the round's retries first, then its fresh
 * samples); trainers with no samples are absent. Clients and the relay read assignments only from here.
 */
export function roundAssignments(state: CoordinatorState, round: Round): readonly RoundAssignment[] {
  let out = assignments.get(round.roster);
  if (!out) {
    const trainers = roundSelection(round).trainers();
    out = assignBatches(
      trainers,
      round.random_seed,
      round.data_index,
      round.batch_size,
      roundRetries(round),
    ).map(({ trainer, batch }) => {
      const clientIndex = round.roster[trainer] as number;
      return {
        index: trainer,
        client_index: clientIndex,
        id: state.epoch.clients[clientIndex]?.id ?? '',
        batch,
      };
    });
    assignments.set(round.roster, out);
  }
  return out;
}

/** Roster index of `id` in `round`, or -1. */
export function rosterIndexOf(state: CoordinatorState, round: Round, id: string): number {
  const clientIndex = state.epoch.clients.findIndex((c) => c.id === id);
  return clientIndex < 0 ? -1 : round.roster.indexOf(clientIndex);
}

/**
 * The witnesses `round` counts on: W less those that left the epoch before submitting (`round.departed`). The
 * round's quorum is quorum(liveWitnessCount), and its train phase ends early once that many have submitted.
 */
export function liveWitnessCount(round: Round): number {
  return round.witness_count - (round.departed?.length ?? 0);
}

/** Whether roster index `index` witnesses `round` (default: the current round). */
export function isWitness(
  state: CoordinatorState,
  index: number,
  round: Round | null = currentRound(state),
): boolean {
  if (!round || !Number.isInteger(index) || index < 0 || index >= round.roster.length) return false;
  return roundSelection(round).isWitness(index);
}

export interface AcceptedCommitment {
  batch: BatchId;
  /** Index into `epoch.clients` of the assigned trainer. */
  client_index: number;
  commitment: Uint8Array | null;
  /** Witnesses of the attesting round that attest the admitted commitment. */
  votes: number;
}

/**
 * The round a result, witness or accusation for `step` may still change: the open round or the one before it
 * (whose results the open round's witnesses attest). Older rounds are closed: nothing done for them now could
 * be attested before everyone applies them.
 */
export function openRoundByStep(state: CoordinatorState, step: number): Round | null {
  if (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness') return null;
  const cur = currentRound(state);
  if (!cur) return null;
  if (cur.step === step) return cur;
  const prev = roundAtHeight(state, cur.height - 1);
  return prev && prev.step === step ? prev : null;
}

/**
 * The round a result for `step` may still be submitted to: the round in progress (RoundTrain or RoundWitness),
 * if its step is `step`. A round's admitted record is final once it ends, so when round h+1 starts everyone —
 * witnesses attesting round h, verifiers checking it — knows exactly which results of round h exist.
 */
export function resultRoundByStep(state: CoordinatorState, step: number): Round | null {
  if (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness') return null;
  const cur = currentRound(state);
  return cur && cur.step === step ? cur : null;
}

/**
 * Epoch clients none of whose results of the round at `height` may be applied: confirmed cheats whose
 * confirmation happened by round height+1 — what every replica knows, frozen, when it applies that round (at
 * the start of round height+2), so all replicas exclude exactly the same results.
 */
export function excludedClients(state: CoordinatorState, height: number): Set<number> {
  const out = new Set<number>();
  for (const c of state.epoch.cheats ?? []) if (c.height <= height + 1) out.add(c.client_index);
  return out;
}

/**
 * Before applying the round at `height`: null, or the epoch clients whose results every replica must remove
 * from the rounds it already applied — a cheat confirmed during round height+1 may have had results of rounds
 * up to height−1 applied. The replica then rebuilds its parameters from the epoch's start, re-applying each
 * earlier round without those clients' results (deterministic, so replicas stay bit-identical).
 */
export function replayExclusions(state: CoordinatorState, height: number): Set<number> | null {
  if (!(state.epoch.cheats ?? []).some((c) => c.height === height + 1)) return null;
  return excludedClients(state, height);
}

/**
 * The result every peer applies for each batch of the round at `height`, or null for the batch: the host's
 * admitted commitment, if the next round reached its witness quorum and enough of its witnesses saw that
 * commitment. The host's admission counts as one vote (it stored the result and delivers it to everyone), so
 * quorum(W) − 1 witness votes suffice (W: `liveWitnessCount`): a witness minority that leaves an honest result
 * out of its attestation cannot veto it, and no commitment the host refused (malformed, a second one for the
 * batch) can ever be accepted. Nothing is accepted for a round whose attesting round missed quorum (the epoch
 * ends there), for a result a verifier failed, or from a confirmed cheat (excludedClients).
 *
 * `_candidatesFor` is ignored (kept so callers written for candidate voting still compile); the host's
 * record makes the candidate set exactly one commitment per batch.
 */
export function acceptedCommitments(
  state: CoordinatorState,
  height: number,
  _candidatesFor?: (batch: BatchId, clientIndex: number) => readonly Uint8Array[],
): AcceptedCommitment[] | null {
  const round = roundAtHeight(state, height);
  const attesting = roundAtHeight(state, height + 1);
  if (!round) return null;
  // Once round height+1 has ended, its outcome (round-outcome.ts) records exactly what the evidence below
  // decides; it survives the attestations' pruning and is all a replica without the evidence has.
  const recorded = recordedBits(state, round);
  if (recorded) {
    const admitted = roundAdmitted(round);
    const attestations = attesting ? roundAttestations(attesting) : [];
    return roundAssignments(state, round).map(({ batch, client_index }, i) => {
      const hex = admitted[i] ?? null;
      let votes = 0;
      for (const bits of attestations) if (attests(bits, i)) votes++;
      const commitment = attests(recorded, i) && hex !== null ? hexToBytes(hex) : null;
      return { batch, client_index, commitment, votes };
    });
  }
  return acceptedByEvidence(state, height);
}

/**
 * acceptedCommitments decided from the evidence (admitted record, the attesting round's attestations,
 * verdicts, cheats): how the coordinator judges a round when its attesting round ends (round-outcome.ts).
 * Null when the ring no longer holds the round or its attesting round.
 */
export function acceptedByEvidence(state: CoordinatorState, height: number): AcceptedCommitment[] | null {
  const round = roundAtHeight(state, height);
  const attesting = roundAtHeight(state, height + 1);
  if (!round || !attesting) return null;
  const q = quorum(liveWitnessCount(attesting));
  const reached = attesting.witnesses.length >= q;
  const attestations = reached ? roundAttestations(attesting) : [];
  const admitted = roundAdmitted(round);
  const excluded = excludedClients(state, height);
  const failed =
    attesting.qualified === undefined ? failedSlots(round) : judgedSlots(state, round, attesting);
  const out = roundAssignments(state, round).map(({ batch, client_index }, i) => {
    const hex = admitted[i] ?? null;
    if (!reached || hex === null || failed.has(i) || excluded.has(client_index))
      return { batch, client_index, commitment: null, votes: 0 };
    const commitment = hexToBytes(hex);
    let votes = 0;
    for (const bits of attestations) if (attests(bits, i)) votes++;
    return { batch, client_index, commitment: votes + 1 >= q ? commitment : null, votes };
  });
  return attesting.qualified === undefined ? out : boundProbation(out, round);
}

/** Slots of a round without anchor that a verifier failed. */
function failedSlots(round: Round): Set<number> {
  return new Set((round.verdicts ?? []).filter((v) => !v.pass).map((v) => v.slot));
}

/**
 * Slots of `round` that may not be applied in an anchored run (coordinator/trust.ts): those a trusted
 * verifier failed; else those a qualified verifier failed and none passed; else, without a qualified
 * verdict, those any verifier failed — and every result of a trainer on probation that no qualified verifier
 * passed (probation as the round opened: the trainer's standing when it trained).
 */
function judgedSlots(state: CoordinatorState, round: Round, attesting: Round): Set<number> {
  const bySlot = new Map<number, { by: number; pass: boolean; conclusive?: true }[]>();
  for (const v of round.verdicts ?? []) {
    const list = bySlot.get(v.slot) ?? [];
    list.push(v);
    bySlot.set(v.slot, list);
  }
  const out = new Set<number>();
  roundAssignments(state, round).forEach((a, slot) => {
    const verdict = slotJudgement(state, attesting, bySlot.get(slot) ?? []);
    if (verdict === 'failed' || (verdict !== 'vetted' && onProbationIn(round, a.client_index))) out.add(slot);
  });
  return out;
}

/**
 * A result's judgement from its verdicts, as round `attesting` (its verifying round) weighs them: 'vetted'
 * when the deciding verifiers (trusted ones if any reported, else qualified ones) passed it, 'failed' when
 * they failed it — or, with no qualified verdict, when any verifier failed it — else 'unvetted'. A pass by
 * qualified verifiers alone that another verifier's conclusive failure contradicts is 'failed' too: records
 * are earned before they are spent, so either side may be lying, and only a trusted verifier can tell. The
 * result stays out and the trainer loses its record, so its next results go to a trusted verifier first.
 */
export function slotJudgement(
  state: CoordinatorState,
  attesting: Round,
  verdicts: readonly { by: number; pass: boolean; conclusive?: true }[],
): 'vetted' | 'failed' | 'unvetted' {
  const trusted = verdicts.filter((v) => isTrusted(state, state.epoch.clients[v.by]?.id ?? ''));
  if (trusted.length > 0) return trusted.every((v) => v.pass) ? 'vetted' : 'failed';
  const qualified = verdicts.filter((v) => qualifiedIn(attesting, v.by));
  if (qualified.length > 0)
    return qualified.every((v) => v.pass) && !verdicts.some((v) => v.conclusive === true)
      ? 'vetted'
      : 'failed';
  return verdicts.some((v) => !v.pass) ? 'failed' : 'unvetted';
}

/**
 * Keeps at most max(1, ⌊n / PROBATION_SHARE_DIVISOR⌋) accepted results of trainers on probation, n the
 * accepted results of trainers with a record, the first in slot order: probation never supplies more than a
 * quarter of a round's applied results once three others are applied.
 */
function boundProbation(out: AcceptedCommitment[], round: Round): AcceptedCommitment[] {
  let settled = 0;
  for (const a of out) if (a.commitment && !onProbationIn(round, a.client_index)) settled++;
  let room = Math.max(1, Math.floor(settled / PROBATION_SHARE_DIVISOR));
  return out.map((a) => {
    if (!a.commitment || !onProbationIn(round, a.client_index)) return a;
    if (room > 0) {
      room--;
      return a;
    }
    return { ...a, commitment: null };
  });
}

/** The round's recorded accepted_bits, decoded (null when absent or not the round's size). */
function recordedBits(state: CoordinatorState, round: Round): Uint8Array | null {
  if (typeof round.accepted_bits !== 'string') return null;
  return loadSlotBits(round.accepted_bits, roundAssignments(state, round).length);
}

/**
 * What a SparseLoCo replica applies of the round at `height` as soon as that round ends, before its witnesses'
 * attestations are in (docs/protocol.md "Speculative apply (SparseLoCo)"): every result the host admitted,
 * in slot order, except those of cheats confirmed by the end of that round. Everything it reads was frozen
 * when round height+1 opened, so every replica applies the same set whenever it gets to it. The set
 * acceptedCommitments later names for the round is a subset (it also needs votes, a passing verdict, and
 * excludes cheats confirmed one round later); a replica that applied more rebuilds without the difference.
 */
export function speculativeCommitments(state: CoordinatorState, height: number): AcceptedCommitment[] | null {
  const round = roundAtHeight(state, height);
  if (!round) return null;
  const admitted = roundAdmitted(round);
  const excluded = excludedClients(state, height - 1);
  return roundAssignments(state, round).map(({ batch, client_index }, i) => {
    const hex = admitted[i] ?? null;
    const commitment = hex === null || excluded.has(client_index) ? null : hexToBytes(hex);
    return { batch, client_index, commitment, votes: 0 };
  });
}
