// A closed round's admitted list (wire/admitted-list.ts) between a replica's state and its peers: built from
// a state that holds the commitments, named by the hash of its frame (the round's `admitted_list`, which a
// light replica gets with the round outcome and a full one derives), checked against that name when fetched,
// and put back into a light replica's rounds (docs/protocol.md "Round outcomes and light replicas").
import { roundAdmitted, roundAssignments, roundAtHeight } from '../coordinator/queries.ts';
import type { CoordinatorState, Round } from '../state/coordinator-state.ts';
import { bytesToHex, hexToBytes, sha256 } from '../crypto/index.ts';
import { COMMITMENT_BYTES } from '../wire/commitment.ts';
import {
  admittedListAddress,
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
  return round ? listOfRound(state.run_id, round) : null;
}

function listOfRound(runId: string, round: Round): AdmittedList {
  const entries: AdmittedEntry[] = [];
  roundAdmitted(round).forEach((hex, slot) => {
    if (hex !== null) entries.push({ slot, commitment: hexToBytes(hex, COMMITMENT_BYTES) });
  });
  return { runId, step: round.step, entries };
}

// Rounds are replaced, never changed, and keep their `admitted` array when other fields change: one hash per list.
const derived = new WeakMap<object, string>();

/**
 * The round's admitted_list once it has closed (undefined while it is open): as recorded on a light
 * replica's round, else the address of the list its commitments make (a full replica's round).
 */
export function roundListAddress(runId: string, round: Round): string | undefined {
  if (round.admitted_list !== undefined) return round.admitted_list;
  if (round.admitted_bits === undefined) return undefined;
  const key = round.admitted ?? round;
  let address = derived.get(key);
  if (address === undefined) {
    address = admittedListAddress(listOfRound(runId, round));
    derived.set(key, address);
  }
  return address;
}

/** The admitted_list of every closed round the state's ring holds. */
export function listAddresses(state: CoordinatorState): Set<string> {
  const out = new Set<string>();
  for (const round of state.epoch.rounds) {
    const address = round ? roundListAddress(state.run_id, round) : undefined;
    if (address !== undefined) out.add(address);
  }
  return out;
}

/**
 * `round` with `address` as its admitted_list, placed right after admitted_bits: a light replica's round and
 * a summarised full one then print the same JSON (state hashes follow key order).
 */
export function withListAddress(round: Round, address: string): Round {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(round)) {
    if (key === 'admitted_list') continue;
    out[key] = value;
    if (key === 'admitted_bits') out.admitted_list = address;
  }
  return out as unknown as Round;
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
    const address = round ? roundListAddress(state.run_id, round) : undefined;
    if (!round || address === undefined || known.has(address)) continue;
    // No test of `admitted` here: a full replica's round with nothing admitted may hold none, and a light
    // state's missing list is caught by the hash below.
    const frame = encodeAdmittedList(listOfRound(state.run_id, round));
    if (bytesToHex(sha256(frame)) === address) out.push({ address, frame });
  }
  return out;
}
