// StateSnapshot: the relay's full coordinator state for one run, pushed after join and after every
// transition (apps/relay/PROTOCOL.md). Clients run core's pure queries (currentRound, roundAssignments,
// isWitness, …) on `state`, so the relay holds no protocol rules. The compact CoordinatorStateBroadcast is
// for dashboards; this frame is what trainers follow.
//
// | field      | encoding                                                                  |
// |------------|---------------------------------------------------------------------------|
// | header     | "MT" ‖ version ‖ type 0x31                                                |
// | runId      | string, 1..64 bytes                                                       |
// | seq        | varint ≤ 2^53−1: the run's transition counter; larger = newer             |
// | serverTime | varint ≤ 2^53−1: unix milliseconds when the relay sent it                 |
// | paramHash  | u8 0 = absent, 1 = present ‖ epoch varint u32 ‖ 32 B: the majority         |
// |            | parameter hash of the latest epoch that has one                           |
// | table      | varint u32 count ‖ count × 32 B: the state's interned values               |
// | state      | string ≤ limits.maxFrameBytes: JSON of the CoordinatorState with its ids   |
// |            | interned (state-interning.ts)                                              |
//
// The state is JSON because CoordinatorState is defined as JSON-safe data (state/coordinator-state.ts), and one
// encoding of it keeps relay, clients and the SQLite snapshots in agreement; its 64-hex-digit ids and the
// PeerIds derived from them are interned into the table (about a third of the bytes at 1,000 clients), and
// decoding restores the exact JSON text, so the state hash is that of the uninterned state. Canonical like
// every other field: the text must be exactly what JSON.stringify prints for the value it parses to (no
// whitespace, no alternative number spellings) and interned the one way state-interning.ts allows, so a frame
// still has one spelling. The decoder checks the envelope (an object with `version` 1 and `run_id` = runId);
// the relay is the source of truth for the rest.
import type { ByteReader, ByteWriter } from './codec.ts';
import { needItems, readRunId, writeRunId } from './common.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { PARAM_HASH_BYTES } from './param-hash.ts';
import { externState, internState, INTERNED_VALUE_BYTES, type InternedState } from './state-interning.ts';

export interface SnapshotParamHash {
  epoch: number;
  hash: Uint8Array;
}

export interface StateSnapshot {
  runId: string;
  seq: number;
  /** Unix milliseconds on the relay when it sent the snapshot. */
  serverTime: number;
  paramHash?: SnapshotParamHash;
  state: CoordinatorState;
}

function checkEnvelope(state: unknown, runId: string): asserts state is CoordinatorState {
  if (typeof state !== 'object' || state === null || Array.isArray(state))
    throw new WireError('inconsistent', 'state', 'state must be a JSON object');
  const s = state as { version?: unknown; run_id?: unknown };
  if (s.version !== 1)
    throw new WireError('inconsistent', 'state.version', `state version ${String(s.version)}, expected 1`);
  if (s.run_id !== runId)
    throw new WireError('inconsistent', 'state.run_id', 'state.run_id differs from the frame runId');
}

function writePayload(w: ByteWriter, s: StateSnapshot): void {
  writeRunId(w, s.runId);
  w.u53(s.seq, 'seq');
  w.u53(s.serverTime, 'serverTime');
  if (s.paramHash === undefined) {
    w.u8(0, 'paramHash');
  } else {
    w.u8(1, 'paramHash');
    w.u32(s.paramHash.epoch, 'paramHash.epoch');
    w.fixed(s.paramHash.hash, PARAM_HASH_BYTES, 'paramHash.hash');
  }
  checkEnvelope(s.state, s.runId);
  let interned: InternedState;
  try {
    interned = internState(s.state);
  } catch (e) {
    throw new WireError('inconsistent', 'state', `state is not JSON-safe: ${(e as Error).message}`);
  }
  w.u32(interned.table.length, 'state.table');
  for (const v of interned.table) w.fixed(v, INTERNED_VALUE_BYTES, 'state.table');
  w.string(interned.text, w.limits.maxFrameBytes, 'state');
}

export function encodeStateSnapshot(s: StateSnapshot, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('stateSnapshot', limits);
  writePayload(w, s);
  return w.finish();
}

export function readStateSnapshotPayload(r: ByteReader): StateSnapshot {
  const runId = readRunId(r);
  const seq = r.u53('seq');
  const serverTime = r.u53('serverTime');
  const tag = r.u8('paramHash');
  let paramHash: SnapshotParamHash | undefined;
  if (tag === 1) {
    const epoch = r.u32('paramHash.epoch');
    paramHash = { epoch, hash: r.fixed(PARAM_HASH_BYTES, 'paramHash.hash') };
  } else if (tag !== 0) {
    throw new WireError('inconsistent', 'paramHash', `option tag must be 0 or 1, got ${tag}`);
  }
  const count = r.u32('state.table');
  needItems(r, count, INTERNED_VALUE_BYTES, 'state.table');
  const table: Uint8Array[] = [];
  for (let i = 0; i < count; i++) table.push(r.fixed(INTERNED_VALUE_BYTES, 'state.table'));
  const state = externState(table, r.string(r.limits.maxFrameBytes, 'state'));
  checkEnvelope(state, runId);
  const out: StateSnapshot = { runId, seq, serverTime, state };
  if (paramHash !== undefined) out.paramHash = paramHash;
  return out;
}

export function decodeStateSnapshot(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): StateSnapshot {
  const r = openFrameOf('stateSnapshot', bytes, limits);
  const s = readStateSnapshotPayload(r);
  r.end('stateSnapshot');
  return s;
}
