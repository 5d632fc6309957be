// Witness proofs, witness submissions and health checks (docs/protocol.md "Committee and witness selection",
// "Witnesses and quorum", "Health checks and client removal"). The proof and committee types are the
// selection module's, so there is one definition of what a proof is.
//
// WitnessProof:    position varint ≤ 2^53−1 ‖ index varint ≤ 2^53−1 ‖ witness bool (u8 0/1)
// CommitteeProof:  committee u8 (0 TieBreaker, 1 Verifier, 2 Trainer: Psyche's declaration order)
//                  ‖ position varint ‖ index varint
// Attestation:     varint length ≤ ⌈limits.maxClients/8⌉ ‖ bytes: one bit per result slot of the attested
//                  round, LSB first (the coordinator checks the length and the padding against the round)
//
// Witness frame:
// | field            | encoding                                                          |
// |------------------|-------------------------------------------------------------------|
// | header           | "MT" ‖ version ‖ type 0x10                                        |
// | step             | varint u32                                                        |
// | proof            | WitnessProof                                                      |
// | attested         | Attestation                                                       |
// | broadcastMerkle  | 32 B                                                              |
// | metadata         | u8 0 = absent, 1 = present ‖ loss f32 ‖ tokensPerSec f32 ‖ bandwidth f32 |
//
// HealthCheck frame:
// | field    | encoding                                                       |
// |----------|----------------------------------------------------------------|
// | header   | "MT" ‖ version ‖ type 0x11                                     |
// | step     | varint u32                                                     |
// | count    | varint ≤ limits.maxClients                                     |
// | reports  | count × (clientIndex varint u32 ‖ CommitteeProof)              |
import type { ByteReader, ByteWriter } from './codec.ts';
import { checkCount, needItems } from './common.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import type { Committee, CommitteeProof, WitnessProof } from '../selection/committee.ts';

const COMMITTEES: readonly Committee[] = ['TieBreaker', 'Verifier', 'Trainer'];
const MERKLE_BYTES = 32;

export interface WitnessMetadata {
  /** Training loss this round (f32; NaN allowed, it reports divergence). */
  loss: number;
  tokensPerSec: number;
  /** Bytes per second. */
  bandwidth: number;
}

export interface WitnessMessage {
  step: number;
  proof: WitnessProof;
  /** One bit per result slot of the previous round (witness/attestation.ts). */
  attested: Uint8Array;
  broadcastMerkle: Uint8Array;
  metadata?: WitnessMetadata;
}

export interface HealthReport {
  clientIndex: number;
  committeeProof: CommitteeProof;
}

export interface HealthCheck {
  step: number;
  reports: HealthReport[];
}

export function writeWitnessProof(w: ByteWriter, p: WitnessProof, field = 'proof'): void {
  w.u53(p.position, `${field}.position`);
  w.u53(p.index, `${field}.index`);
  w.bool(p.witness, `${field}.witness`);
}

export function readWitnessProof(r: ByteReader, field = 'proof'): WitnessProof {
  const position = r.u53(`${field}.position`);
  const index = r.u53(`${field}.index`);
  const witness = r.bool(`${field}.witness`);
  return { position, index, witness };
}

export function writeCommitteeProof(w: ByteWriter, p: CommitteeProof, field = 'committeeProof'): void {
  const c = COMMITTEES.indexOf(p.committee);
  if (c < 0)
    throw new WireError('inconsistent', `${field}.committee`, `unknown committee ${String(p.committee)}`);
  w.u8(c, `${field}.committee`);
  w.u53(p.position, `${field}.position`);
  w.u53(p.index, `${field}.index`);
}

export function readCommitteeProof(r: ByteReader, field = 'committeeProof'): CommitteeProof {
  const c = r.u8(`${field}.committee`);
  const committee = COMMITTEES[c];
  if (committee === undefined)
    throw new WireError('inconsistent', `${field}.committee`, `unknown committee ${c}`);
  const position = r.u53(`${field}.position`);
  const index = r.u53(`${field}.index`);
  return { committee, position, index };
}

/** Largest attestation on the wire: one bit per client of the largest run (the coordinator checks the exact size). */
export function maxAttestationBytes(limits: WireLimits): number {
  return Math.ceil(limits.maxClients / 8);
}

export function writeWitnessPayload(w: ByteWriter, m: WitnessMessage): void {
  w.u32(m.step, 'step');
  writeWitnessProof(w, m.proof);
  w.bytes(m.attested, maxAttestationBytes(w.limits), 'attested');
  w.fixed(m.broadcastMerkle, MERKLE_BYTES, 'broadcastMerkle');
  if (m.metadata === undefined) {
    w.u8(0, 'metadata');
  } else {
    w.u8(1, 'metadata');
    w.f32(m.metadata.loss, 'metadata.loss');
    w.f32(m.metadata.tokensPerSec, 'metadata.tokensPerSec');
    w.f32(m.metadata.bandwidth, 'metadata.bandwidth');
  }
}

export function readWitnessPayload(r: ByteReader): WitnessMessage {
  const step = r.u32('step');
  const proof = readWitnessProof(r);
  const attested = r.bytesField(maxAttestationBytes(r.limits), 'attested');
  const broadcastMerkle = r.fixed(MERKLE_BYTES, 'broadcastMerkle');
  const m: WitnessMessage = { step, proof, attested, broadcastMerkle };
  const tag = r.u8('metadata');
  if (tag === 1) {
    m.metadata = {
      loss: r.f32('metadata.loss'),
      tokensPerSec: r.f32('metadata.tokensPerSec'),
      bandwidth: r.f32('metadata.bandwidth'),
    };
  } else if (tag !== 0) {
    throw new WireError('inconsistent', 'metadata', `option tag must be 0 or 1, got ${tag}`);
  }
  return m;
}

export function encodeWitness(m: WitnessMessage, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('witness', limits);
  writeWitnessPayload(w, m);
  return w.finish();
}

export function decodeWitness(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): WitnessMessage {
  const r = openFrameOf('witness', bytes, limits);
  const m = readWitnessPayload(r);
  r.end('witness');
  return m;
}

/** Smallest report: clientIndex, committee, position, index — one byte each. */
const MIN_REPORT_BYTES = 4;

export function writeHealthCheckPayload(w: ByteWriter, h: HealthCheck): void {
  if (!Array.isArray(h.reports)) throw new WireError('inconsistent', 'reports', 'not an array');
  w.u32(h.step, 'step');
  checkCount(h.reports.length, w.limits.maxClients, 'reports', 'maxClients');
  w.u32(h.reports.length, 'reportCount');
  h.reports.forEach((rep, i) => {
    w.u32(rep.clientIndex, `reports[${i}].clientIndex`);
    writeCommitteeProof(w, rep.committeeProof, `reports[${i}].committeeProof`);
  });
}

export function readHealthCheckPayload(r: ByteReader): HealthCheck {
  const step = r.u32('step');
  const count = r.u32('reportCount');
  checkCount(count, r.limits.maxClients, 'reports', 'maxClients');
  needItems(r, count, MIN_REPORT_BYTES, 'reports');
  const reports: HealthReport[] = [];
  for (let i = 0; i < count; i++) {
    const clientIndex = r.u32(`reports[${i}].clientIndex`);
    reports.push({ clientIndex, committeeProof: readCommitteeProof(r, `reports[${i}].committeeProof`) });
  }
  return { step, reports };
}

export function encodeHealthCheck(h: HealthCheck, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('healthCheck', limits);
  writeHealthCheckPayload(w, h);
  return w.finish();
}

export function decodeHealthCheck(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): HealthCheck {
  const r = openFrameOf('healthCheck', bytes, limits);
  const h = readHealthCheckPayload(r);
  r.end('healthCheck');
  return h;
}
