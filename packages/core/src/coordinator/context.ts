// What every step of a tick gets and adds to: the time, the effects it emits and, on a replica, the host's
// judgement of a round it ends. Shared by the event handlers and the phase changes (transitions.ts).
import type { CoordinatorState, RunState } from '../state/coordinator-state.ts';
import type { CoordinatorEffect } from './events.ts';
import type { RoundOutcome } from './round-outcome.ts';

export interface Ctx {
  now: number;
  effects: CoordinatorEffect[];
  /** The host's judgement of the round this event ends, for a replica without the evidence (round-outcome.ts). */
  outcome?: RoundOutcome;
  /** The state holds no evidence (a light replica): a round can only end with `outcome`. */
  light?: boolean;
}

/** Psyche's check_timeout: at least one new second must have passed, and `duration` of them. */
export function timedOut(state: CoordinatorState, now: number, duration: number): boolean {
  return now !== state.run_state_start && now >= state.run_state_start + duration;
}

export function changeState(state: CoordinatorState, to: RunState, ctx: Ctx): CoordinatorState {
  ctx.effects.push({ type: 'RunStateChanged', from: state.run_state, to });
  return { ...state, run_state: to, run_state_start: ctx.now };
}
