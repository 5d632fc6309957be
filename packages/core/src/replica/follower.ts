// Following the relay's stream of one run: a replica takes the StateSnapshot the relay sends after its Join,
// then applies each StateDelta (full replicas: replay.ts) or LightDelta (light replicas: light-delta.ts) and
// checks the state hash a frame carries now and then. A frame that starts past the replica's seq is a gap; a
// frame that does not fit, or a hash that differs, means the replica is not the relay's state: it is marked
// diverged and ignores deltas until a snapshot replaces it. Pure bookkeeping: the shell (the client's
// StateReplica) sends the requests, hashes the states and hands them on.
import type { CoordinatorState } from '../state/coordinator-state.ts';
import type { LightDelta } from '../wire/light-delta.ts';
import { deltaEndSeq, type StateDelta } from '../wire/state-delta.ts';
import type { StateSnapshot } from '../wire/state-snapshot.ts';
import { applyLightDelta } from './light-delta.ts';
import { applyStateDelta, type DeltaOutcome } from './replay.ts';

/** What one delta did to the follower. */
export type FollowStep =
  /** Nothing: no state yet, a diverged replica, or a frame that ends at or before its seq. */
  | { kind: 'ignored' }
  /** Applied: the new state at `seq`, and the relay's hash of it when the frame carried one. */
  | { kind: 'applied'; state: CoordinatorState; seq: number; stateHash?: Uint8Array }
  /** The frame starts at `fromSeq`, past the replica's seq: ask for the missing part (ResyncRequest 'gap'). */
  | { kind: 'gap'; fromSeq: number }
  /** The frame names what the replica does not have: it is now diverged (report a mismatch at `seq`). */
  | { kind: 'unfit'; reason: string; state: CoordinatorState; seq: number };

/** How a hash check came out: as the relay's, different, or about a state a snapshot has replaced since. */
export type HashVerdict = 'same' | 'mismatch' | 'stale';

type Applied = Pick<DeltaOutcome, 'state' | 'seq' | 'gap'>;

export class Follower {
  /** The seq `state` is at (−1 before the first snapshot). */
  seq = -1;
  /** The state the deltas apply to (null until the first snapshot). */
  state: CoordinatorState | null = null;
  /** The replica is known wrong: deltas are ignored until a snapshot replaces it. */
  diverged = false;
  /** Counts snapshots taken: a hash check that finishes after one is about a replica that is gone. */
  generation = 0;

  /**
   * Takes a snapshot unless it is older than the state held (the relay's seq survives its restarts, so an
   * older one is stale) and the replica is not known wrong. Returns whether it was taken.
   */
  takeSnapshot(s: StateSnapshot): boolean {
    if (s.seq < this.seq && !this.diverged) return false;
    this.generation++;
    this.seq = s.seq;
    this.state = s.state;
    this.diverged = false;
    return true;
  }

  applyDelta(d: StateDelta): FollowStep {
    return this.applyFrame(d, deltaEndSeq(d), (state) => applyStateDelta(state, this.seq, d));
  }

  applyLightDelta(d: LightDelta): FollowStep {
    return this.applyFrame(d, d.toSeq, (state) => applyLightDelta(state, this.seq, d));
  }

  /**
   * Judges the hash `mine` of the state applied in `generation` against the relay's `expected`. A mismatch
   * marks the replica diverged, unless a snapshot replaced that state meanwhile ('stale').
   */
  checkHash(generation: number, mine: Uint8Array, expected: Uint8Array): HashVerdict {
    if (mine.length === expected.length && mine.every((x, i) => x === expected[i])) return 'same';
    if (generation !== this.generation) return 'stale';
    this.diverged = true;
    return 'mismatch';
  }

  /** Marks the replica known wrong (the relay will be asked for a snapshot). */
  diverge(): void {
    this.diverged = true;
  }

  private applyFrame(
    d: { fromSeq: number; stateHash?: Uint8Array },
    endSeq: number,
    apply: (state: CoordinatorState) => Applied,
  ): FollowStep {
    const state = this.state;
    if (!state || this.diverged || endSeq <= this.seq) return { kind: 'ignored' };
    let out: Applied;
    try {
      out = apply(state);
    } catch (e) {
      // A transition that names what this replica does not have: it is not the relay's state.
      this.diverged = true;
      return { kind: 'unfit', reason: (e as Error).message, state, seq: this.seq };
    }
    if (out.gap) return { kind: 'gap', fromSeq: d.fromSeq };
    this.state = out.state;
    this.seq = out.seq;
    return {
      kind: 'applied',
      state: out.state,
      seq: out.seq,
      ...(d.stateHash ? { stateHash: d.stateHash } : {}),
    };
  }
}
