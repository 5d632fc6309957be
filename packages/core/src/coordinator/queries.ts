// Read-only views of the state that clients and the coordinator share: roles, batch assignments, accepted
// results. Derived data is memoised per round, keyed by the round's roster array: a round's seed, roster,
// W, data index and batch size never change, and updates to a round (new witnesses, pruned blooms) copy the
// Round object but keep the same roster array, so asking every tick costs nothing after the first time.
import { RoundSelection } from '../selection/committee.ts';
import { assignBatches, type BatchId } from '../selection/data-assignment.ts';
import { selectConsensusCommitment } from '../witness/consensus.ts';
import { quorum } from '../witness/quorum.ts';
import type { BloomFilter } from '../witness/bloom.ts';
import type { CoordinatorState, Round } from './state.ts';
import { loadBloom } from './stored-bloom.ts';

const selections = new WeakMap<readonly number[], RoundSelection>();
const assignments = new WeakMap<readonly number[], RoundAssignment[]>();

export function currentRound(state: CoordinatorState): Round | null {
  return state.epoch.rounds[state.epoch.rounds_head] ?? null;
}

/** The round of this epoch with the given height, if the 4-round ring still holds it. */
export function roundAtHeight(state: CoordinatorState, height: number): Round | null {
  if (height < 0) return null;
  const round = state.epoch.rounds[height % 4];
  return round && round.height === height ? round : null;
}

export function roundSelection(round: Round): RoundSelection {
  let sel = selections.get(round.roster);
  if (!sel) {
    sel = new RoundSelection({
      randomSeed: round.random_seed,
      clientsLen: round.roster.length,
      witnessCount: round.witness_count,
      verificationPercent: round.verification_percent,
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

/** Whether roster index `index` witnesses `round` (default: the current round). */
export function isWitness(
  state: CoordinatorState,
  index: number,
  round: Round | null = currentRound(state),
): boolean {
  if (!round || !Number.isInteger(index) || index < 0 || index >= round.roster.length) return false;
  return roundSelection(round).isWitness(index);
}

/** Broadcast blooms of the witnesses of `round`; empty if they were already pruned. */
export function broadcastBlooms(round: Round): BloomFilter[] {
  const out: BloomFilter[] = [];
  for (const w of round.witnesses) if (w.broadcast_bloom) out.push(loadBloom(w.broadcast_bloom));
  return out;
}

export interface AcceptedCommitment {
  batch: BatchId;
  /** Index into `epoch.clients` of the assigned trainer. */
  client_index: number;
  commitment: Uint8Array | null;
  votes: number;
}

/**
 * The result every peer applies for each batch of the round at `height`: the commitment the next round's
 * witnesses agree on (docs/protocol.md "Consensus commitment per batch", "The two-round apply lag"), or null.
 * `candidatesFor` gives the verified commitments a peer received for a batch (any order). Nothing is accepted
 * unless the next round's witnesses reached quorum.
 */
export function acceptedCommitments(
  state: CoordinatorState,
  height: number,
  candidatesFor: (batch: BatchId, clientIndex: number) => readonly Uint8Array[],
): AcceptedCommitment[] | null {
  const round = roundAtHeight(state, height);
  const attesting = roundAtHeight(state, height + 1);
  if (!round || !attesting) return null;
  const q = quorum(attesting.witness_count);
  const blooms = attesting.witnesses.length >= q ? broadcastBlooms(attesting) : [];
  return roundAssignments(state, round).map(({ batch, client_index }) => {
    const picked =
      blooms.length >= q ? selectConsensusCommitment(candidatesFor(batch, client_index), blooms, q) : null;
    return { batch, client_index, commitment: picked?.commitment ?? null, votes: picked?.votes ?? 0 };
  });
}
