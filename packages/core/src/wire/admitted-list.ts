// AdmittedList: a closed round's admitted results (slot and commitment each), named by the round's
// `admitted_root` (coordinator/round-outcome.ts) and addressed by `admitted_list`, the SHA-256 of this
// frame's canonical bytes. A light replica knows both from the round outcome; it fetches the list from any
// peer as a content-addressed blob (the relay's HTTP route is the fallback), checks the root itself, and then
// knows every commitment of the round as a full replica does (docs/protocol.md "Round outcomes and light
// replicas").
//
// | field   | encoding                                                                                  |
// |---------|-------------------------------------------------------------------------------------------|
// | header  | "MT" ‖ version ‖ type 0x36                                                                |
// | runId   | string, 1..64 bytes                                                                       |
// | step    | varint u32: the round's step                                                              |
// | count   | varint ≤ limits.maxClients                                                                |
// | entries | count × (dSlot varint u32: the slot minus the previous one's minus 1 (the first: the slot) |
// |         | ‖ commitment 32 B), slots ascending                                                       |
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { roundAssignments } from '../coordinator/queries.ts';
import { roundAdmitted, roundAtHeight } from '../state/rounds.ts';
import { admittedLeaf, merkleRoot } from '../crypto/merkle.ts';
import { bytesEqual, bytesToHex, hexToBytes, sha256 } from '../crypto/index.ts';
import type { ByteReader, ByteWriter } from './codec.ts';
import { U32_MAX } from './codec.ts';
import { checkCount, needItems, readRunId, writeRunId } from './common.ts';
import { COMMITMENT_BYTES } from './commitment.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export interface AdmittedEntry {
  slot: number;
  commitment: Uint8Array;
}

export interface AdmittedList {
  runId: string;
  step: number;
  /** Slots ascending. */
  entries: AdmittedEntry[];
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

/** The root the list hashes to: what `admitted_root` (hex) of its round must be. */
export function admittedListRoot(list: AdmittedList): Uint8Array {
  return merkleRoot(list.entries.map((e) => admittedLeaf(e.slot, e.commitment)));
}

/**
 * Throws WireError('inconsistent') unless `list` is the one whose root is `rootHex` (a round's
 * `admitted_root`), for run `runId` and step `step`: what a replica checks before it trusts a list it fetched.
 */
export function checkAdmittedList(list: AdmittedList, runId: string, step: number, rootHex: string): void {
  if (list.runId !== runId || list.step !== step)
    throw new WireError('inconsistent', 'step', `the list is for ${list.runId} step ${list.step}`);
  if (!bytesEqual(admittedListRoot(list), hexToBytes(rootHex, 32)))
    throw new WireError('inconsistent', 'entries', `the list does not hash to ${rootHex.slice(0, 16)}…`);
}

export function writeAdmittedListPayload(w: ByteWriter, l: AdmittedList): void {
  writeRunId(w, l.runId);
  w.u32(l.step, 'step');
  checkCount(l.entries.length, w.limits.maxClients, 'count', 'maxClients');
  w.u32(l.entries.length, 'count');
  let prev = -1;
  l.entries.forEach((e, i) => {
    if (!Number.isInteger(e.slot) || e.slot <= prev || e.slot > U32_MAX)
      throw new WireError('inconsistent', `entries[${i}].slot`, 'slots ascend');
    w.u32(e.slot - prev - 1, `entries[${i}].slot`);
    w.fixed(e.commitment, COMMITMENT_BYTES, `entries[${i}].commitment`);
    prev = e.slot;
  });
}

export function readAdmittedListPayload(r: ByteReader): AdmittedList {
  const runId = readRunId(r);
  const step = r.u32('step');
  const count = r.u32('count');
  checkCount(count, r.limits.maxClients, 'count', 'maxClients');
  needItems(r, count, 1 + COMMITMENT_BYTES, 'entries');
  const entries: AdmittedEntry[] = [];
  let slot = -1;
  for (let i = 0; i < count; i++) {
    slot += r.u32(`entries[${i}].slot`) + 1;
    if (slot > U32_MAX) throw new WireError('inconsistent', `entries[${i}].slot`, 'slot past u32');
    entries.push({ slot, commitment: r.fixed(COMMITMENT_BYTES, `entries[${i}].commitment`) });
  }
  return { runId, step, entries };
}

export function encodeAdmittedList(l: AdmittedList, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('admittedList', limits);
  writeAdmittedListPayload(w, l);
  return w.finish();
}

export function decodeAdmittedList(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): AdmittedList {
  const r = openFrameOf('admittedList', bytes, limits);
  const l = readAdmittedListPayload(r);
  r.end('admittedList');
  return l;
}

/**
 * Hex SHA-256 of the list's canonical frame: the round's `admitted_list`, the blob address peers serve the
 * frame under. The encoding is canonical (slots ascending, minimal varints), so one list has one address.
 */
export function admittedListAddress(list: AdmittedList): string {
  return bytesToHex(sha256(encodeAdmittedList(list)));
}

/**
 * A light replica's state with the admitted lists it holds put back into their rounds (`admitted`, by slot),
 * so the client logic that reads commitments — witnessing, verification, apply — runs on it as on a full
 * replica's. A view for that logic only: its hash is not the summary's. `lists` maps a round's
 * admitted_root to its checked list; closed rounds whose list is missing keep no `admitted`
 * (missingAdmittedRoots names them).
 */
export function hydrateState(
  state: CoordinatorState,
  lists: ReadonlyMap<string, AdmittedList>,
): CoordinatorState {
  let rounds: CoordinatorState['epoch']['rounds'] | null = null;
  state.epoch.rounds.forEach((round, i) => {
    if (!round || round.admitted !== undefined || round.admitted_root === undefined) return;
    const list = lists.get(round.admitted_root);
    if (!list) return;
    const admitted: (string | null)[] = roundAssignments(state, round).map(() => null);
    for (const e of list.entries) if (e.slot < admitted.length) admitted[e.slot] = bytesToHex(e.commitment);
    rounds ??= state.epoch.rounds.slice();
    rounds[i] = { ...round, admitted };
  });
  return rounds ? { ...state, epoch: { ...state.epoch, rounds } } : state;
}

/** A closed round's admitted list, as a light replica asks for it. */
export interface AdmittedListRef {
  /** The round's admitted_root (Merkle root) and admitted_list (SHA-256 of the frame), hex. */
  root: string;
  address: string;
  step: number;
}

/** Closed rounds of `state` (with an admitted_root) whose admitted list is neither in the state nor in `lists`. */
export function missingAdmittedRoots(
  state: CoordinatorState,
  lists: ReadonlyMap<string, AdmittedList>,
): AdmittedListRef[] {
  const out: AdmittedListRef[] = [];
  for (const round of state.epoch.rounds)
    if (
      round?.admitted_root !== undefined &&
      round.admitted_list !== undefined &&
      round.admitted === undefined &&
      !lists.has(round.admitted_root)
    )
      out.push({ root: round.admitted_root, address: round.admitted_list, step: round.step });
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
