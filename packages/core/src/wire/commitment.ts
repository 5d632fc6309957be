// Result commitments and the signed result envelope.
//
// commitment = SHA-256( tag("meshtrain/v1/result-commitment") ‖ TrainingResult frame )
//
// The TrainingResult frame is a canonical encoding (one spelling per value, decoders reject all others), so
// hashing it covers everything that changes the update: runId, step, batch, trainer nonce, and per tensor
// xshape, totalk, k, the narrowed index bytes, the value kind and the value bytes. Psyche's hash
// (docs/protocol.md "Training results and commitments") covers only step, batch and the raw idx/val bytes: it
// leaves out the trainer nonce (which decides cold-start filtering) and the shapes (so one payload could be
// re-read under a different xshape/totalk) — both are covered here on purpose. The tag binds the hash to this
// purpose and version.
//
// Envelope signature = Ed25519( tag("meshtrain/v1/result-signature") ‖ commitment ) by `from`.
//
// SignedResult frame:
// | field       | encoding                                              |
// |-------------|-------------------------------------------------------|
// | header      | "MT" ‖ version ‖ type 0x02                            |
// | from        | 32 B Ed25519 public key                               |
// | commitment  | 32 B                                                  |
// | signature   | 64 B                                                  |
// | result      | TrainingResult payload (training-result.ts, no header)|
// Decoding does not verify; call verifySignedResult (it recomputes the commitment from the payload).
import {
  constantTimeEqual,
  domainTag,
  PUBLIC_KEY_BYTES,
  publicKeyOf,
  sha256Concat,
  sign,
  SIGNATURE_BYTES,
  verify,
} from '../crypto/index.ts';
import type { ByteReader } from './codec.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import type { TrainingResult } from './training-result.ts';
import {
  encodeTrainingResult,
  readTrainingResultPayload,
  writeTrainingResultPayload,
} from './training-result.ts';

export const COMMITMENT_BYTES = 32;
/** Bytes a SignedResult frame has beyond the TrainingResult frame it wraps (from, commitment, signature). */
export const RESULT_ENVELOPE_BYTES = PUBLIC_KEY_BYTES + COMMITMENT_BYTES + SIGNATURE_BYTES;

/** Size of the TrainingResult frame inside a SignedResult frame of `signedFrameBytes` (what announces state). */
export function trainingResultBytesOf(signedFrameBytes: number): number {
  return signedFrameBytes - RESULT_ENVELOPE_BYTES;
}
const COMMITMENT_TAG = domainTag('meshtrain/v1/result-commitment');
const RESULT_SIGNATURE_TAG = domainTag('meshtrain/v1/result-signature');

/** Commitment of an already-encoded TrainingResult frame (e.g. a fetched blob; decode it as well). */
export function frameCommitment(trainingResultFrame: Uint8Array): Uint8Array {
  return sha256Concat(COMMITMENT_TAG, trainingResultFrame);
}

/** Encode once, and commit to the encoding: what a trainer publishes. */
export function commitTrainingResult(
  result: TrainingResult,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): { frame: Uint8Array; commitment: Uint8Array } {
  const frame = encodeTrainingResult(result, limits);
  return { frame, commitment: frameCommitment(frame) };
}

/** SHA-256 commitment (32 bytes) to everything in `result`. */
export function resultCommitment(
  result: TrainingResult,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): Uint8Array {
  return commitTrainingResult(result, limits).commitment;
}

export interface ResultEnvelope {
  /** Signer's Ed25519 public key. */
  from: Uint8Array;
  commitment: Uint8Array;
  /** Ed25519 over tag ‖ commitment. */
  signature: Uint8Array;
}

export interface SignedResult {
  envelope: ResultEnvelope;
  result: TrainingResult;
}

function signedBytes(commitment: Uint8Array): Uint8Array {
  const m = new Uint8Array(RESULT_SIGNATURE_TAG.length + COMMITMENT_BYTES);
  m.set(RESULT_SIGNATURE_TAG);
  m.set(commitment, RESULT_SIGNATURE_TAG.length);
  return m;
}

/** Commit to `result` and sign the commitment with `secretKey`. */
export function signResult(
  secretKey: Uint8Array,
  result: TrainingResult,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): ResultEnvelope {
  const commitment = resultCommitment(result, limits);
  return { from: publicKeyOf(secretKey), commitment, signature: sign(secretKey, signedBytes(commitment)) };
}

/** Check only the envelope's signature over its own commitment (e.g. before fetching the payload). */
export function verifyResultEnvelope(envelope: ResultEnvelope): void {
  if (!(envelope.commitment instanceof Uint8Array) || envelope.commitment.length !== COMMITMENT_BYTES) {
    throw new WireError('bad_signature', 'envelope.commitment', 'commitment must be 32 bytes');
  }
  if (!verify(envelope.from, signedBytes(envelope.commitment), envelope.signature)) {
    throw new WireError('bad_signature', 'envelope.signature', 'signature does not verify for `from`');
  }
}

/**
 * Recompute the commitment from `result`, require it to equal the envelope's, and verify the signature.
 * Returns the commitment. Throws WireError('bad_signature') naming which check failed.
 */
export function verifySignedResult(
  envelope: ResultEnvelope,
  result: TrainingResult,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): Uint8Array {
  const recomputed = resultCommitment(result, limits);
  if (!(envelope.commitment instanceof Uint8Array) || !constantTimeEqual(recomputed, envelope.commitment)) {
    throw new WireError(
      'bad_signature',
      'envelope.commitment',
      'commitment does not match the result payload',
    );
  }
  verifyResultEnvelope(envelope);
  return recomputed;
}

export function encodeSignedResult(
  signed: SignedResult,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): Uint8Array {
  const w = frameWriter('signedResult', limits);
  w.fixed(signed.envelope.from, PUBLIC_KEY_BYTES, 'envelope.from');
  w.fixed(signed.envelope.commitment, COMMITMENT_BYTES, 'envelope.commitment');
  w.fixed(signed.envelope.signature, SIGNATURE_BYTES, 'envelope.signature');
  writeTrainingResultPayload(w, signed.result);
  return w.finish();
}

export function readSignedResultPayload(r: ByteReader): SignedResult {
  const from = r.fixed(PUBLIC_KEY_BYTES, 'envelope.from');
  const commitment = r.fixed(COMMITMENT_BYTES, 'envelope.commitment');
  const signature = r.fixed(SIGNATURE_BYTES, 'envelope.signature');
  const result = readTrainingResultPayload(r);
  return { envelope: { from, commitment, signature }, result };
}

/** Decode (structure only). Verify with verifySignedResult(decoded.envelope, decoded.result). */
export function decodeSignedResult(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): SignedResult {
  const r = openFrameOf('signedResult', bytes, limits);
  const s = readSignedResultPayload(r);
  r.end('signedResult');
  return s;
}
