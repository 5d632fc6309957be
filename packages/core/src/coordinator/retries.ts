// Batch retries: a trainer that dies mid-round leaves its interval of samples without an accepted result.
// Psyche never trains such an interval again; here it goes on a retry queue and a later round hands it,
// whole, to another trainer (issue 5: "no batch of a completed step is lost").
//
// Criterion. When round h's witness phase ends, round h−1's fate is fixed: peers will apply, at the start of
// round h+1, exactly what queries.acceptedCommitments names for it (the host's admitted commitment of each
// batch, if enough of round h's witnesses saw it). An assignment of round h−1 with no accepted result is
// queued. Retries and apply read the same function of the same state, so "retried" and "not applied" coincide
// exactly: nothing can make a batch lost or trained twice (the host's record holds the commitments; the
// witnesses' attestations only count votes for them).
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
import { acceptedCommitments, retryQueue, roundAssignments, roundAtHeight, roundRetries } from './queries.ts';
import { acceptedSlots } from './round-outcome.ts';
import type { CoordinatorState, Round } from '../state/coordinator-state.ts';

/** The most intervals the queue can hold (see "Bound" above); for tests and monitoring, never enforced. */
export function retryQueueBound(state: CoordinatorState): number {
  return 2 * state.config.max_clients;
}

/**
 * Intervals of `judged` that no peer will apply: exactly those for which `acceptedCommitments` names no
 * result (the host admitted none, or too few of `attesting`'s witnesses saw it).
 */
export function unattestedBatches(state: CoordinatorState, judged: Round, attesting: Round): BatchId[] {
  if (roundAtHeight(state, judged.height) !== judged || roundAtHeight(state, attesting.height) !== attesting)
    return [];
  // The recorded outcome when the attesting round has ended (a replica without the evidence has only that);
  // the same decision from the evidence while it is still open.
  const recorded = acceptedSlots(state, judged.height);
  if (recorded)
    return roundAssignments(state, judged)
      .filter((_, slot) => !recorded[slot])
      .map((a) => ({ start: a.batch.start, end: a.batch.end }));
  const accepted = acceptedCommitments(state, judged.height) ?? [];
  return accepted
    .filter((a) => a.commitment === null)
    .map((a) => ({ start: a.batch.start, end: a.batch.end }));
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
