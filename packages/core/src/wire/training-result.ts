// TrainingResult: one trainer's compressed update for one batch of one step (our version of Psyche's
// TransmittableDistroResult, docs/protocol.md "Training results and commitments"). Its frame is also the blob
// peers fetch and the bytes the commitment hashes (see commitment.ts).
//
// | field        | encoding                                                     |
// |--------------|--------------------------------------------------------------|
// | header       | "MT" ‖ version ‖ type 0x01                                   |
// | runId        | string, 1..64 bytes                                          |
// | step         | varint u32                                                   |
// | batch.start  | varint ≤ 2^53−1                                              |
// | batch.end    | varint, ≥ start (inclusive interval)                         |
// | trainerNonce | varint u32                                                   |
// | fingerprint  | varint length ≤ FINGERPRINT_MAX_BYTES ‖ sign bits of the     |
// |              | trainer's gradient at the round's seeded positions           |
// |              | (protocol/verification.ts); empty when the run verifies none |
// | tensorCount  | varint ≤ limits.maxTensors                                   |
// | tensors      | tensorCount × DistroResult (distro-result.ts), name order    |
import type { ByteReader, ByteWriter } from './codec.ts';
import type { BatchInterval } from './common.ts';
import { checkCount, needItems, readBatch, readRunId, writeBatch, writeRunId } from './common.ts';
import type { DistroResult } from './distro-result.ts';
import { readDistroResult, writeDistroResult } from './distro-result.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

/** Largest gradient fingerprint a result carries (8,192 sign bits). */
export const FINGERPRINT_MAX_BYTES = 1024;

export interface TrainingResult {
  runId: string;
  step: number;
  batch: BatchInterval;
  /** Number of train calls this trainer has made (self-reported; cold-start filtering uses it). */
  trainerNonce: number;
  /** One entry per trainable variable. */
  tensors: DistroResult[];
  /**
   * Sign bits (LSB first, 1 = negative) of the trainer's own gradient at positions every peer derives from the
   * round seed, so a verifier can check the work was done on the assigned batch; absent when the run does not
   * verify (encoded as an empty field).
   */
  fingerprint?: Uint8Array;
}

/** Smallest possible encoded tensor: rank, one dim, totalk, k, one u8 index, kind, one value byte. */
const MIN_TENSOR_BYTES = 7;

export function writeTrainingResultPayload(w: ByteWriter, t: TrainingResult, field = 'result'): void {
  if (typeof t !== 'object' || t === null || !Array.isArray(t.tensors)) {
    throw new WireError('inconsistent', field, 'not a TrainingResult');
  }
  writeRunId(w, t.runId, `${field}.runId`);
  w.u32(t.step, `${field}.step`);
  writeBatch(w, t.batch, `${field}.batch`);
  w.u32(t.trainerNonce, `${field}.trainerNonce`);
  w.bytes(t.fingerprint ?? new Uint8Array(0), FINGERPRINT_MAX_BYTES, `${field}.fingerprint`);
  checkCount(t.tensors.length, w.limits.maxTensors, `${field}.tensors`, 'maxTensors');
  let elements = 0;
  for (const tensor of t.tensors) elements += tensor?.indices?.length ?? 0;
  checkCount(elements, w.limits.maxElements, `${field}.tensors`, 'maxElements');
  w.u32(t.tensors.length, `${field}.tensorCount`);
  for (let i = 0; i < t.tensors.length; i++) writeDistroResult(w, t.tensors[i]!, `${field}.tensors[${i}]`);
}

export function readTrainingResultPayload(r: ByteReader, field = 'result'): TrainingResult {
  const runId = readRunId(r, `${field}.runId`);
  const step = r.u32(`${field}.step`);
  const batch = readBatch(r, `${field}.batch`);
  const trainerNonce = r.u32(`${field}.trainerNonce`);
  const fingerprint = r.bytesField(FINGERPRINT_MAX_BYTES, `${field}.fingerprint`);
  const count = r.u32(`${field}.tensorCount`);
  checkCount(count, r.limits.maxTensors, `${field}.tensors`, 'maxTensors');
  needItems(r, count, MIN_TENSOR_BYTES, `${field}.tensors`);
  const budget = { remaining: r.limits.maxElements };
  const tensors: DistroResult[] = [];
  for (let i = 0; i < count; i++) tensors.push(readDistroResult(r, `${field}.tensors[${i}]`, budget));
  return {
    runId,
    step,
    batch,
    trainerNonce,
    tensors,
    ...(fingerprint.length > 0 ? { fingerprint } : {}),
  };
}

export function encodeTrainingResult(
  t: TrainingResult,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): Uint8Array {
  const w = frameWriter('trainingResult', limits);
  writeTrainingResultPayload(w, t);
  return w.finish();
}

export function decodeTrainingResult(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): TrainingResult {
  const r = openFrameOf('trainingResult', bytes, limits);
  const t = readTrainingResultPayload(r);
  r.end('result');
  return t;
}
