// Replaying transitions: `replayTransition(state, t)` is what the relay did to `state`, so a replica that
// starts from a snapshot and replays every delta holds the relay's state exactly (the same object contents,
// hence the same canonical JSON and stateHash). Pure: the relay, clients and the relay's restart recovery all
// run this code.
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { tick } from '../coordinator/tick.ts';
import type { StateDelta, WireTransition } from '../wire/state-delta.ts';
import { expandTransition } from './wire-events.ts';

/** The state after one transition (what the relay's `tick`s produced, refusals included). */
export function replayTransition(state: CoordinatorState, w: WireTransition): CoordinatorState {
  const t = expandTransition(state, w);
  let s = state;
  if (t.entropy !== undefined) s = tick(s, { type: 'entropy', entropy: t.entropy }, t.now).state;
  return tick(s, t.event, t.now).state;
}

export interface DeltaOutcome {
  state: CoordinatorState;
  seq: number;
  /** The delta starts past `seq`: transitions are missing (ask for them: ResyncRequest 'gap'). */
  gap: boolean;
  /** Transitions applied (those at or below `seq` are skipped: a delta may overlap what a snapshot had). */
  applied: number;
}

/**
 * Applies the transitions of `delta` that follow `seq` to the replica `state` (at `seq`). Throws WireError
 * when a transition does not fit the state (a replica that diverged: ask for a snapshot).
 */
export function applyStateDelta(state: CoordinatorState, seq: number, delta: StateDelta): DeltaOutcome {
  if (delta.fromSeq > seq) return { state, seq, gap: true, applied: 0 };
  let s = state;
  let at = seq;
  let applied = 0;
  for (let i = seq - delta.fromSeq; i < delta.transitions.length; i++) {
    s = replayTransition(s, delta.transitions[i]!);
    at++;
    applied++;
  }
  return { state: s, seq: at, gap: false, applied };
}
