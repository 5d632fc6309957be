// LightDelta: how a light replica follows the relay (docs/protocol.md "Round outcomes and light replicas").
// The relay's log has one transition per seq; a light replica sees only the transitions that change the summary of the state
// (coordinator/summary.ts), each as the light events of coordinator/light-replica.ts. A round's evidence —
// thousands of admitted results, attestations, verdicts — changes nothing a light replica holds and is not
// sent; what is sent per round is its timers, its witnesses' indices and one round outcome (two or three
// bitmaps of ⌈slots/8⌉ bytes, a 32-byte root and the admitted list's 32-byte address). The seqs in between are skipped, not listed.
//
// | field       | encoding                                                                           |
// |-------------|------------------------------------------------------------------------------------|
// | header      | "MT" ‖ version ‖ type 0x35                                                         |
// | runId       | string, 1..64 bytes                                                                |
// | fromSeq     | varint ≤ 2^53−1: the seq the frame starts from                                     |
// | span        | varint ≥ 1: the frame leads to seq fromSeq + span; fromSeq + span ≤ 2^53−1         |
// | count       | varint ≤ span: transitions listed                                                  |
// | now         | varint ≤ 2^53−1, only if count > 0: unix seconds of the first transition          |
// | transitions | count × (dSeq varint ≥ 1: its seq minus the previous one's (the first: minus       |
// |             | fromSeq), the last ≤ fromSeq + span ‖ dNow zigzag varint (0 for the first) ‖       |
// |             | entropy u8 0/1 ‖ bytes ≤ 64 ‖ events varint 0..8 (≥ 1 without entropy) ‖ events)  |
// | stateHash   | u8 0/1 ‖ 32 B: stateHash of the light replica's state at fromSeq + span            |
// | paramHash   | u8 0/1 ‖ epoch varint u32 ‖ 32 B: as in StateDelta                                 |
//
// | kind | light event           | payload                                                               |
// |------|-----------------------|-----------------------------------------------------------------------|
// | 0–14 | the same-numbered     | its payload (transition.ts); only tick, entropy, join, leave, eject,   |
// |      | event                 | warmup_witness, pause, resume and update_config                        |
// | 16   | tick ending a round   | height varint u32 ‖ admitted bits ‖ root 32 B ‖ list address 32 B ‖    |
// |      |                       | u8 0/1/2 ‖ accepted bits                                               |
// |      |                       | ‖ alive bits (‖ vetted bits ‖ struck bits when 2: an anchored run). Bits (≤ ⌈maxClients/8⌉ bytes): u8 0 ‖ bytes, or u8 1 / 2  |
// |      |                       | ‖ length varint ‖ count varint ‖ gaps between the positions of its     |
// |      |                       | zero / one bits; whichever is shortest (see writeBits)                 |
// | 17   | witness_seen          | step varint u32 ‖ roster index varint u32                              |
// | 19   | round_filled          | step varint u32                                                        |
// | 18   | retire                | cheats varint ‖ (client varint u32 ‖ height varint u32)… ‖ dropped    |
// |      |                       | varint ‖ client varint u32… ‖ ejected varint ‖ key 32 B…              |
// (counts ≤ limits.maxClients)
import type { RoundOutcome } from '../coordinator/round-outcome.ts';
import type { LightEvent } from '../coordinator/light-replica.ts';
import { lightEventsFor, lightTick } from '../coordinator/light-replica.ts';
import { fromBase64, toBase64 } from '../coordinator/stored-attestation.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import type { TickResult } from '../coordinator/events.ts';
import { tick } from '../coordinator/tick.ts';
import { bytesToHex, hexToBytes, PUBLIC_KEY_BYTES } from '../crypto/index.ts';
import type { ByteReader, ByteWriter } from './codec.ts';
import { U53_MAX } from './codec.ts';
import { checkCount, readRunId, writeRunId } from './common.ts';
import {
  MAX_NOW_STEP,
  readFrameHashes,
  readOptionTag,
  unzigzag,
  writeFrameHashes,
  zigzag,
} from './delta-fields.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import { compactEvent, expandEvent, type AppliedTransition } from './replay.ts';
import type { SnapshotParamHash } from './state-snapshot.ts';
import { stateHash } from './state-hash.ts';
import type { WireEvent } from './transition.ts';
import {
  MAX_ENTROPY_BYTES,
  readEventPayload,
  WIRE_EVENT_TYPE,
  wireEventTypeOf,
  writeEventPayload,
} from './transition.ts';
import { maxAttestationBytes } from './witness.ts';

const PLAIN = new Set<WireEvent['type']>([
  'tick',
  'entropy',
  'join',
  'leave',
  'eject',
  'warmupWitness',
  'pause',
  'resume',
  'updateConfig',
]);
const KIND_OUTCOME = 16;
const KIND_WITNESS_SEEN = 17;
const KIND_RETIRE = 18;
const KIND_ROUND_FILLED = 19;
const MAX_EVENTS = 8;
const ROOT_BYTES = 32;

export interface WireOutcome {
  height: number;
  admittedBits: Uint8Array;
  admittedRoot: Uint8Array;
  /** SHA-256 of the round's AdmittedList frame. */
  admittedList: Uint8Array;
  /** Both null when the ring held no round before the one that ended. */
  acceptedBits: Uint8Array | null;
  aliveBits: Uint8Array | null;
  /** An anchored run's judgements of the round before (round-outcome.ts); absent otherwise. */
  vettedBits?: Uint8Array;
  struckBits?: Uint8Array;
}

export type LightWireEvent =
  | { type: 'plain'; event: WireEvent }
  | { type: 'outcome'; outcome: WireOutcome }
  | { type: 'witnessSeen'; step: number; index: number }
  | { type: 'roundFilled'; step: number }
  | {
      type: 'retire';
      cheats: { client: number; height: number }[];
      dropped: number[];
      ejected: Uint8Array[];
    };

/** One transition of the relay's log as a light replica applies it. */
export interface LightTransition {
  /** The seq this transition leads to. */
  seq: number;
  now: number;
  /** Entropy applied first (an `entropy` event), as in StateDelta. */
  entropy: Uint8Array | null;
  events: LightWireEvent[];
}

export interface LightDelta {
  runId: string;
  fromSeq: number;
  /** The seq the frame leads to (transitions past the last listed one changed nothing a light replica holds). */
  toSeq: number;
  transitions: LightTransition[];
  /** stateHash of the light replica's state at toSeq. */
  stateHash?: Uint8Array;
  paramHash?: SnapshotParamHash;
}

// --- host side: from what tick did to light transitions ---------------------------------------------------

/**
 * The light form of one transition the host applied to `prev` (`t`, with result `r`): null when it changed
 * nothing a light replica holds. A tick that carries entropy is split as compactTransition does.
 */
export function lightTransitionOf(
  prev: CoordinatorState,
  t: AppliedTransition,
  r: TickResult,
  seq: number,
): LightTransition | null {
  let entropy = t.entropy;
  let event = t.event;
  if (event.type === 'tick' && event.entropy !== undefined) {
    entropy = event.entropy;
    event = { type: 'tick' };
  }
  const base = entropy === undefined ? prev : tick(prev, { type: 'entropy', entropy }, t.now).state;
  const light = lightEventsFor(base, event, r);
  const entropyBytes = entropy === undefined || base === prev ? null : hexToBytes(entropy);
  if (light.length === 0 && entropyBytes === null) return null;
  let s = base;
  const events: LightWireEvent[] = [];
  for (const e of light) {
    events.push(compactLightEvent(s, e));
    s = lightTick(s, e, t.now).state;
  }
  return { seq, now: t.now, entropy: entropyBytes, events };
}

function bitsOf(text: string | null, field: string): Uint8Array | null {
  if (text === null) return null;
  try {
    return fromBase64(text);
  } catch {
    throw new WireError('inconsistent', field, 'not base64');
  }
}

/** The wire form of a light event `state` (a full or light state: their refs agree) is about to take. */
export function compactLightEvent(state: CoordinatorState, e: LightEvent): LightWireEvent {
  switch (e.type) {
    case 'witness_seen':
      return { type: 'witnessSeen', step: e.step, index: e.index };
    case 'round_filled':
      return { type: 'roundFilled', step: e.step };
    case 'retire':
      return {
        type: 'retire',
        cheats: e.cheats.map((c) => ({ client: c.client_index, height: c.height })),
        dropped: [...e.dropped],
        ejected: e.ejected.map((id) => hexToBytes(id, PUBLIC_KEY_BYTES)),
      };
    case 'tick':
      if (e.outcome)
        return {
          type: 'outcome',
          outcome: {
            height: e.outcome.height,
            admittedBits: bitsOf(e.outcome.admitted_bits, 'admittedBits')!,
            admittedRoot: hexToBytes(e.outcome.admitted_root, ROOT_BYTES),
            admittedList: hexToBytes(e.outcome.admitted_list, ROOT_BYTES),
            acceptedBits: bitsOf(e.outcome.accepted_bits, 'acceptedBits'),
            aliveBits: bitsOf(e.outcome.alive_bits, 'aliveBits'),
            ...(typeof e.outcome.vetted_bits === 'string' && typeof e.outcome.struck_bits === 'string'
              ? {
                  vettedBits: bitsOf(e.outcome.vetted_bits, 'vettedBits')!,
                  struckBits: bitsOf(e.outcome.struck_bits, 'struckBits')!,
                }
              : {}),
          },
        };
      return { type: 'plain', event: { type: 'tick' } };
    default:
      return { type: 'plain', event: compactEvent(state, e) };
  }
}

/** The light event a wire event names in `state`; WireError('inconsistent') if it does not resolve. */
export function expandLightEvent(state: CoordinatorState, w: LightWireEvent): LightEvent {
  switch (w.type) {
    case 'witnessSeen':
      return { type: 'witness_seen', step: w.step, index: w.index };
    case 'roundFilled':
      return { type: 'round_filled', step: w.step };
    case 'retire':
      return {
        type: 'retire',
        cheats: w.cheats.map((c) => ({ client_index: c.client, height: c.height })),
        dropped: [...w.dropped],
        ejected: w.ejected.map(bytesToHex),
      };
    case 'outcome': {
      const o = w.outcome;
      const outcome: RoundOutcome = {
        height: o.height,
        admitted_bits: toBase64(o.admittedBits),
        admitted_root: bytesToHex(o.admittedRoot),
        admitted_list: bytesToHex(o.admittedList),
        accepted_bits: o.acceptedBits === null ? null : toBase64(o.acceptedBits),
        alive_bits: o.aliveBits === null ? null : toBase64(o.aliveBits),
        ...(o.vettedBits && o.struckBits
          ? { vetted_bits: toBase64(o.vettedBits), struck_bits: toBase64(o.struckBits) }
          : {}),
      };
      return { type: 'tick', outcome };
    }
    case 'plain': {
      const e = expandEvent(state, w.event);
      if (
        e.type === 'witness' ||
        e.type === 'result_admitted' ||
        e.type === 'verdict' ||
        e.type === 'health_check'
      )
        throw new WireError('inconsistent', 'event', `a light replica takes no ${e.type} events`);
      return e;
    }
  }
}

// --- replica side -----------------------------------------------------------------------------------------

export interface LightDeltaOutcome {
  state: CoordinatorState;
  seq: number;
  /** The delta starts past `seq` (ask for the missing part: ResyncRequest 'gap'). */
  gap: boolean;
  applied: number;
}

/**
 * Applies what `delta` holds past `seq` to the light replica `state` (at `seq`). Throws WireError when an
 * event does not fit the state (a replica that diverged, or a relay that lies: ask for a snapshot).
 */
export function applyLightDelta(state: CoordinatorState, seq: number, delta: LightDelta): LightDeltaOutcome {
  if (delta.fromSeq > seq) return { state, seq, gap: true, applied: 0 };
  let s = state;
  let applied = 0;
  for (const t of delta.transitions) {
    if (t.seq <= seq) continue;
    if (t.entropy !== null) s = mustApply(s, { type: 'entropy', entropy: bytesToHex(t.entropy) }, t.now);
    for (const w of t.events) s = mustApply(s, expandLightEvent(s, w), t.now);
    applied++;
  }
  return { state: s, seq: Math.max(seq, delta.toSeq), gap: false, applied };
}

function mustApply(state: CoordinatorState, e: LightEvent, now: number): CoordinatorState {
  const r = lightTick(state, e, now);
  if (r.error) throw new WireError('inconsistent', 'event', `${e.type}: ${r.error.message}`);
  return r.state;
}

/** The hash a light replica checks its state against (stateHash of the summary). */
export function lightStateHash(state: CoordinatorState): Uint8Array {
  return stateHash(state);
}

// --- codec ------------------------------------------------------------------------------------------------

/**
 * A round's bitmaps are nearly all ones in a healthy run (every slot admitted, accepted, alive) and nearly
 * all zeros in a failing one, so each is sent in the shortest of three spellings: the raw bytes; its length
 * and the positions of its zero bits; its length and the positions of its one bits (positions ascending, each
 * as the gap after the previous one). Then it costs bytes for the slots that are the exception, not for the
 * run's size. The decoder recomputes the encoder's choice and refuses any other spelling.
 */
const BITS_RAW = 0;
const BITS_ZEROS = 1;
const BITS_ONES = 2;

function positions(bits: Uint8Array, one: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < bits.length * 8; i++)
    if (((((bits[i >>> 3] as number) >>> (i & 7)) & 1) === 1) === one) out.push(i);
  return out;
}

function varintBytes(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

function listBytes(length: number, list: readonly number[]): number {
  let n = varintBytes(length) + varintBytes(list.length);
  let prev = -1;
  for (const p of list) {
    n += varintBytes(p - prev - 1);
    prev = p;
  }
  return n;
}

function bitsSpelling(bits: Uint8Array): { tag: number; list: number[] } {
  const zeros = positions(bits, false);
  const ones = positions(bits, true);
  const raw = varintBytes(bits.length) + bits.length;
  const z = listBytes(bits.length, zeros);
  const o = listBytes(bits.length, ones);
  if (raw <= z && raw <= o) return { tag: BITS_RAW, list: [] };
  return z <= o ? { tag: BITS_ZEROS, list: zeros } : { tag: BITS_ONES, list: ones };
}

function writeBits(w: ByteWriter, bits: Uint8Array, maxBytes: number, field: string): void {
  if (!(bits instanceof Uint8Array) || bits.length > maxBytes)
    throw new WireError('oversized', field, `bitmap of more than ${maxBytes} bytes`);
  const { tag, list } = bitsSpelling(bits);
  w.u8(tag, `${field}.spelling`);
  if (tag === BITS_RAW) {
    w.bytes(bits, maxBytes, field);
    return;
  }
  w.u32(bits.length, `${field}.length`);
  w.u32(list.length, `${field}.count`);
  let prev = -1;
  for (const p of list) {
    w.u32(p - prev - 1, `${field}.position`);
    prev = p;
  }
}

function readBits(r: ByteReader, maxBytes: number, field: string): Uint8Array {
  const tag = r.u8(`${field}.spelling`);
  let bits: Uint8Array;
  if (tag === BITS_RAW) bits = r.bytesField(maxBytes, field);
  else if (tag === BITS_ZEROS || tag === BITS_ONES) {
    const length = r.u32(`${field}.length`);
    if (length > maxBytes)
      throw new WireError('limit', field, `bitmap of ${length} bytes exceeds ${maxBytes}`);
    const count = r.u32(`${field}.count`);
    if (count > length * 8 || count > r.remaining)
      throw new WireError('inconsistent', `${field}.count`, `${count} positions cannot fit`);
    bits = new Uint8Array(length);
    if (tag === BITS_ZEROS) bits.fill(0xff);
    let at = -1;
    for (let i = 0; i < count; i++) {
      at += r.u32(`${field}.position`) + 1;
      if (at >= length * 8) throw new WireError('inconsistent', `${field}.position`, 'past the bitmap');
      bits[at >>> 3] = (bits[at >>> 3] as number) ^ (1 << (at & 7));
    }
  } else throw new WireError('inconsistent', `${field}.spelling`, `unknown bitmap spelling ${tag}`);
  if (bitsSpelling(bits).tag !== tag)
    throw new WireError('inconsistent', `${field}.spelling`, 'not the shortest spelling of the bitmap');
  return bits;
}

function writeLightEvent(w: ByteWriter, e: LightWireEvent, field: string): void {
  const maxBits = maxAttestationBytes(w.limits);
  switch (e.type) {
    case 'plain':
      if (!PLAIN.has(e.event.type))
        throw new WireError('inconsistent', field, `${e.event.type} is not a light event`);
      w.u8(WIRE_EVENT_TYPE[e.event.type], `${field}.kind`);
      writeEventPayload(w, e.event);
      return;
    case 'outcome': {
      const o = e.outcome;
      w.u8(KIND_OUTCOME, `${field}.kind`);
      w.u32(o.height, `${field}.height`);
      writeBits(w, o.admittedBits, maxBits, `${field}.admittedBits`);
      w.fixed(o.admittedRoot, ROOT_BYTES, `${field}.admittedRoot`);
      w.fixed(o.admittedList, ROOT_BYTES, `${field}.admittedList`);
      if ((o.acceptedBits === null) !== (o.aliveBits === null))
        throw new WireError('inconsistent', field, 'accepted and alive bits come together');
      if ((o.vettedBits === undefined) !== (o.struckBits === undefined) || (o.vettedBits && !o.acceptedBits))
        throw new WireError(
          'inconsistent',
          field,
          'vetted and struck bits come together, with accepted bits',
        );
      w.u8(o.acceptedBits === null ? 0 : o.vettedBits ? 2 : 1, `${field}.judged`);
      if (o.acceptedBits !== null && o.aliveBits !== null) {
        writeBits(w, o.acceptedBits, maxBits, `${field}.acceptedBits`);
        writeBits(w, o.aliveBits, maxBits, `${field}.aliveBits`);
      }
      if (o.vettedBits && o.struckBits) {
        writeBits(w, o.vettedBits, maxBits, `${field}.vettedBits`);
        writeBits(w, o.struckBits, maxBits, `${field}.struckBits`);
      }
      return;
    }
    case 'witnessSeen':
      w.u8(KIND_WITNESS_SEEN, `${field}.kind`);
      w.u32(e.step, `${field}.step`);
      w.u32(e.index, `${field}.index`);
      return;
    case 'roundFilled':
      w.u8(KIND_ROUND_FILLED, `${field}.kind`);
      w.u32(e.step, `${field}.step`);
      return;
    case 'retire': {
      const max = w.limits.maxClients;
      w.u8(KIND_RETIRE, `${field}.kind`);
      checkCount(e.cheats.length, max, `${field}.cheats`, 'maxClients');
      w.u32(e.cheats.length, `${field}.cheats`);
      for (const c of e.cheats) {
        w.u32(c.client, `${field}.cheats.client`);
        w.u32(c.height, `${field}.cheats.height`);
      }
      checkCount(e.dropped.length, max, `${field}.dropped`, 'maxClients');
      w.u32(e.dropped.length, `${field}.dropped`);
      for (const d of e.dropped) w.u32(d, `${field}.dropped`);
      checkCount(e.ejected.length, max, `${field}.ejected`, 'maxClients');
      w.u32(e.ejected.length, `${field}.ejected`);
      for (const k of e.ejected) w.fixed(k, PUBLIC_KEY_BYTES, `${field}.ejected`);
      return;
    }
  }
}

function readCount(r: ByteReader, field: string, itemBytes: number): number {
  const n = r.u32(field);
  checkCount(n, r.limits.maxClients, field, 'maxClients');
  if (n * itemBytes > r.remaining) throw new WireError('truncated', field, `${n} items cannot fit`);
  return n;
}

function readLightEvent(r: ByteReader, field: string): LightWireEvent {
  const kind = r.u8(`${field}.kind`);
  const maxBits = maxAttestationBytes(r.limits);
  switch (kind) {
    case KIND_OUTCOME: {
      const height = r.u32(`${field}.height`);
      const admittedBits = readBits(r, maxBits, `${field}.admittedBits`);
      const admittedRoot = r.fixed(ROOT_BYTES, `${field}.admittedRoot`);
      const admittedList = r.fixed(ROOT_BYTES, `${field}.admittedList`);
      const judged = r.u8(`${field}.judged`);
      if (judged > 2) throw new WireError('inconsistent', `${field}.judged`, 'must be 0, 1 or 2');
      const acceptedBits = judged ? readBits(r, maxBits, `${field}.acceptedBits`) : null;
      const aliveBits = judged ? readBits(r, maxBits, `${field}.aliveBits`) : null;
      const outcome: WireOutcome = {
        height,
        admittedBits,
        admittedRoot,
        admittedList,
        acceptedBits,
        aliveBits,
      };
      if (judged === 2) {
        outcome.vettedBits = readBits(r, maxBits, `${field}.vettedBits`);
        outcome.struckBits = readBits(r, maxBits, `${field}.struckBits`);
      }
      return { type: 'outcome', outcome };
    }
    case KIND_WITNESS_SEEN:
      return { type: 'witnessSeen', step: r.u32(`${field}.step`), index: r.u32(`${field}.index`) };
    case KIND_ROUND_FILLED:
      return { type: 'roundFilled', step: r.u32(`${field}.step`) };
    case KIND_RETIRE: {
      const cheats: { client: number; height: number }[] = [];
      const nc = readCount(r, `${field}.cheats`, 2);
      for (let i = 0; i < nc; i++)
        cheats.push({ client: r.u32(`${field}.cheats.client`), height: r.u32(`${field}.cheats.height`) });
      const dropped: number[] = [];
      const nd = readCount(r, `${field}.dropped`, 1);
      for (let i = 0; i < nd; i++) dropped.push(r.u32(`${field}.dropped`));
      const ejected: Uint8Array[] = [];
      const ne = readCount(r, `${field}.ejected`, PUBLIC_KEY_BYTES);
      for (let i = 0; i < ne; i++) ejected.push(r.fixed(PUBLIC_KEY_BYTES, `${field}.ejected`));
      return { type: 'retire', cheats, dropped, ejected };
    }
    default: {
      const type = wireEventTypeOf(kind, `${field}.kind`);
      if (!PLAIN.has(type))
        throw new WireError('inconsistent', `${field}.kind`, `${type} is not a light event`);
      return { type: 'plain', event: readEventPayload(r, type) };
    }
  }
}

export function writeLightDeltaPayload(w: ByteWriter, d: LightDelta): void {
  writeRunId(w, d.runId);
  w.u53(d.fromSeq, 'fromSeq');
  const span = d.toSeq - d.fromSeq;
  if (!Number.isSafeInteger(span) || span < 1)
    throw new WireError('inconsistent', 'toSeq', 'must follow fromSeq');
  w.u53(span, 'span');
  const ts = d.transitions;
  if (!Array.isArray(ts) || ts.length > span)
    throw new WireError('inconsistent', 'transitions', 'more transitions than seqs');
  w.u53(ts.length, 'count');
  let prevSeq = d.fromSeq;
  let prevNow = ts[0]?.now ?? 0;
  if (ts.length > 0) w.u53(prevNow, 'now');
  ts.forEach((t, i) => {
    const field = `transitions[${i}]`;
    if (!Number.isSafeInteger(t.seq) || t.seq <= prevSeq || t.seq > d.toSeq)
      throw new WireError('inconsistent', `${field}.seq`, 'seqs ascend within (fromSeq, toSeq]');
    w.u53(t.seq - prevSeq, `${field}.seq`);
    if (!Number.isSafeInteger(t.now) || t.now < 0 || Math.abs(t.now - prevNow) > MAX_NOW_STEP)
      throw new WireError('inconsistent', `${field}.now`, 'not unix seconds');
    w.u53(zigzag(t.now - prevNow), `${field}.now`);
    w.u8(t.entropy === null ? 0 : 1, `${field}.entropy`);
    if (t.entropy !== null) w.bytes(t.entropy, MAX_ENTROPY_BYTES, `${field}.entropy`);
    if (t.events.length > MAX_EVENTS || (t.events.length === 0 && t.entropy === null))
      throw new WireError('inconsistent', `${field}.events`, `1..${MAX_EVENTS} events (0 with entropy)`);
    w.u8(t.events.length, `${field}.events`);
    t.events.forEach((e, j) => writeLightEvent(w, e, `${field}.events[${j}]`));
    prevSeq = t.seq;
    prevNow = t.now;
  });
  writeFrameHashes(w, d.stateHash, d.paramHash);
}

export function readLightDeltaPayload(r: ByteReader): LightDelta {
  const runId = readRunId(r);
  const fromSeq = r.u53('fromSeq');
  const span = r.u53('span');
  if (span < 1 || fromSeq + span > U53_MAX) throw new WireError('inconsistent', 'span', 'bad seq span');
  const toSeq = fromSeq + span;
  const count = r.u53('count');
  if (count > span) throw new WireError('inconsistent', 'count', 'more transitions than seqs');
  // Each transition takes at least dSeq, dNow, the entropy tag and the event count.
  if (count * 4 > r.remaining)
    throw new WireError(
      'truncated',
      'transitions',
      `${count} transitions cannot fit in ${r.remaining} bytes`,
    );
  const transitions: LightTransition[] = [];
  let seq = fromSeq;
  let now = count > 0 ? r.u53('now') : 0;
  for (let i = 0; i < count; i++) {
    const field = `transitions[${i}]`;
    const dSeq = r.u53(`${field}.seq`);
    if (dSeq < 1 || seq + dSeq > toSeq)
      throw new WireError('inconsistent', `${field}.seq`, 'seqs ascend within (fromSeq, toSeq]');
    seq += dSeq;
    const step = unzigzag(r.u53(`${field}.now`));
    if (i === 0 && step !== 0)
      throw new WireError('inconsistent', `${field}.now`, 'the first transition is at the frame time');
    if (Math.abs(step) > MAX_NOW_STEP)
      throw new WireError('oversized', `${field}.now`, 'clock jump too large');
    now += step;
    if (now < 0 || now > U53_MAX) throw new WireError('inconsistent', `${field}.now`, 'not unix seconds');
    const entropy = readOptionTag(r, `${field}.entropy`)
      ? r.bytesField(MAX_ENTROPY_BYTES, `${field}.entropy`)
      : null;
    const n = r.u8(`${field}.events`);
    if (n > MAX_EVENTS || (n === 0 && entropy === null))
      throw new WireError('inconsistent', `${field}.events`, `1..${MAX_EVENTS} events (0 with entropy)`);
    const events: LightWireEvent[] = [];
    for (let j = 0; j < n; j++) events.push(readLightEvent(r, `${field}.events[${j}]`));
    transitions.push({ seq, now, entropy, events });
  }
  return { runId, fromSeq, toSeq, transitions, ...readFrameHashes(r) };
}

export function encodeLightDelta(d: LightDelta, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('lightDelta', limits);
  writeLightDeltaPayload(w, d);
  return w.finish();
}

export function decodeLightDelta(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): LightDelta {
  const r = openFrameOf('lightDelta', bytes, limits);
  const d = readLightDeltaPayload(r);
  r.end('lightDelta');
  return d;
}
