// Batch retries: a trainer that dies mid-round leaves its interval of samples without an accepted result.
// Psyche never trains such an interval again; here it goes on a retry queue and a later round hands it,
// whole, to another trainer (issue 5: "no batch of a completed step is lost").
//
// Criterion. When round h's witness phase ends, round h's witnesses have attested round h−1's results: a
// witness puts participantItem(trainer key) in its participant bloom for every round h−1 result it downloaded
// and verified (docs/protocol.md "Witnesses and quorum"). An assignment of round h−1 whose trainer is in
// fewer than quorum(W_h) of those blooms is queued: the same test as health checks (witness/health.ts
// isHealthy, witnessing.ts healthCheck), applied to every assignment instead of to reported clients. Peers
// apply round h−1 at the start of round h+1 from the same witnesses' broadcast blooms
// (queries.acceptedCommitments), so for honest witnesses "attested" and "applied" coincide: both blooms are
// filled from the same verified results.
//
// Limits (the coordinator never sees commitments, only blooms, so this is a proxy for the clients' consensus):
//  - A participant-bloom false positive (rate ≈ config.bloom_false_positive_rate per witness, needing
//    quorum(W) of them) makes an unseen trainer look attested: its batch is neither applied nor retried, i.e.
//    lost. The opposite (a broadcast false positive that gets an unseen commitment accepted) needs a peer to
//    hold that commitment as a candidate, so it would be a batch applied and retried: trained twice.
//  - A trainer that equivocates (two commitments for one batch) can be attested yet split the votes so no
//    commitment reaches quorum: lost. Such a trainer is provably lying and the relay ejects it.
//  - A byzantine minority of witnesses cannot force retries beyond the quorum rule: leaving a trainer out of
//    their blooms only matters if fewer than quorum(W) honest witnesses saw it, and claiming a trainer they
//    did not see only hides a lost batch when quorum(W) witnesses collude (then they also control consensus).
//
// Epoch ends. Results of the epoch's last two rounds L−1 and L are never applied, and endEpoch rewinds the
// fresh data to L−1's data index (transitions.resumeDataIndex). So L−1 is *not* judged when the round after it
// ends the epoch (its fresh samples are rewound; queueing them too would train them twice), and the retries
// that L−1 and L had taken go back to the front of the queue (the rewind only covers fresh data).
//
// Bound. Call "outstanding" the queue plus every interval of the epoch's unjudged rounds (at most two, each
// with at most max_clients intervals). Judging a round replaces its intervals by a subset of them, and a round
// takes fresh data only when it emptied the queue, after which outstanding ≤ 2·max_clients. So the queue never
// holds more than 2·max_clients intervals (max_clients being the largest the run has had), and nothing is ever
// truncated: dropping an entry would lose its samples. Entries are deduplicated by interval as a safeguard.
import type { BatchId } from '../selection/data-assignment.ts';
import { hexToBytes } from '../selection/hex.ts';
import { healthScore, participantItem } from '../witness/health.ts';
import { quorum } from '../witness/quorum.ts';
import { retryQueue, roundAssignments, roundAtHeight, roundRetries } from './queries.ts';
import type { CoordinatorState, Round } from './state.ts';
import { loadBloom } from './stored-bloom.ts';

/** The most intervals the queue can hold (see "Bound" above); for tests and monitoring, never enforced. */
export function retryQueueBound(state: CoordinatorState): number {
  return 2 * state.config.max_clients;
}

/**
 * Intervals of `judged` whose trainer fewer than quorum(W) of `attesting`'s witnesses saw. Every trainer has
 * one interval per round, so attesting the trainer attests its interval.
 */
export function unattestedBatches(state: CoordinatorState, judged: Round, attesting: Round): BatchId[] {
  const assignments = roundAssignments(state, judged);
  if (assignments.length === 0) return [];
  const blooms = attesting.witnesses.flatMap((w) =>
    w.participant_bloom ? [loadBloom(w.participant_bloom)] : [],
  );
  const q = quorum(attesting.witness_count);
  const out: BatchId[] = [];
  for (const a of assignments) {
    if (blooms.length < q || healthScore(participantItem(hexToBytes(a.id)), blooms) < q)
      out.push({ start: a.batch.start, end: a.batch.end });
  }
  return out;
}

function key(b: BatchId): string {
  return `${b.start}:${b.end}`;
}

/** Adds intervals to the queue (at the front: they are older than what waits there), skipping duplicates. */
function enqueue(state: CoordinatorState, batches: readonly BatchId[], front: boolean): CoordinatorState {
  if (batches.length === 0) return state;
  const queue = retryQueue(state);
  const seen = new Set(queue.map(key));
  const added: BatchId[] = [];
  for (const b of batches) {
    const k = key(b);
    if (seen.has(k)) continue;
    seen.add(k);
    added.push({ start: b.start, end: b.end });
  }
  if (added.length === 0) return state;
  const retry_batches = front ? [...added, ...queue] : [...queue, ...added];
  return { ...state, progress: { ...state.progress, retry_batches } };
}

/**
 * Round `ended`'s witness phase is over and the epoch goes on: queue the intervals of the round before it that
 * its witnesses did not attest.
 */
export function queueUnattested(state: CoordinatorState, ended: Round): CoordinatorState {
  const judged = roundAtHeight(state, ended.height - 1);
  if (!judged) return state;
  return enqueue(state, unattestedBatches(state, judged, ended), false);
}

/** Epoch end: the retries the two unapplied rounds took go back to the front of the queue. */
export function requeueUnapplied(state: CoordinatorState, last: Round): CoordinatorState {
  const prev = roundAtHeight(state, last.height - 1);
  return enqueue(state, [...(prev ? roundRetries(prev) : []), ...roundRetries(last)], true);
}

/** Takes up to `n` intervals from the front of the queue. */
export function takeRetries(
  state: CoordinatorState,
  n: number,
): { state: CoordinatorState; taken: BatchId[] } {
  const queue = retryQueue(state);
  if (n <= 0 || queue.length === 0) return { state, taken: [] };
  const taken = queue.slice(0, n);
  return {
    state: { ...state, progress: { ...state.progress, retry_batches: queue.slice(taken.length) } },
    taken,
  };
}
