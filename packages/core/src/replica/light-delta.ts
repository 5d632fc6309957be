// Following the relay as a light replica: applying LightDelta frames (wire/light-delta.ts) with `lightTick`.
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { bytesToHex } from '../crypto/index.ts';
import { WireError } from '../wire/errors.ts';
import type { LightDelta } from '../wire/light-delta.ts';
import { stateHash } from '../wire/state-hash.ts';
import { lightTick, type LightEvent } from './light-replica.ts';
import { expandLightEvent } from './light-transitions.ts';
import type { DeltaOutcome } from './replay.ts';

/** As for a StateDelta; `applied` counts the listed transitions applied. */
export type LightDeltaOutcome = DeltaOutcome;

/**
 * Applies what `delta` holds past `seq` to the light replica `state` (at `seq`). Throws WireError when an
 * event does not fit the state (a replica that diverged, or a relay that lies: ask for a snapshot).
 */
export function applyLightDelta(state: CoordinatorState, seq: number, delta: LightDelta): LightDeltaOutcome {
  if (delta.fromSeq > seq) return { state, seq, gap: true, applied: 0 };
  let s = state;
  let applied = 0;
  for (const t of delta.transitions) {
    if (t.seq <= seq) continue;
    if (t.entropy !== null) s = mustApply(s, { type: 'entropy', entropy: bytesToHex(t.entropy) }, t.now);
    for (const w of t.events) s = mustApply(s, expandLightEvent(s, w), t.now);
    applied++;
  }
  return { state: s, seq: Math.max(seq, delta.toSeq), gap: false, applied };
}

function mustApply(state: CoordinatorState, e: LightEvent, now: number): CoordinatorState {
  const r = lightTick(state, e, now);
  if (r.error) throw new WireError('inconsistent', 'event', `${e.type}: ${r.error.message}`);
  return r.state;
}

/** The hash a light replica checks its state against (stateHash of the summary). */
export function lightStateHash(state: CoordinatorState): Uint8Array {
  return stateHash(state);
}
