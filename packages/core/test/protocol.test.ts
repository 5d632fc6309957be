// Core's protocol rules for what hosts receive (src/protocol): result shape against the model, admission of
// results, announces, witnesses and health checks, parameter-hash agreement and checkpoint admission.
import { describe, expect, it } from 'vitest';
import {
  admitAnnounce,
  admitCheckpoint,
  admitParamHash,
  admitResult,
  bytesToHex,
  checkpointUploaderRank,
  checkResultShape,
  createCoordinator,
  currentRound,
  maxSignedResultBytes,
  encodeTrainingResult,
  epochEndOf,
  healthCheckEvent,
  packSigns,
  paramHashVerdict,
  ProtocolRefusal,
  refusalCode,
  roundAssignments,
  signAnnounce,
  signResult,
  smallerSplit,
  tick,
  trainingResultBytesOf,
  encodeSignedResult,
  warmupWitnessEvent,
  type CoordinatorEvent,
  type CoordinatorState,
  type DistroResult,
  type ResultSpec,
  type TrainingResult,
} from '../src/index.ts';
import { baseConfig } from './fixtures/coordinator.ts';
import { testIdentity } from './fixtures/wire.ts';
import { encodedShape, resultSpecOf } from '../src/protocol/result-shape.ts';

const ids = [1, 2, 3, 4].map(testIdentity);
const hex = (i: number) => bytesToHex(ids[i]!.publicKey);

/** A run in its first RoundTrain with four clients (identities 1..4). */
function openRound(): CoordinatorState {
  let s = createCoordinator({
    run_id: 'run',
    run_seed: 'ab'.repeat(32),
    config: { ...baseConfig },
    now: 1000,
  });
  let now = 1000;
  const send = (e: CoordinatorEvent) => {
    const r = tick(s, e, now);
    if (r.error) throw r.error;
    s = r.state;
  };
  for (let i = 0; i < 4; i++) send({ type: 'join', id: hex(i), p2p_id: `p${i}` });
  now += 3;
  send({ type: 'tick' });
  for (const c of s.epoch.clients) if (s.run_state === 'Warmup') send({ type: 'warmup_witness', id: c.id });
  expect(s.run_state).toBe('RoundTrain');
  return s;
}

const PARAMS = [
  { name: 'b.weight', shape: [4, 6] },
  { name: 'a.norm', shape: [10] },
];
const SPEC: ResultSpec = resultSpecOf(PARAMS, {
  compression_chunk: 4,
  compression_topk: 2,
  quantize_1bit: true,
});

/** A result that fits SPEC: k indices per chunk, sign values. */
function fitting(spec: ResultSpec = SPEC): DistroResult[] {
  return spec.tensors.map((t) => {
    const chunks = t.xshape.reduce((a, b) => a * b, 1) / t.totalk;
    const indices = new Uint8Array(chunks * t.k).map((_, i) => i % t.k);
    return {
      xshape: [...t.xshape],
      totalk: t.totalk,
      indices,
      values: packSigns(new Float32Array(chunks * t.k).fill(-1)),
    };
  });
}

function resultFor(s: CoordinatorState, who: number, tensors = fitting()): TrainingResult {
  const round = currentRound(s)!;
  const a = roundAssignments(s, round).find((x) => x.id === hex(who));
  const batch = a ? a.batch : { start: 0, end: 0 };
  return { runId: 'run', step: round.step, batch, trainerNonce: 1, tensors };
}

function trainerIndex(s: CoordinatorState): number {
  const ids4 = roundAssignments(s, currentRound(s)!).map((a) => a.id);
  return [0, 1, 2, 3].find((i) => ids4.includes(hex(i)))!;
}

describe('result shape', () => {
  it('cuts dimensions without padding and encodes blocks as [..., R/n1, C/n2, n1, n2]', () => {
    expect(smallerSplit(12, 5)).toBe(4);
    expect(smallerSplit(100, 7)).toBe(5);
    expect(smallerSplit(100, 26)).toBe(25);
    expect(smallerSplit(100, 101)).toBe(100);
    expect(smallerSplit(50257, 64)).toBe(29);
    expect(encodedShape([10], 4)).toEqual({ xshape: [5, 2], totalk: 2 });
    expect(encodedShape([4, 6], 4)).toEqual({ xshape: [1, 2, 4, 3], totalk: 12 });
    expect(encodedShape([2, 8, 8], 4)).toEqual({ xshape: [2, 2, 2, 4, 4], totalk: 16 });
  });

  it('orders tensors by name, clamps k to the chunk and names the value kind', () => {
    expect(SPEC.tensors.map((t) => t.name)).toEqual(['a.norm', 'b.weight']);
    expect(SPEC.tensors.map((t) => t.k)).toEqual([2, 2]);
    expect(SPEC.valueKind).toBe('sign');
    const big = resultSpecOf(PARAMS, { compression_chunk: 4, compression_topk: 99, quantize_1bit: false });
    expect(big.tensors.map((t) => t.k)).toEqual([2, 12]);
    expect(big.valueKind).toBe('f32');
    expect(big.fingerprintBytes).toBe(0);
    const verified = resultSpecOf(
      PARAMS,
      { compression_chunk: 4, compression_topk: 2, quantize_1bit: true },
      10,
    );
    expect(verified.fingerprintBytes).toBe(256);
  });

  it('bounds the size of any fitting result frame', () => {
    const verified = { ...SPEC, fingerprintBytes: 256 };
    const r: TrainingResult = {
      runId: 'r'.repeat(64),
      step: 0xffff_ffff,
      batch: { start: Number.MAX_SAFE_INTEGER - 1, end: Number.MAX_SAFE_INTEGER },
      trainerNonce: 0xffff_ffff,
      tensors: fitting(),
      fingerprint: new Uint8Array(256),
    };
    const envelope = signResult(ids[0]!.secretKey, r);
    const frame = encodeSignedResult({ envelope, result: r });
    expect(frame.length).toBeLessThanOrEqual(maxSignedResultBytes(verified));
    expect(maxSignedResultBytes(verified)).toBeLessThan(frame.length + 200);
  });

  it('accepts a fitting result and names what is wrong with each misfit', () => {
    const r = (tensors: DistroResult[]): TrainingResult => ({
      runId: 'run',
      step: 1,
      batch: { start: 0, end: 0 },
      trainerNonce: 0,
      tensors,
    });
    expect(checkResultShape(r(fitting()), SPEC)).toBeNull();
    const missing = checkResultShape(r(fitting().slice(1)), SPEC);
    expect(missing?.code).toBe('bad_result');
    expect(missing?.message).toMatch(/1 tensors; the model has 2/);
    const swapped = fitting().reverse();
    expect(checkResultShape(r(swapped), SPEC)?.message).toMatch(/xshape/);
    // Dense: every coefficient of every chunk.
    const dense = resultSpecOf(PARAMS, { compression_chunk: 4, compression_topk: 99, quantize_1bit: true });
    expect(checkResultShape(r(fitting(dense)), SPEC)?.message).toMatch(
      /entries per chunk, expected exactly 2/,
    );
    const f32 = fitting().map((t) => ({
      ...t,
      values: { kind: 'f32' as const, values: new Float32Array(t.indices.length).fill(1) },
    }));
    expect(checkResultShape(r(f32), SPEC)?.message).toMatch(/f32 values, the run sends sign/);
    // A fingerprint where the run verifies nothing, or none where it does.
    const withFp = { ...r(fitting()), fingerprint: new Uint8Array(256) };
    expect(checkResultShape(withFp, SPEC)?.message).toMatch(
      /256-byte gradient fingerprint; the run's results carry 0/,
    );
    expect(checkResultShape(withFp, { ...SPEC, fingerprintBytes: 256 })).toBeNull();
    expect(checkResultShape(r(fitting()), { ...SPEC, fingerprintBytes: 256 })?.code).toBe('bad_result');
  });
});

describe('result and announce admission', () => {
  it('admits a fitting, signed result of the sender in an open round, as a result_admitted event', () => {
    const s = openRound();
    const t = trainerIndex(s);
    const result = resultFor(s, t);
    const envelope = signResult(ids[t]!.secretKey, result);
    const a = admitResult(s, hex(t), { envelope, result }, SPEC);
    if (a instanceof ProtocolRefusal) throw a;
    expect(a.event).toEqual({
      type: 'result_admitted',
      id: hex(t),
      step: result.step,
      batch: result.batch,
      commitment: bytesToHex(envelope.commitment),
    });
    // The event is one the coordinator takes.
    expect(tick(s, a.event, 1010).error).toBeUndefined();
  });

  it('refuses with typed codes: wrong run, another identity, closed or unknown round, not its batch, misfit, bad signature', () => {
    const s = openRound();
    const t = trainerIndex(s);
    const other = (t + 1) % 4;
    const signed = (r: TrainingResult, key = ids[t]!.secretKey) => ({
      envelope: signResult(key, r),
      result: r,
    });
    const code = (x: unknown) => (x instanceof ProtocolRefusal ? x.code : 'admitted');
    const good = resultFor(s, t);
    expect(code(admitResult(s, hex(t), signed({ ...good, runId: 'other' }), SPEC))).toBe('wrong_run');
    expect(code(admitResult(s, hex(other), signed(good), SPEC))).toBe('bad_signature');
    expect(code(admitResult(s, hex(t), signed({ ...good, step: good.step + 7 }), SPEC))).toBe(
      'unknown_round',
    );
    expect(
      code(
        admitResult(
          s,
          hex(t),
          signed({ ...good, batch: { start: good.batch.start, end: good.batch.end + 1 } }),
          SPEC,
        ),
      ),
    ).toBe('not_assignee');
    expect(code(admitResult(s, hex(t), signed({ ...good, tensors: fitting().slice(1) }), SPEC))).toBe(
      'bad_result',
    );
    const forged = signed(good);
    const tampered = { ...forged, result: { ...good, trainerNonce: 99 } };
    expect(code(admitResult(s, hex(t), tampered, SPEC))).toBe('bad_signature');
    // Unknown model: shape is not checked, the rest is.
    expect(code(admitResult(s, hex(t), signed({ ...good, tensors: fitting().slice(1) }), null))).toBe(
      'admitted',
    );
  });

  it('checks an announce against the submitted result it names', () => {
    const s = openRound();
    const t = trainerIndex(s);
    const result = resultFor(s, t);
    const envelope = signResult(ids[t]!.secretKey, result);
    const frame = encodeSignedResult({ envelope, result });
    const submitted = {
      sender: hex(t),
      step: result.step,
      batch: result.batch,
      commitment: bytesToHex(envelope.commitment),
      trainingResultBytes: trainingResultBytesOf(frame.length),
    };
    expect(submitted.trainingResultBytes).toBe(encodeTrainingResult(result).length);
    const fields = {
      runId: 'run',
      step: result.step,
      batch: result.batch,
      commitment: envelope.commitment,
      size: submitted.trainingResultBytes,
    };
    const announce = signAnnounce(ids[t]!.secretKey, fields);
    expect(admitAnnounce(s, hex(t), announce, submitted)).toBeNull();
    expect(admitAnnounce(s, hex(t), announce, undefined)?.code).toBe('unknown_result');
    expect(
      admitAnnounce(s, hex(t), signAnnounce(ids[t]!.secretKey, { ...fields, size: 3 }), submitted)?.code,
    ).toBe('announce_mismatch');
    expect(admitAnnounce(s, hex((t + 1) % 4), announce, submitted)?.code).toBe('bad_signature');
    expect(
      admitAnnounce(
        s,
        hex(t),
        { ...announce, step: announce.step },
        { ...submitted, sender: hex((t + 1) % 4) },
      )?.code,
    ).toBe('unknown_result');
    const badSig = { ...announce, signature: new Uint8Array(64) };
    expect(admitAnnounce(s, hex(t), badSig, submitted)?.code).toBe('bad_signature');
  });
});

describe('witness and health-check admission', () => {
  it('a warmup witness names the warming epoch', () => {
    const s = openRound();
    expect(warmupWitnessEvent(s, hex(0), { runId: 'run', epoch: 0 })).toEqual({
      type: 'warmup_witness',
      id: hex(0),
    });
    expect(refusalCode(warmupWitnessEvent(s, hex(0), { runId: 'run', epoch: 1 }))).toBe('stale');
    expect(refusalCode(warmupWitnessEvent(s, hex(0), { runId: 'x', epoch: 0 }))).toBe('wrong_run');
  });

  it('a health check is for the open round and names epoch clients by index', () => {
    const s = openRound();
    const step = currentRound(s)!.step;
    const proof = { committee: 'Trainer' as const, position: 0, index: 0 };
    const e = healthCheckEvent(s, hex(0), { step, reports: [{ clientIndex: 2, committeeProof: proof }] });
    expect(e).toEqual({ type: 'health_check', id: hex(0), checks: [{ id: s.epoch.clients[2]!.id, proof }] });
    expect(
      refusalCode(
        healthCheckEvent(s, hex(0), { step, reports: [{ clientIndex: 9, committeeProof: proof }] }),
      ),
    ).toBe('bad_report');
    expect(refusalCode(healthCheckEvent(s, hex(0), { step: step + 1, reports: [] }))).toBe('stale');
  });
});

describe('parameter-hash agreement', () => {
  const end = { epoch: 2, step: 40, voters: [hex(0), hex(1), hex(2)] };
  const ph = (who: number, over: Partial<{ epoch: number; step: number; runId: string }> = {}) => ({
    runId: 'run',
    epoch: 2,
    step: 40,
    hash: new Uint8Array(32).fill(who),
    ...over,
  });

  it('takes reports only from voters of the epoch end the run reached', () => {
    expect(admitParamHash('run', end, hex(0), ph(0))).toBeNull();
    expect(admitParamHash('run', end, hex(3), ph(3))?.code).toBe('not_a_client');
    expect(admitParamHash('run', end, hex(0), ph(0, { epoch: 7 }))?.code).toBe('stale');
    expect(admitParamHash('run', end, hex(0), ph(0, { step: 41 }))?.code).toBe('stale');
    expect(admitParamHash('run', null, hex(0), ph(0))?.code).toBe('stale');
    expect(admitParamHash('run', end, hex(0), ph(0, { runId: 'x' }))?.code).toBe('wrong_run');
  });

  it('agrees on a hash only with a strict majority of the voters; outsiders and repeats do not count', () => {
    const lone = paramHashVerdict(end, [{ client: hex(0), hash: 'aa' }]);
    expect(lone).toEqual({ agreed: null, mismatched: [], reports: 1, needed: 2 });
    const sybils = paramHashVerdict(end, [
      { client: hex(0), hash: 'bad' },
      { client: hex(3), hash: 'bad' },
      { client: 'f'.repeat(64), hash: 'bad' },
    ]);
    expect(sybils.agreed).toBeNull();
    const two = paramHashVerdict(end, [
      { client: hex(0), hash: 'good' },
      { client: hex(1), hash: 'good' },
      { client: hex(2), hash: 'bad' },
    ]);
    expect(two).toEqual({ agreed: 'good', mismatched: [hex(2)], reports: 3, needed: 2 });
    // A voter that changes its report counts once, with its latest hash.
    const flip = paramHashVerdict(end, [
      { client: hex(0), hash: 'x' },
      { client: hex(0), hash: 'y' },
      { client: hex(1), hash: 'y' },
    ]);
    expect(flip.agreed).toBe('y');
  });

  it('reads the epoch end from a Cooldown state and ranks uploaders in epoch order', () => {
    const s = openRound();
    expect(epochEndOf(s)).toBeNull();
    const cooling: CoordinatorState = { ...s, run_state: 'Cooldown' };
    const e = epochEndOf(cooling)!;
    expect(e.voters).toEqual(s.epoch.clients.map((c) => c.id));
    expect(checkpointUploaderRank(e, s.epoch.clients[2]!.id)).toBe(2);
    expect(checkpointUploaderRank(e, 'f'.repeat(64))).toBe(-1);
  });

  it('admits a checkpoint only for an agreed epoch end, with its hash', () => {
    const agreed = [{ epoch: 2, step: 40, hash: 'ab'.repeat(32) }];
    expect(admitCheckpoint(agreed, { epoch: 2, step: 40, paramHash: 'ab'.repeat(32) })).toBeNull();
    expect(admitCheckpoint(agreed, { epoch: 2, step: 40, paramHash: 'cd'.repeat(32) })?.code).toBe(
      'bad_result',
    );
    expect(admitCheckpoint(agreed, { epoch: 9, step: 1_000_000, paramHash: 'ab'.repeat(32) })?.code).toBe(
      'stale',
    );
  });
});
