// Coordinator transitions in binary: the event the relay fed `tick`, with its `now` and the entropy it mixed
// in first. Clients replay them (replica/replay.ts) to follow the relay's state from one StateSnapshot on
// (StateDelta frame, state-delta.ts), and the relay's SQLite log stores the same bytes.
//
// Ids repeat in almost every event, so an event names a client by where the state the event applies to holds
// it ("client ref"): its index in `epoch.clients`, else in `members`, else its 32-byte key. A result names its
// slot in the open round's assignments instead of (client, step, batch), a verdict its slot in the round before
// the open one. Refs only mean something against that state: `expandEvent` (replica/wire-events.ts) resolves them.
//
// | primitive | encoding                                                                           |
// |-----------|------------------------------------------------------------------------------------|
// | ClientRef | varint v: 0 = key, 32 B follow; else v − 1 = 2·index + (1 if a `members` index,     |
// |           | 0 if an `epoch.clients` index)                                                     |
// | event     | type u8 (below) ‖ payload                                                          |
//
// | type | event                          | payload                                                    |
// |------|--------------------------------|------------------------------------------------------------|
// | 0    | tick                           | —                                                          |
// | 1    | entropy                        | entropy: bytes ≤ 64                                        |
// | 2    | join                           | key 32 B ‖ p2p u8 0 = the key's hex, 1 = string ≤ 1024 B,  |
// |      |                                | 2 = the key's libp2p PeerId (state-interning.ts peerIdOfKey) |
// |      |                                | (+ 0x80: an origin tag of 8 B follows the p2p id;           |
// |      |                                | + 0x40: the client joins to verify only)                    |
// | 3    | leave                          | ClientRef                                                  |
// | 4    | eject                          | ClientRef ‖ reason string ≤ limits.maxStringBytes          |
// | 5    | warmup_witness                 | ClientRef                                                  |
// | 6    | witness                        | ClientRef ‖ step varint u32 ‖ WitnessProof ‖ Attestation   |
// |      |                                | ‖ merkle u8 0/1 ‖ 32 B (witness.ts)                        |
// | 7    | result_admitted, open round    | slot varint u32 ‖ commitment 32 B                          |
// | 8    | result_admitted, any           | ClientRef ‖ step varint u32 ‖ batch ‖ commitment 32 B       |
// | 9    | verdict, round before the open | ClientRef ‖ slot varint u32 ‖ outcome u8 (‖ evidence)      |
// | 10   | verdict, any                   | ClientRef ‖ step varint u32 ‖ batch ‖ outcome u8 (‖ evid.)  |
// |      |                                | outcome 3: a conclusive fail with evidence: fingerprint     |
// |      |                                | varint ≤ 10000 ‖ update + 10000 varint ≤ 20000              |
// | 11   | health_check                   | ClientRef ‖ count varint ≤ limits.maxClients ‖ count ×     |
// |      |                                | (ClientRef ‖ CommitteeProof)                               |
// | 12   | pause                          | —                                                          |
// | 13   | resume                         | —                                                          |
// | 14   | update_config                  | config: string ≤ 64 KiB, JSON of the CoordinatorConfig      |
import type { BatchInterval } from './common.ts';
import { checkCount, needItems, readBatch, writeBatch } from './common.ts';
import { ByteReader, ByteWriter } from './codec.ts';
import { COMMITMENT_BYTES } from './commitment.ts';
import { WireError } from './errors.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import {
  maxAttestationBytes,
  readCommitteeProof,
  readWitnessProof,
  writeCommitteeProof,
  writeWitnessProof,
} from './witness.ts';
import { bytesToHex, PUBLIC_KEY_BYTES } from '../crypto/index.ts';
import { peerIdOfKey } from './state-interning.ts';
import type { CommitteeProof, WitnessProof } from '../selection/committee.ts';

/** Where the state an event applies to holds a client; resolved by replica/wire-events.ts. */
export type ClientRef = { client: number } | { member: number } | { key: Uint8Array };

export type WireEvent =
  | { type: 'tick' }
  | { type: 'entropy'; entropy: Uint8Array }
  /** `p2pId` null: the client has no libp2p id and is reached by its key (p2p_id = the key's hex). */
  | { type: 'join'; key: Uint8Array; p2pId: string | null; origin?: Uint8Array; verifierOnly?: true }
  | { type: 'leave'; who: ClientRef }
  | { type: 'eject'; who: ClientRef; reason: string }
  | { type: 'warmupWitness'; who: ClientRef }
  | {
      type: 'witness';
      who: ClientRef;
      step: number;
      proof: WitnessProof;
      attested: Uint8Array;
      /** null: the witness sent none. */
      broadcastMerkle: Uint8Array | null;
    }
  /** A result of the open round, by its slot in `roundAssignments` (which names trainer, step and batch). */
  | { type: 'admitted'; slot: number; commitment: Uint8Array }
  | { type: 'resultAdmitted'; who: ClientRef; step: number; batch: BatchInterval; commitment: Uint8Array }
  /** A verdict on the round before the open one, by the verified result's slot in that round. */
  | {
      type: 'verdictSlot';
      who: ClientRef;
      slot: number;
      pass: boolean;
      conclusive?: boolean;
      evidence?: [number, number];
    }
  | {
      type: 'verdict';
      who: ClientRef;
      step: number;
      batch: BatchInterval;
      pass: boolean;
      conclusive?: boolean;
      evidence?: [number, number];
    }
  | { type: 'healthCheck'; who: ClientRef; checks: { who: ClientRef; proof: CommitteeProof }[] }
  | { type: 'pause' }
  | { type: 'resume' }
  /** The new CoordinatorConfig as JSON text (rare: admin updates while paused). */
  | { type: 'updateConfig'; config: string };

export type WireEventType = WireEvent['type'];

/** Bytes of a join's origin tag (the host's salted hash of the joining address's network). */
export const ORIGIN_BYTES = 8;
const ORIGIN_FLAG = 0x80;
const VERIFIER_ONLY_FLAG = 0x40;
/** A verdict's evidence is its two agreements ×EVIDENCE_SCALE, rounded. */
export const EVIDENCE_SCALE = 10_000;

/** Stable type ids (the low 4 bits of a StateDelta transition's header). Never reuse one. */
export const WIRE_EVENT_TYPE: Record<WireEventType, number> = {
  tick: 0,
  entropy: 1,
  join: 2,
  leave: 3,
  eject: 4,
  warmupWitness: 5,
  witness: 6,
  admitted: 7,
  resultAdmitted: 8,
  verdictSlot: 9,
  verdict: 10,
  healthCheck: 11,
  pause: 12,
  resume: 13,
  updateConfig: 14,
};

const TYPE_BY_ID = new Map<number, WireEventType>(
  (Object.keys(WIRE_EVENT_TYPE) as WireEventType[]).map((t) => [WIRE_EVENT_TYPE[t], t]),
);

/** Core's entropy is at most 64 bytes (coordinator/tick.ts). */
export const MAX_ENTROPY_BYTES = 64;
/** A libp2p peer id is ~52 characters; core takes p2p ids of up to 256 UTF-16 units. */
export const JOIN_P2P_ID_MAX_BYTES = 1024;
export const CONFIG_JSON_MAX_BYTES = 64 * 1024;
const MERKLE_BYTES = 32;

export function writeClientRef(w: ByteWriter, ref: ClientRef, field = 'who'): void {
  if (typeof ref !== 'object' || ref === null) throw new WireError('inconsistent', field, 'not a client ref');
  if ('key' in ref) {
    w.u8(0, field);
    w.fixed(ref.key, PUBLIC_KEY_BYTES, `${field}.key`);
    return;
  }
  const member = 'member' in ref;
  const index = member ? ref.member : ref.client;
  if (!Number.isSafeInteger(index) || index < 0 || index > (Number.MAX_SAFE_INTEGER - 2) / 2)
    throw new WireError('inconsistent', field, `bad index ${String(index)}`);
  w.u53(2 * index + (member ? 1 : 0) + 1, field);
}

export function readClientRef(r: ByteReader, field = 'who'): ClientRef {
  const v = r.u53(field);
  if (v === 0) return { key: r.fixed(PUBLIC_KEY_BYTES, `${field}.key`) };
  const index = Math.floor((v - 1) / 2);
  return (v - 1) % 2 === 1 ? { member: index } : { client: index };
}

/** Writes the event's type byte and payload. */
export function writeWireEvent(w: ByteWriter, e: WireEvent): void {
  if (typeof e !== 'object' || e === null || !Object.hasOwn(WIRE_EVENT_TYPE, e.type))
    throw new WireError(
      'inconsistent',
      'event',
      `unknown event type ${String((e as { type?: unknown })?.type)}`,
    );
  w.u8(WIRE_EVENT_TYPE[e.type], 'event.type');
  writeEventPayload(w, e);
}

/** The payload alone: StateDelta carries the type id in its transition header. */
export function writeEventPayload(w: ByteWriter, e: WireEvent): void {
  switch (e.type) {
    case 'tick':
    case 'pause':
    case 'resume':
      return;
    case 'entropy':
      w.bytes(e.entropy, MAX_ENTROPY_BYTES, 'entropy');
      return;
    case 'join':
      w.fixed(e.key, PUBLIC_KEY_BYTES, 'key');
      {
        const o = (e.origin === undefined ? 0 : ORIGIN_FLAG) | (e.verifierOnly ? VERIFIER_ONLY_FLAG : 0);
        if (e.p2pId === null) w.u8(o, 'p2pId');
        // node-trainer and the tab derive their libp2p key from the identity key: 1 byte instead of 52.
        else if (e.p2pId === peerIdOfKey(e.key)) w.u8(2 | o, 'p2pId');
        else {
          w.u8(1 | o, 'p2pId');
          w.string(e.p2pId, JOIN_P2P_ID_MAX_BYTES, 'p2pId');
        }
        if (e.origin !== undefined) w.fixed(e.origin, ORIGIN_BYTES, 'origin');
      }
      return;
    case 'leave':
    case 'warmupWitness':
      writeClientRef(w, e.who);
      return;
    case 'eject':
      writeClientRef(w, e.who);
      w.string(e.reason, w.limits.maxStringBytes, 'reason');
      return;
    case 'witness':
      writeClientRef(w, e.who);
      w.u32(e.step, 'step');
      writeWitnessProof(w, e.proof);
      w.bytes(e.attested, maxAttestationBytes(w.limits), 'attested');
      if (e.broadcastMerkle === null) w.u8(0, 'broadcastMerkle');
      else {
        w.u8(1, 'broadcastMerkle');
        w.fixed(e.broadcastMerkle, MERKLE_BYTES, 'broadcastMerkle');
      }
      return;
    case 'admitted':
      w.u32(e.slot, 'slot');
      w.fixed(e.commitment, COMMITMENT_BYTES, 'commitment');
      return;
    case 'resultAdmitted':
      writeClientRef(w, e.who);
      w.u32(e.step, 'step');
      writeBatch(w, e.batch);
      w.fixed(e.commitment, COMMITMENT_BYTES, 'commitment');
      return;
    case 'verdictSlot':
      writeClientRef(w, e.who);
      w.u32(e.slot, 'slot');
      writeOutcome(w, e);
      return;
    case 'verdict':
      writeClientRef(w, e.who);
      w.u32(e.step, 'step');
      writeBatch(w, e.batch);
      writeOutcome(w, e);
      return;
    case 'healthCheck':
      writeClientRef(w, e.who);
      if (!Array.isArray(e.checks)) throw new WireError('inconsistent', 'checks', 'not an array');
      checkCount(e.checks.length, w.limits.maxClients, 'checks', 'maxClients');
      w.u32(e.checks.length, 'checks');
      e.checks.forEach((c, i) => {
        writeClientRef(w, c.who, `checks[${i}].who`);
        writeCommitteeProof(w, c.proof, `checks[${i}].proof`);
      });
      return;
    case 'updateConfig':
      w.string(e.config, CONFIG_JSON_MAX_BYTES, 'config');
      return;
  }
}

/** The event type of a type id, or a WireError. */
export function wireEventTypeOf(id: number, field = 'event.type'): WireEventType {
  const t = TYPE_BY_ID.get(id);
  if (t === undefined) throw new WireError('inconsistent', field, `unknown event type ${id}`);
  return t;
}

/** Smallest encodings: a ref is 1 byte, a committee proof 3. */
const MIN_CHECK_BYTES = 4;

export function readEventPayload(r: ByteReader, type: WireEventType): WireEvent {
  switch (type) {
    case 'tick':
    case 'pause':
    case 'resume':
      return { type };
    case 'entropy':
      return { type, entropy: r.bytesField(MAX_ENTROPY_BYTES, 'entropy') };
    case 'join': {
      const key = r.fixed(PUBLIC_KEY_BYTES, 'key');
      const byte = r.u8('p2pId');
      const tag = byte & ~(ORIGIN_FLAG | VERIFIER_ONLY_FLAG);
      const flags = (byte & VERIFIER_ONLY_FLAG) !== 0 ? { verifierOnly: true as const } : {};
      if (tag > 2) throw new WireError('inconsistent', 'p2pId', `p2p tag must be 0, 1 or 2, got ${tag}`);
      let p2pId: string | null = tag === 2 ? peerIdOfKey(key) : null;
      if (tag === 1) {
        p2pId = r.string(JOIN_P2P_ID_MAX_BYTES, 'p2pId');
        if (p2pId === peerIdOfKey(key) || p2pId === bytesToHex(key))
          throw new WireError('inconsistent', 'p2pId', "the key's own PeerId or hex has a tag of its own");
      }
      if ((byte & ORIGIN_FLAG) === 0) return { type, key, p2pId, ...flags };
      return { type, key, p2pId, origin: r.fixed(ORIGIN_BYTES, 'origin'), ...flags };
    }
    case 'leave':
    case 'warmupWitness':
      return { type, who: readClientRef(r) };
    case 'eject': {
      const who = readClientRef(r);
      return { type, who, reason: r.string(r.limits.maxStringBytes, 'reason') };
    }
    case 'witness': {
      const who = readClientRef(r);
      const step = r.u32('step');
      const proof = readWitnessProof(r);
      const attested = r.bytesField(maxAttestationBytes(r.limits), 'attested');
      const tag = r.u8('broadcastMerkle');
      if (tag > 1)
        throw new WireError('inconsistent', 'broadcastMerkle', `option tag must be 0 or 1, got ${tag}`);
      const broadcastMerkle = tag === 1 ? r.fixed(MERKLE_BYTES, 'broadcastMerkle') : null;
      return { type, who, step, proof, attested, broadcastMerkle };
    }
    case 'admitted': {
      const slot = r.u32('slot');
      return { type, slot, commitment: r.fixed(COMMITMENT_BYTES, 'commitment') };
    }
    case 'resultAdmitted': {
      const who = readClientRef(r);
      const step = r.u32('step');
      const batch = readBatch(r);
      return { type, who, step, batch, commitment: r.fixed(COMMITMENT_BYTES, 'commitment') };
    }
    case 'verdictSlot': {
      const who = readClientRef(r);
      const slot = r.u32('slot');
      return { type, who, slot, ...readOutcome(r) };
    }
    case 'verdict': {
      const who = readClientRef(r);
      const step = r.u32('step');
      const batch = readBatch(r);
      return { type, who, step, batch, ...readOutcome(r) };
    }
    case 'healthCheck': {
      const who = readClientRef(r);
      const count = r.u32('checks');
      checkCount(count, r.limits.maxClients, 'checks', 'maxClients');
      needItems(r, count, MIN_CHECK_BYTES, 'checks');
      const checks: { who: ClientRef; proof: CommitteeProof }[] = [];
      for (let i = 0; i < count; i++) {
        const c = readClientRef(r, `checks[${i}].who`);
        checks.push({ who: c, proof: readCommitteeProof(r, `checks[${i}].proof`) });
      }
      return { type, who, checks };
    }
    case 'updateConfig':
      return { type, config: r.string(CONFIG_JSON_MAX_BYTES, 'config') };
  }
}

export function readWireEvent(r: ByteReader): WireEvent {
  return readEventPayload(r, wireEventTypeOf(r.u8('event.type')));
}

/** One event as standalone bytes (the relay's transition log). */
export function encodeWireEvent(e: WireEvent, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = new ByteWriter(limits);
  writeWireEvent(w, e);
  return w.finish();
}

export function decodeWireEvent(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): WireEvent {
  const r = new ByteReader(bytes, limits);
  const e = readWireEvent(r);
  r.end('event');
  return e;
}

// A verdict's outcome byte: 0 fail, 1 pass (a bool's bytes, as before conclusive failures), 2 conclusive fail,
// 3 conclusive fail with its evidence (fingerprint and update agreement ×10 000) after it.
function writeOutcome(
  w: ByteWriter,
  e: { pass: boolean; conclusive?: boolean; evidence?: [number, number] },
): void {
  if (typeof e.pass !== 'boolean') throw new WireError('inconsistent', 'pass', 'not a boolean');
  if (e.conclusive !== undefined && (e.conclusive !== true || e.pass))
    throw new WireError('inconsistent', 'conclusive', 'only a failing verdict is conclusive, and then true');
  if (e.evidence === undefined) {
    w.u8(e.pass ? 1 : e.conclusive ? 2 : 0, 'pass');
    return;
  }
  const [fp, up] = Array.isArray(e.evidence) ? e.evidence : [NaN, NaN];
  if (e.conclusive !== true || !Number.isInteger(fp) || !Number.isInteger(up))
    throw new WireError(
      'inconsistent',
      'evidence',
      'only a conclusive failure carries evidence: two integers',
    );
  if (fp < 0 || fp > EVIDENCE_SCALE || up < -EVIDENCE_SCALE || up > EVIDENCE_SCALE)
    throw new WireError(
      'inconsistent',
      'evidence',
      `must be within 0..${EVIDENCE_SCALE} and ±${EVIDENCE_SCALE}`,
    );
  w.u8(3, 'pass');
  w.u32(fp, 'evidence.fingerprint');
  w.u32(up + EVIDENCE_SCALE, 'evidence.update');
}

function readOutcome(r: ByteReader): { pass: boolean; conclusive?: true; evidence?: [number, number] } {
  const b = r.u8('pass');
  if (b > 3) throw new WireError('inconsistent', 'pass', `verdict outcome must be 0..3, got ${b}`);
  if (b !== 3) return b === 2 ? { pass: false, conclusive: true } : { pass: b === 1 };
  const fp = r.u32('evidence.fingerprint');
  const up = r.u32('evidence.update');
  if (fp > EVIDENCE_SCALE || up > 2 * EVIDENCE_SCALE)
    throw new WireError(
      'inconsistent',
      'evidence',
      `must be within 0..${EVIDENCE_SCALE} and ±${EVIDENCE_SCALE}`,
    );
  return { pass: false, conclusive: true, evidence: [fp, up - EVIDENCE_SCALE] };
}
