// Announce: the small, gossip-sized message that tells peers a result exists. The result itself (the
// TrainingResult frame, content-addressed by its commitment) travels on a stream or via the relay.
// Unlike the result envelope, the announce signature covers every field, so hints used before
// downloading (run, step, batch, size) cannot be altered by whoever forwards the gossip.
//
// | field       | encoding                                                   |
// |-------------|------------------------------------------------------------|
// | header      | "MT" ‖ version ‖ type 0x03                                 |
// | runId       | string, 1..64 bytes                                        |
// | step        | varint u32                                                 |
// | batch       | start varint ‖ end varint (end ≥ start)                    |
// | commitment  | 32 B (commitment.ts)                                       |
// | size        | varint ≤ 2^53−1: bytes of the TrainingResult frame          |
// | from        | 32 B Ed25519 public key                                    |
// | signature   | 64 B Ed25519 over tag("meshtrain/v1/announce") ‖ the bytes |
// |             | from runId through from                                    |
import type { ByteReader } from './codec.ts';
import { ByteWriter } from './codec.ts';
import type { BatchInterval } from './common.ts';
import { checkSignedFields, readBatch, readRunId, writeBatch, writeRunId } from './common.ts';
import {
  constantTimeEqual,
  domainTag,
  PUBLIC_KEY_BYTES,
  publicKeyOf,
  sign,
  SIGNATURE_BYTES,
} from '../crypto/index.ts';
import { COMMITMENT_BYTES, frameCommitment } from './commitment.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import type { TrainingResult } from './training-result.ts';
import { decodeTrainingResult, encodeTrainingResult } from './training-result.ts';

const ANNOUNCE_TAG = domainTag('meshtrain/v1/announce');

export interface AnnounceFields {
  runId: string;
  step: number;
  batch: BatchInterval;
  commitment: Uint8Array;
  /** Byte length of the announced TrainingResult frame, so receivers can refuse before fetching. */
  size: number;
}

export interface Announce extends AnnounceFields {
  from: Uint8Array;
  signature: Uint8Array;
}

function writeSignedPart(w: ByteWriter, a: AnnounceFields & { from: Uint8Array }): void {
  writeRunId(w, a.runId);
  w.u32(a.step, 'step');
  writeBatch(w, a.batch);
  w.fixed(a.commitment, COMMITMENT_BYTES, 'commitment');
  w.u53(a.size, 'size');
  w.fixed(a.from, PUBLIC_KEY_BYTES, 'from');
}

function signedBytes(a: AnnounceFields & { from: Uint8Array }): Uint8Array {
  const w = new ByteWriter();
  w.raw(ANNOUNCE_TAG);
  writeSignedPart(w, a);
  return w.finish();
}

export function signAnnounce(secretKey: Uint8Array, fields: AnnounceFields): Announce {
  const unsigned = { ...fields, from: publicKeyOf(secretKey) };
  return { ...unsigned, signature: sign(secretKey, signedBytes(unsigned)) };
}

/** Encode and commit to `result`, and sign an announce for it. Publish `frame` under `announce.commitment`. */
export function announceResult(
  secretKey: Uint8Array,
  result: TrainingResult,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): { announce: Announce; frame: Uint8Array } {
  const frame = encodeTrainingResult(result, limits);
  const announce = signAnnounce(secretKey, {
    runId: result.runId,
    step: result.step,
    batch: result.batch,
    commitment: frameCommitment(frame),
    size: frame.length,
  });
  return { announce, frame };
}

/** Throw WireError('bad_signature') unless `from` signed exactly these fields. */
export function verifyAnnounce(a: Announce): void {
  checkSignedFields('announce', '`from`', () => signedBytes(a), a.from, a.signature);
}

/**
 * Verify the announce, then check a fetched TrainingResult frame against it (size, commitment, run,
 * step, batch) and decode it. Anything that does not match is 'bad_signature': the signed claim is false.
 */
export function verifyAnnouncedResult(
  a: Announce,
  frame: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): TrainingResult {
  verifyAnnounce(a);
  if (frame.length !== a.size)
    throw new WireError('bad_signature', 'size', `frame is ${frame.length} bytes, announced ${a.size}`);
  if (!constantTimeEqual(frameCommitment(frame), a.commitment)) {
    throw new WireError('bad_signature', 'commitment', 'frame does not match the announced commitment');
  }
  const result = decodeTrainingResult(frame, limits);
  if (
    result.runId !== a.runId ||
    result.step !== a.step ||
    result.batch.start !== a.batch.start ||
    result.batch.end !== a.batch.end
  ) {
    throw new WireError('bad_signature', 'result', 'result run/step/batch differ from the announce');
  }
  return result;
}

export function encodeAnnounce(a: Announce, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('announce', limits);
  writeSignedPart(w, a);
  w.fixed(a.signature, SIGNATURE_BYTES, 'signature');
  return w.finish();
}

export function readAnnouncePayload(r: ByteReader): Announce {
  const runId = readRunId(r);
  const step = r.u32('step');
  const batch = readBatch(r);
  const commitment = r.fixed(COMMITMENT_BYTES, 'commitment');
  const size = r.u53('size');
  const from = r.fixed(PUBLIC_KEY_BYTES, 'from');
  const signature = r.fixed(SIGNATURE_BYTES, 'signature');
  return { runId, step, batch, commitment, size, from, signature };
}

/** Decode (structure only); call verifyAnnounce. */
export function decodeAnnounce(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): Announce {
  const r = openFrameOf('announce', bytes, limits);
  const a = readAnnouncePayload(r);
  r.end('announce');
  return a;
}
