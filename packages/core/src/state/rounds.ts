// The state's ring of the epoch's last four rounds: reading a round and storing one. Plain data access that
// the coordinator, the wire codecs and the replicas share; what rounds mean is coordinator/queries.ts.
import type { CoordinatorState, Round } from './coordinator-state.ts';

export function currentRound(state: CoordinatorState): Round | null {
  return state.epoch.rounds[state.epoch.rounds_head] ?? null;
}

/** The round of this epoch with the given height, if the 4-round ring still holds it. */
export function roundAtHeight(state: CoordinatorState, height: number): Round | null {
  if (height < 0) return null;
  const round = state.epoch.rounds[height % 4];
  return round && round.height === height ? round : null;
}

/** The host's admitted commitments of a round, aligned with `roundAssignments` ([] for older snapshots). */
export function roundAdmitted(round: Round): readonly (string | null)[] {
  return round.admitted ?? [];
}

/** The state with `round` stored in its ring slot (same roster array, so memoised selection survives). */
export function withRound(state: CoordinatorState, round: Round): CoordinatorState {
  const rounds = state.epoch.rounds.slice();
  rounds[round.height % 4] = round;
  return { ...state, epoch: { ...state.epoch, rounds } };
}
