// AdmittedList: a closed round's admitted results (slot and commitment each), named by the round's
// `admitted_list` (replica/admitted-lists.ts), the SHA-256 of this frame's canonical bytes. A light
// replica knows the address from the round outcome; it fetches the list from any peer as a content-addressed
// blob (the relay's HTTP route is the fallback), checks the hash itself (replica/admitted-lists.ts), and then
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
import { bytesToHex, sha256 } from '../crypto/index.ts';
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
