// A closed round's admitted list (wire/admitted-list.ts) between a replica's state and its peers: built from
// a state that holds the commitments, checked against the round's `admitted_list` when fetched, and put back
// into a light replica's rounds (docs/protocol.md "Round outcomes and light replicas").
import { roundAdmitted, roundAssignments, roundAtHeight } from '../coordinator/queries.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { bytesToHex, hexToBytes, sha256 } from '../crypto/index.ts';
import { COMMITMENT_BYTES } from '../wire/commitment.ts';
import {
  decodeAdmittedList,
  encodeAdmittedList,
  type AdmittedEntry,
  type AdmittedList,
} from '../wire/admitted-list.ts';
import { WireError } from '../wire/errors.ts';

/** A closed round's admitted list, as a light replica asks for it. */
export interface AdmittedListRef {
  /** The round's admitted_list: hex SHA-256 of the list's frame. */
  address: string;
  step: number;
}

/** The admitted list of the round at `height` from a full replica's state (null when the ring lacks it). */
export function admittedListOf(state: CoordinatorState, height: number): AdmittedList | null {
  const round = roundAtHeight(state, height);
  if (!round) return null;
  const entries: AdmittedEntry[] = [];
  roundAdmitted(round).forEach((hex, slot) => {
    if (hex !== null) entries.push({ slot, commitment: hexToBytes(hex, COMMITMENT_BYTES) });
  });
  return { runId: state.run_id, step: round.step, entries };
}

/**
 * The list in `frame`, once checked: its bytes hash to `ref.address` and it is run `runId`'s list for
 * `ref.step`. Throws WireError otherwise. What a replica checks before it trusts a list from a peer or the
 * relay; the frame's encoding is canonical, so no other bytes decode to a list with that address.
 */
export function checkAdmittedList(frame: Uint8Array, runId: string, ref: AdmittedListRef): AdmittedList {
  if (bytesToHex(sha256(frame)) !== ref.address)
    throw new WireError('inconsistent', 'entries', `the list does not hash to ${ref.address.slice(0, 16)}…`);
  const list = decodeAdmittedList(frame);
  if (list.runId !== runId || list.step !== ref.step)
    throw new WireError('inconsistent', 'step', `the list is for ${list.runId} step ${list.step}`);
  return list;
}

/**
 * A light replica's state with the admitted lists it holds put back into their rounds (`admitted`, by slot),
 * so the client logic that reads commitments — witnessing, verification, apply — runs on it as on a full
 * replica's. A view for that logic only: its hash is not the summary's. `lists` maps a round's
 * admitted_list to its checked list; closed rounds whose list is missing keep no `admitted`
 * (missingAdmittedLists names them).
 */
export function hydrateState(
  state: CoordinatorState,
  lists: ReadonlyMap<string, AdmittedList>,
): CoordinatorState {
  let rounds: CoordinatorState['epoch']['rounds'] | null = null;
  state.epoch.rounds.forEach((round, i) => {
    if (!round || round.admitted !== undefined || round.admitted_list === undefined) return;
    const list = lists.get(round.admitted_list);
    if (!list) return;
    const admitted: (string | null)[] = roundAssignments(state, round).map(() => null);
    for (const e of list.entries) if (e.slot < admitted.length) admitted[e.slot] = bytesToHex(e.commitment);
    rounds ??= state.epoch.rounds.slice();
    rounds[i] = { ...round, admitted };
  });
  return rounds ? { ...state, epoch: { ...state.epoch, rounds } } : state;
}

/** Closed rounds of `state` whose admitted list is neither in the state nor in `lists` (keyed by address). */
export function missingAdmittedLists(
  state: CoordinatorState,
  lists: ReadonlyMap<string, AdmittedList>,
): AdmittedListRef[] {
  const out: AdmittedListRef[] = [];
  for (const round of state.epoch.rounds)
    if (round?.admitted_list !== undefined && round.admitted === undefined && !lists.has(round.admitted_list))
      out.push({ address: round.admitted_list, step: round.step });
  return out;
}

/**
 * The admitted lists of `state`'s closed rounds that it holds (a full replica's, or a hydrated light one's),
 * each as its frame with the round's address: what a replica serves its peers. Lists whose address is in
 * `known` (already served) are skipped without encoding. A round whose rebuilt frame does not hash to its
 * admitted_list is left out (that state is not the coordinator's).
 */
export function heldAdmittedLists(
  state: CoordinatorState,
  known: ReadonlySet<string> = new Set(),
): { address: string; frame: Uint8Array }[] {
  const out: { address: string; frame: Uint8Array }[] = [];
  for (const round of state.epoch.rounds) {
    // No test of `admitted` here: a full replica's round with nothing admitted may hold none, and a light
    // state's missing list is caught by the hash below.
    if (round?.admitted_list === undefined || known.has(round.admitted_list)) continue;
    const list = admittedListOf(state, round.height);
    if (!list) continue;
    const frame = encodeAdmittedList(list);
    if (bytesToHex(sha256(frame)) === round.admitted_list) out.push({ address: round.admitted_list, frame });
  }
  return out;
}
