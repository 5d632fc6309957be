// CoordinatorStateBroadcast: what the relay pushes to clients after each transition. A summary in its own
// shape, independent of the coordinator module's internal state type, so either can evolve alone; the
// relay maps one to the other. Compact enough for 10,000 clients: 33 bytes per client (~330 KB).
//
// | field          | encoding                                                                |
// |----------------|-------------------------------------------------------------------------|
// | header         | "MT" ‖ version ‖ type 0x30                                              |
// | runId          | string, 1..64 bytes                                                     |
// | runState       | u8: Psyche's RunState numbering (0 Uninitialized … 7 Paused)            |
// | epoch          | varint u32                                                              |
// | step           | varint u32                                                              |
// | round          | u8 0 = null, 1 = present ‖ height varint u32 ‖ dataIndex varint ≤ 2^53−1 |
// |                | ‖ randomSeed 8 B (the u64, most significant byte first = hex order)     |
// |                | ‖ clientsLen varint u32                                                 |
// | phaseStartedAt | varint ≤ 2^53−1 (unix seconds)                                          |
// | pendingPause   | bool                                                                    |
// | clientCount    | varint ≤ limits.maxClients                                              |
// | clients        | clientCount × (pubkey 32 B ‖ state u8: 0 Healthy, 1 Dropped,            |
// |                | 2 Withdrawn, 3 Ejected)                                                 |
// | witnessCount   | varint u32                                                              |
// | quorum         | varint u32                                                              |
// | paramHash      | u8 0 = absent, 1 = present ‖ 32 B                                       |
import type { ByteReader, ByteWriter } from './codec.ts';
import { checkCount, needItems, readRunId, writeRunId } from './common.ts';
import { bytesToHex, hexToBytes, PUBLIC_KEY_BYTES } from '../crypto/index.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export const RUN_STATE_NAMES = [
  'Uninitialized',
  'WaitingForMembers',
  'Warmup',
  'RoundTrain',
  'RoundWitness',
  'Cooldown',
  'Finished',
  'Paused',
] as const;
export type RunStateName = (typeof RUN_STATE_NAMES)[number];

export const CLIENT_STATE_NAMES = ['Healthy', 'Dropped', 'Withdrawn', 'Ejected'] as const;
export type ClientStateName = (typeof CLIENT_STATE_NAMES)[number];

export interface BroadcastRound {
  height: number;
  dataIndex: number;
  /** u64 seed as 16 lower-case hex digits, most significant first (the selection module's form). */
  randomSeed: string;
  clientsLen: number;
}

export interface BroadcastClient {
  pubkey: Uint8Array;
  state: ClientStateName;
}

export interface CoordinatorStateBroadcast {
  runId: string;
  runState: RunStateName;
  epoch: number;
  step: number;
  round: BroadcastRound | null;
  /** Unix seconds at which the current phase started. */
  phaseStartedAt: number;
  pendingPause: boolean;
  clients: BroadcastClient[];
  witnessCount: number;
  quorum: number;
  /** SHA-256 of the parameters, when known (replicas compare it to detect divergence). */
  paramHash?: Uint8Array;
}

const CLIENT_ENTRY_BYTES = PUBLIC_KEY_BYTES + 1;
const SEED_HEX = /^[0-9a-f]{16}$/;

export function writeCoordinatorStatePayload(w: ByteWriter, s: CoordinatorStateBroadcast): void {
  writeRunId(w, s.runId);
  const rs = RUN_STATE_NAMES.indexOf(s.runState);
  if (rs < 0) throw new WireError('inconsistent', 'runState', `unknown run state ${String(s.runState)}`);
  w.u8(rs, 'runState');
  w.u32(s.epoch, 'epoch');
  w.u32(s.step, 'step');
  if (s.round === null) {
    w.u8(0, 'round');
  } else {
    w.u8(1, 'round');
    w.u32(s.round.height, 'round.height');
    w.u53(s.round.dataIndex, 'round.dataIndex');
    // Lower-case only: the decoder yields lower case, and one spelling per value keeps round trips exact.
    if (typeof s.round.randomSeed !== 'string' || !SEED_HEX.test(s.round.randomSeed)) {
      throw new WireError('inconsistent', 'round.randomSeed', 'must be 16 lower-case hex digits');
    }
    w.raw(hexToBytes(s.round.randomSeed));
    w.u32(s.round.clientsLen, 'round.clientsLen');
  }
  w.u53(s.phaseStartedAt, 'phaseStartedAt');
  w.bool(s.pendingPause, 'pendingPause');
  if (!Array.isArray(s.clients)) throw new WireError('inconsistent', 'clients', 'not an array');
  checkCount(s.clients.length, w.limits.maxClients, 'clients', 'maxClients');
  w.u32(s.clients.length, 'clientCount');
  for (let i = 0; i < s.clients.length; i++) {
    const c = s.clients[i]!;
    w.fixed(c.pubkey, PUBLIC_KEY_BYTES, `clients[${i}].pubkey`);
    const st = CLIENT_STATE_NAMES.indexOf(c.state);
    if (st < 0)
      throw new WireError('inconsistent', `clients[${i}].state`, `unknown client state ${String(c.state)}`);
    w.u8(st, `clients[${i}].state`);
  }
  w.u32(s.witnessCount, 'witnessCount');
  w.u32(s.quorum, 'quorum');
  if (s.paramHash === undefined) {
    w.u8(0, 'paramHash');
  } else {
    w.u8(1, 'paramHash');
    w.fixed(s.paramHash, 32, 'paramHash');
  }
}

function readOptionTag(r: ByteReader, field: string): boolean {
  const t = r.u8(field);
  if (t > 1) throw new WireError('inconsistent', field, `option tag must be 0 or 1, got ${t}`);
  return t === 1;
}

export function readCoordinatorStatePayload(r: ByteReader): CoordinatorStateBroadcast {
  const runId = readRunId(r);
  const rsByte = r.u8('runState');
  const runState = RUN_STATE_NAMES[rsByte];
  if (runState === undefined) throw new WireError('inconsistent', 'runState', `unknown run state ${rsByte}`);
  const epoch = r.u32('epoch');
  const step = r.u32('step');
  let round: BroadcastRound | null = null;
  if (readOptionTag(r, 'round')) {
    const height = r.u32('round.height');
    const dataIndex = r.u53('round.dataIndex');
    const randomSeed = bytesToHex(r.take(8, 'round.randomSeed'));
    const clientsLen = r.u32('round.clientsLen');
    round = { height, dataIndex, randomSeed, clientsLen };
  }
  const phaseStartedAt = r.u53('phaseStartedAt');
  const pendingPause = r.bool('pendingPause');
  const count = r.u32('clientCount');
  checkCount(count, r.limits.maxClients, 'clients', 'maxClients');
  needItems(r, count, CLIENT_ENTRY_BYTES, 'clients');
  // One copy for the whole table; each pubkey is a view into it (10,000 small copies would cost more).
  const table = r.fixed(count * CLIENT_ENTRY_BYTES, 'clients');
  const clients: BroadcastClient[] = new Array<BroadcastClient>(count);
  for (let i = 0, o = 0; i < count; i++, o += CLIENT_ENTRY_BYTES) {
    const stByte = table[o + PUBLIC_KEY_BYTES]!;
    const state = CLIENT_STATE_NAMES[stByte];
    if (state === undefined)
      throw new WireError('inconsistent', `clients[${i}].state`, `unknown client state ${stByte}`);
    clients[i] = { pubkey: table.subarray(o, o + PUBLIC_KEY_BYTES), state };
  }
  const witnessCount = r.u32('witnessCount');
  const quorum = r.u32('quorum');
  const s: CoordinatorStateBroadcast = {
    runId,
    runState,
    epoch,
    step,
    round,
    phaseStartedAt,
    pendingPause,
    clients,
    witnessCount,
    quorum,
  };
  if (readOptionTag(r, 'paramHash')) s.paramHash = r.fixed(32, 'paramHash');
  return s;
}

export function encodeCoordinatorState(
  s: CoordinatorStateBroadcast,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): Uint8Array {
  const w = frameWriter('coordinatorState', limits);
  writeCoordinatorStatePayload(w, s);
  return w.finish();
}

export function decodeCoordinatorState(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): CoordinatorStateBroadcast {
  const r = openFrameOf('coordinatorState', bytes, limits);
  const s = readCoordinatorStatePayload(r);
  r.end('coordinatorState');
  return s;
}
