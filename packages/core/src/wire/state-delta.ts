// StateDelta and ResyncRequest: how clients follow the relay's coordinator state after the one StateSnapshot
// of their join (apps/relay/PROTOCOL.md). A delta lists the transitions the relay applied, in order, each the
// event it fed `tick` with its `now` and the entropy mixed in first; replaying them (replica/replay.ts) gives the
// relay's exact state, whose canonical hash the relay sends now and then so a replica can check itself. What
// one change costs a client is one small event, whatever the size of the run.
//
// StateDelta:
// | field       | encoding                                                                     |
// |-------------|------------------------------------------------------------------------------|
// | header      | "MT" ‖ version ‖ type 0x33                                                   |
// | runId       | string, 1..64 bytes                                                          |
// | fromSeq     | varint ≤ 2^53−1: the seq the first transition applies to; transition i       |
// |             | (0-based) leads to seq fromSeq + i + 1                                       |
// | count       | varint 1..MAX_DELTA_TRANSITIONS; fromSeq + count ≤ 2^53−1                    |
// | now         | varint ≤ 2^53−1: unix seconds of the first transition                        |
// | transitions | count × (head u8: event type (transition.ts) in bits 0–3, bit 4 = entropy,  |
// |             | bits 5–7 zero ‖ dNow: zigzag varint, `now` minus the previous transition's   |
// |             | (0 for the first) ‖ entropy: bytes ≤ 64 if bit 4 ‖ the event's payload)      |
// | stateHash   | u8 0 = absent, 1 = present ‖ 32 B: stateHash (state-hash.ts) of the state at |
// |             | seq fromSeq + count                                                          |
// | paramHash   | u8 0/1 ‖ epoch varint u32 ‖ 32 B: as in StateSnapshot, when it changed      |
//
// ResyncRequest (client → relay):
// | field     | encoding                                                                       |
// |-----------|--------------------------------------------------------------------------------|
// | header    | "MT" ‖ version ‖ type 0x34                                                     |
// | runId     | string, 1..64 bytes                                                            |
// | seq       | varint ≤ 2^53−1: the seq of the state the client holds                         |
// | reason    | u8: 0 = gap (a delta began past `seq`), 1 = mismatch (the replayed state at    |
// |           | `seq` does not hash to what the relay sent)                                    |
// | stateHash | 32 B, only for a mismatch: the client's hash of its state at `seq`            |
import type { ByteReader, ByteWriter } from './codec.ts';
import { U53_MAX } from './codec.ts';
import { readRunId, writeRunId } from './common.ts';
import { MAX_NOW_STEP, readFrameHashes, unzigzag, writeFrameHashes, zigzag } from './delta-fields.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import type { SnapshotParamHash } from './state-snapshot.ts';
import { STATE_HASH_BYTES } from './state-hash.ts';
import type { WireEvent } from './transition.ts';
import {
  MAX_ENTROPY_BYTES,
  readEventPayload,
  WIRE_EVENT_TYPE,
  wireEventTypeOf,
  writeEventPayload,
} from './transition.ts';

/** Most transitions in one StateDelta (a relay splits a larger batch into several frames). */
export const MAX_DELTA_TRANSITIONS = 65_536;
const ENTROPY_FLAG = 0x10;

/** One transition as the relay applied it: `now` in unix seconds, `entropy` mixed in before the event. */
export interface WireTransition {
  now: number;
  /** Entropy the relay fed as an `entropy` event just before `event` (null: none). */
  entropy: Uint8Array | null;
  event: WireEvent;
}

export interface StateDelta {
  runId: string;
  /** The seq the first transition applies to. */
  fromSeq: number;
  transitions: WireTransition[];
  /** stateHash of the state at fromSeq + transitions.length (the relay sends it periodically). */
  stateHash?: Uint8Array;
  /** The run's agreed parameter hash, when it changed since the previous frame. */
  paramHash?: SnapshotParamHash;
}

export type ResyncReason = 'gap' | 'mismatch';

export interface ResyncRequest {
  runId: string;
  seq: number;
  reason: ResyncReason;
  /** The client's hash of its state at `seq` (mismatch only). */
  stateHash?: Uint8Array;
}

/** The seq a delta leads to. */
export function deltaEndSeq(d: Pick<StateDelta, 'fromSeq' | 'transitions'>): number {
  return d.fromSeq + d.transitions.length;
}

export function writeStateDeltaPayload(w: ByteWriter, d: StateDelta): void {
  writeRunId(w, d.runId);
  w.u53(d.fromSeq, 'fromSeq');
  const ts = d.transitions;
  if (!Array.isArray(ts) || ts.length < 1 || ts.length > MAX_DELTA_TRANSITIONS)
    throw new WireError('limit', 'transitions', `1..${MAX_DELTA_TRANSITIONS} transitions per frame`);
  if (d.fromSeq + ts.length > U53_MAX) throw new WireError('oversized', 'fromSeq', 'seq past 2^53−1');
  w.u32(ts.length, 'count');
  w.u53(ts[0]!.now, 'now');
  let prev = ts[0]!.now;
  ts.forEach((t, i) => {
    const field = `transitions[${i}]`;
    if (!Number.isSafeInteger(t.now) || t.now < 0)
      throw new WireError('inconsistent', `${field}.now`, 'not unix seconds');
    const step = t.now - prev;
    if (Math.abs(step) > MAX_NOW_STEP)
      throw new WireError('oversized', `${field}.now`, 'clock jump too large');
    const type = t.event?.type;
    if (typeof type !== 'string' || !Object.hasOwn(WIRE_EVENT_TYPE, type))
      throw new WireError('inconsistent', `${field}.event`, `unknown event type ${String(type)}`);
    w.u8(WIRE_EVENT_TYPE[type] | (t.entropy === null ? 0 : ENTROPY_FLAG), `${field}.head`);
    w.u53(zigzag(step), `${field}.now`);
    if (t.entropy !== null) w.bytes(t.entropy, MAX_ENTROPY_BYTES, `${field}.entropy`);
    writeEventPayload(w, t.event);
    prev = t.now;
  });
  writeFrameHashes(w, d.stateHash, d.paramHash);
}

export function readStateDeltaPayload(r: ByteReader): StateDelta {
  const runId = readRunId(r);
  const fromSeq = r.u53('fromSeq');
  const count = r.u32('count');
  if (count < 1) throw new WireError('inconsistent', 'count', 'a delta carries at least one transition');
  if (count > MAX_DELTA_TRANSITIONS)
    throw new WireError('limit', 'count', `${count} transitions exceeds ${MAX_DELTA_TRANSITIONS}`);
  if (fromSeq + count > U53_MAX) throw new WireError('oversized', 'fromSeq', 'seq past 2^53−1');
  // Each transition takes at least its head and dNow.
  if (count * 2 > r.remaining)
    throw new WireError(
      'truncated',
      'transitions',
      `${count} transitions cannot fit in ${r.remaining} bytes`,
    );
  let now = r.u53('now');
  const transitions: WireTransition[] = [];
  for (let i = 0; i < count; i++) {
    const field = `transitions[${i}]`;
    const head = r.u8(`${field}.head`);
    if (head & 0xe0) throw new WireError('inconsistent', `${field}.head`, 'reserved bits set');
    const type = wireEventTypeOf(head & 0x0f, `${field}.head`);
    const step = unzigzag(r.u53(`${field}.now`));
    if (i === 0 && step !== 0)
      throw new WireError('inconsistent', `${field}.now`, 'the first transition is at the frame time');
    if (Math.abs(step) > MAX_NOW_STEP)
      throw new WireError('oversized', `${field}.now`, 'clock jump too large');
    now += step;
    if (now < 0 || now > U53_MAX) throw new WireError('inconsistent', `${field}.now`, 'not unix seconds');
    const entropy = head & ENTROPY_FLAG ? r.bytesField(MAX_ENTROPY_BYTES, `${field}.entropy`) : null;
    transitions.push({ now, entropy, event: readEventPayload(r, type) });
  }
  return { runId, fromSeq, transitions, ...readFrameHashes(r) };
}

export function encodeStateDelta(d: StateDelta, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('stateDelta', limits);
  writeStateDeltaPayload(w, d);
  return w.finish();
}

export function decodeStateDelta(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): StateDelta {
  const r = openFrameOf('stateDelta', bytes, limits);
  const d = readStateDeltaPayload(r);
  r.end('stateDelta');
  return d;
}

const REASONS: readonly ResyncReason[] = ['gap', 'mismatch'];

export function writeResyncRequestPayload(w: ByteWriter, q: ResyncRequest): void {
  writeRunId(w, q.runId);
  w.u53(q.seq, 'seq');
  const reason = REASONS.indexOf(q.reason);
  if (reason < 0) throw new WireError('inconsistent', 'reason', `unknown reason ${String(q.reason)}`);
  w.u8(reason, 'reason');
  if (q.reason === 'mismatch') {
    if (q.stateHash === undefined)
      throw new WireError('inconsistent', 'stateHash', 'a mismatch report carries the client hash');
    w.fixed(q.stateHash, STATE_HASH_BYTES, 'stateHash');
  } else if (q.stateHash !== undefined) {
    throw new WireError('inconsistent', 'stateHash', 'only a mismatch report carries a hash');
  }
}

export function readResyncRequestPayload(r: ByteReader): ResyncRequest {
  const runId = readRunId(r);
  const seq = r.u53('seq');
  const code = r.u8('reason');
  const reason = REASONS[code];
  if (reason === undefined) throw new WireError('inconsistent', 'reason', `unknown reason ${code}`);
  const q: ResyncRequest = { runId, seq, reason };
  if (reason === 'mismatch') q.stateHash = r.fixed(STATE_HASH_BYTES, 'stateHash');
  return q;
}

export function encodeResyncRequest(q: ResyncRequest, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('resyncRequest', limits);
  writeResyncRequestPayload(w, q);
  return w.finish();
}

export function decodeResyncRequest(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): ResyncRequest {
  const r = openFrameOf('resyncRequest', bytes, limits);
  const q = readResyncRequestPayload(r);
  r.end('resyncRequest');
  return q;
}
