// Verdict: a verifier's report on one sampled result of the round before the open one (docs/protocol.md
// "Verification of work"). It travels on the verifier's authenticated coordinator connection; the coordinator
// records pass/fail, and the two measurements are kept for the run creator (they decide nothing on the host).
//
// | field                | encoding                                                   |
// |----------------------|------------------------------------------------------------|
// | header               | "MT" ‖ version ‖ type 0x13                                 |
// | runId                | string, 1..64 bytes                                        |
// | step                 | varint u32: the verified round's step                      |
// | batch                | start varint ‖ end varint (the verified result's batch)    |
// | commitment           | 32 B: the result the verifier checked                      |
// | pass                 | u8 0/1                                                     |
// | fingerprintAgreement | f32, 0..1                                                  |
// | updateAgreement      | f32, −1..1                                                 |
import type { ByteReader } from './codec.ts';
import type { BatchInterval } from './common.ts';
import { readBatch, readRunId, writeBatch, writeRunId } from './common.ts';
import { COMMITMENT_BYTES } from './commitment.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export interface Verdict {
  runId: string;
  step: number;
  batch: BatchInterval;
  commitment: Uint8Array;
  pass: boolean;
  fingerprintAgreement: number;
  updateAgreement: number;
}

function checkRange(v: number, lo: number, hi: number, field: string): number {
  if (!(v >= lo && v <= hi)) throw new WireError('inconsistent', field, `must be within ${lo}..${hi}`);
  return v;
}

export function encodeVerdict(v: Verdict, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('verdict', limits);
  writeRunId(w, v.runId);
  w.u32(v.step, 'step');
  writeBatch(w, v.batch);
  w.fixed(v.commitment, COMMITMENT_BYTES, 'commitment');
  w.bool(v.pass, 'pass');
  w.f32(checkRange(v.fingerprintAgreement, 0, 1, 'fingerprintAgreement'), 'fingerprintAgreement');
  w.f32(checkRange(v.updateAgreement, -1, 1, 'updateAgreement'), 'updateAgreement');
  return w.finish();
}

export function readVerdictPayload(r: ByteReader): Verdict {
  const runId = readRunId(r);
  const step = r.u32('step');
  const batch = readBatch(r);
  const commitment = r.fixed(COMMITMENT_BYTES, 'commitment');
  const pass = r.bool('pass');
  const fingerprintAgreement = checkRange(r.f32('fingerprintAgreement'), 0, 1, 'fingerprintAgreement');
  const updateAgreement = checkRange(r.f32('updateAgreement'), -1, 1, 'updateAgreement');
  return { runId, step, batch, commitment, pass, fingerprintAgreement, updateAgreement };
}

export function decodeVerdict(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): Verdict {
  const r = openFrameOf('verdict', bytes, limits);
  const v = readVerdictPayload(r);
  r.end('verdict');
  return v;
}
