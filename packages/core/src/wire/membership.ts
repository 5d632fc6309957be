// Joining and leaving a run. The relay issues a fresh 32-byte challenge per connection; the client proves
// it holds the identity key by signing it together with what it claims (run, p2p peer id, device), so a
// captured Join cannot be replayed on another connection, another run, or with another peer id.
//
// Join frame:
// | field      | encoding                                         |
// |------------|--------------------------------------------------|
// | header     | "MT" ‖ version ‖ type 0x20                       |
// | runId      | string, 1..64 bytes                              |
// | pubkey     | 32 B Ed25519 public key                          |
// | p2pPeerId  | string ≤ 128 bytes (libp2p peer id, may be "")   |
// | deviceKind | string ≤ 64 bytes (e.g. "webgpu", "cuda", "cpu") |
// | challenge  | 32 B, issued by the relay                        |
// | signature  | 64 B                                             |
// | powNonce   | 8 B: the join puzzle's solution (crypto/join-pow.ts); zeros when none was asked |
// signature = Ed25519( tag("meshtrain/v1/join") ‖ runId ‖ challenge ‖ pubkey ‖ p2pPeerId ‖ deviceKind ‖ powNonce ),
// strings length-prefixed as on the wire so the concatenation is unambiguous. deviceKind is signed too
// (beyond the minimum) so that nothing in a Join can be altered in transit.
//
// Leave frame: header (type 0x21) ‖ runId string ‖ reason string ≤ limits.maxStringBytes.
import type { ByteReader } from './codec.ts';
import { ByteWriter } from './codec.ts';
import { checkSignedFields, readRunId, writeRunId } from './common.ts';
import {
  constantTimeEqual,
  domainTag,
  PUBLIC_KEY_BYTES,
  publicKeyOf,
  sign,
  SIGNATURE_BYTES,
} from '../crypto/index.ts';
import { JOIN_POW_NONCE_BYTES, solveJoinPow } from '../crypto/join-pow.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export const JOIN_CHALLENGE_BYTES = 32;
export const P2P_PEER_ID_MAX_BYTES = 128;
export const DEVICE_KIND_MAX_BYTES = 64;
const JOIN_TAG = domainTag('meshtrain/v1/join');

export interface JoinFields {
  runId: string;
  p2pPeerId: string;
  deviceKind: string;
  /** The relay's challenge for this connection. */
  challenge: Uint8Array;
}

export interface Join extends JoinFields {
  pubkey: Uint8Array;
  signature: Uint8Array;
  /** Proof of work over the challenge and `pubkey` (crypto/join-pow.ts); signed with the rest. */
  powNonce: Uint8Array;
}

export interface Leave {
  runId: string;
  reason: string;
}

function joinSignedBytes(j: JoinFields & { pubkey: Uint8Array; powNonce: Uint8Array }): Uint8Array {
  const w = new ByteWriter();
  w.raw(JOIN_TAG);
  writeRunId(w, j.runId);
  w.fixed(j.challenge, JOIN_CHALLENGE_BYTES, 'challenge');
  w.fixed(j.pubkey, PUBLIC_KEY_BYTES, 'pubkey');
  w.string(j.p2pPeerId, P2P_PEER_ID_MAX_BYTES, 'p2pPeerId');
  w.string(j.deviceKind, DEVICE_KIND_MAX_BYTES, 'deviceKind');
  w.fixed(j.powNonce, JOIN_POW_NONCE_BYTES, 'powNonce');
  return w.finish();
}

/** A signed Join; `powBits` > 0 also solves the relay's join puzzle (a second or so at 20 bits). */
export function signJoin(secretKey: Uint8Array, fields: JoinFields, powBits = 0): Join {
  const pubkey = publicKeyOf(secretKey);
  const unsigned = { ...fields, pubkey, powNonce: solveJoinPow(fields.challenge, pubkey, powBits) };
  return { ...unsigned, signature: sign(secretKey, joinSignedBytes(unsigned)) };
}

/**
 * Throw WireError('bad_signature') unless `join` answers `issuedChallenge` (the one this relay sent on this
 * connection) and is signed by `join.pubkey`.
 */
export function verifyJoin(join: Join, issuedChallenge: Uint8Array): void {
  if (!(join.challenge instanceof Uint8Array) || !constantTimeEqual(join.challenge, issuedChallenge)) {
    throw new WireError(
      'bad_signature',
      'challenge',
      'join does not answer the challenge issued on this connection',
    );
  }
  checkSignedFields('join', 'pubkey', () => joinSignedBytes(join), join.pubkey, join.signature);
}

export function encodeJoin(j: Join, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('join', limits);
  writeRunId(w, j.runId);
  w.fixed(j.pubkey, PUBLIC_KEY_BYTES, 'pubkey');
  w.string(j.p2pPeerId, P2P_PEER_ID_MAX_BYTES, 'p2pPeerId');
  w.string(j.deviceKind, DEVICE_KIND_MAX_BYTES, 'deviceKind');
  w.fixed(j.challenge, JOIN_CHALLENGE_BYTES, 'challenge');
  w.fixed(j.signature, SIGNATURE_BYTES, 'signature');
  w.fixed(j.powNonce, JOIN_POW_NONCE_BYTES, 'powNonce');
  return w.finish();
}

export function readJoinPayload(r: ByteReader): Join {
  const runId = readRunId(r);
  const pubkey = r.fixed(PUBLIC_KEY_BYTES, 'pubkey');
  const p2pPeerId = r.string(P2P_PEER_ID_MAX_BYTES, 'p2pPeerId');
  const deviceKind = r.string(DEVICE_KIND_MAX_BYTES, 'deviceKind');
  const challenge = r.fixed(JOIN_CHALLENGE_BYTES, 'challenge');
  const signature = r.fixed(SIGNATURE_BYTES, 'signature');
  const powNonce = r.fixed(JOIN_POW_NONCE_BYTES, 'powNonce');
  return { runId, pubkey, p2pPeerId, deviceKind, challenge, signature, powNonce };
}

/** Decode (structure only); the relay then calls verifyJoin with the challenge it issued. */
export function decodeJoin(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): Join {
  const r = openFrameOf('join', bytes, limits);
  const j = readJoinPayload(r);
  r.end('join');
  return j;
}

export function encodeLeave(l: Leave, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('leave', limits);
  writeRunId(w, l.runId);
  w.string(l.reason, limits.maxStringBytes, 'reason');
  return w.finish();
}

export function readLeavePayload(r: ByteReader): Leave {
  const runId = readRunId(r);
  const reason = r.string(r.limits.maxStringBytes, 'reason');
  return { runId, reason };
}

export function decodeLeave(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): Leave {
  const r = openFrameOf('leave', bytes, limits);
  const l = readLeavePayload(r);
  r.end('leave');
  return l;
}
