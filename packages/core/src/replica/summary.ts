// The coordinator state without per-result evidence: what a light replica holds (docs/protocol.md "Light
// replicas"). The evidence — the host's admitted commitments, witnesses' attestations, verdicts, accusations,
// strikes, verification records — grows with the number of clients in every round; the decisions taken from
// it (who is in, which slots were admitted and accepted, the address of the admitted list, who was dropped
// or ejected) are what a trainer needs to follow the run. A full replica's state and the light replica
// that followed the same run print the same JSON once the full one is summarised, so they share one hash.
import type { CoordinatorState, Round, WitnessRecord } from '../state/coordinator-state.ts';
import { roundListAddress, withListAddress } from './admitted-lists.ts';

const summarised = new WeakMap<Round, Round>();

function summariseWitness(w: WitnessRecord): WitnessRecord {
  return w.attested === null && w.broadcast_merkle === null
    ? w
    : { index: w.index, attested: null, broadcast_merkle: null };
}

function summariseRound(runId: string, round: Round): Round {
  if (
    (round.admitted_bits === undefined || round.admitted_list !== undefined) &&
    round.admitted === undefined &&
    round.accusations === undefined &&
    round.verdicts === undefined &&
    round.witnesses.every((w) => w.attested === null && w.broadcast_merkle === null)
  )
    return round;
  let out = summarised.get(round);
  if (!out) {
    // Rest properties keep the remaining keys in their order, so the JSON text matches a light replica's round.
    const { admitted: _a, accusations: _b, verdicts: _c, ...rest } = round;
    out = { ...rest, witnesses: round.witnesses.map(summariseWitness) };
    // A closed round's list is named by its address, which a light replica records with the outcome.
    const address = roundListAddress(runId, round);
    if (address !== undefined) out = withListAddress(out, address);
    summarised.set(round, out);
  }
  return out;
}

/** `state` without its evidence; the same object when it has none (a light replica's own state). */
export function summarizeState(state: CoordinatorState): CoordinatorState {
  const rounds = state.epoch.rounds.map((r) => (r ? summariseRound(state.run_id, r) : r));
  const same = rounds.every((r, i) => r === state.epoch.rounds[i]);
  const noStrikes = Object.keys(state.strikes).length === 0;
  if (same && noStrikes && state.verified === undefined) return state;
  const { verified: _v, ...rest } = state;
  return {
    ...rest,
    strikes: noStrikes ? state.strikes : {},
    epoch: same ? state.epoch : { ...state.epoch, rounds },
  };
}

/** Whether `state` holds evidence that a light replica would not. */
export function holdsEvidence(state: CoordinatorState): boolean {
  return summarizeState(state) !== state;
}
