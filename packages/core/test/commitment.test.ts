// Commitments cover everything that changes an update; signed envelopes and announces verify only for
// the exact payload and signer.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeAnnounce,
  decodeSignedResult,
  encodeAnnounce,
  encodeSignedResult,
  encodeTrainingResult,
  frameCommitment,
  packSigns,
  resultCommitment,
  sha256Concat,
  sign,
  signAnnounce,
  signResult,
  verifyAnnounce,
  verifySignedResult,
} from '../src/index.ts';
import type { TrainingResult, WireError } from '../src/index.ts';
import { testIdentity, wireCode as code } from './fixtures/wire.ts';
import { announceResult, verifyAnnouncedResult } from '../src/wire/announce.ts';
import { commitTrainingResult, verifyResultEnvelope } from '../src/wire/commitment.ts';

const alice = testIdentity(0xa1);
const bob = testIdentity(0xb0);

function base(): TrainingResult {
  return {
    runId: 'run-1',
    step: 42,
    batch: { start: 1000, end: 1015 },
    trainerNonce: 7,
    tensors: [
      // 2 chunks of a 2×2 block: [1, 2, 2, 2] → totalk 4.
      {
        xshape: [1, 2, 2, 2],
        totalk: 4,
        indices: Uint8Array.from([0, 3, 2, 1]),
        values: packSigns(Float32Array.from([1, -1, -1, 1])),
      },
      {
        xshape: [3, 8],
        totalk: 8,
        indices: Uint8Array.from([7, 1, 0]),
        values: { kind: 'f32', values: Float32Array.from([0.5, -0.25, 2]) },
      },
    ],
  };
}

describe('resultCommitment', () => {
  it('is SHA-256 of the tagged canonical frame, deterministic', () => {
    const r = base();
    const c = resultCommitment(r);
    expect(c.length).toBe(32);
    expect(resultCommitment(base())).toEqual(c);
    expect(frameCommitment(encodeTrainingResult(r))).toEqual(c);
    const { frame, commitment } = commitTrainingResult(r);
    expect(frame).toEqual(encodeTrainingResult(r));
    expect(commitment).toEqual(c);
    // Not the bare hash of the frame: the domain tag separates it from every other use of SHA-256.
    expect(sha256Concat(frame)).not.toEqual(c);
  });

  // Each mutation changes what a receiver would apply (or how it filters it), so each must change the hash.
  const mutations: [string, (r: TrainingResult) => void][] = [
    ['runId', (r) => void (r.runId = 'run-2')],
    ['step', (r) => void (r.step += 1)],
    ['batch.start', (r) => void (r.batch.start -= 1)],
    ['batch.end', (r) => void (r.batch.end += 1)],
    // Psyche's hash leaves the nonce out (docs/protocol.md "Training results and commitments"); it decides
    // cold-start filtering.
    ['trainerNonce', (r) => void (r.trainerNonce += 1)],
    // Psyche's hash leaves shapes out: the same idx/val bytes under another xshape decode elsewhere.
    ['xshape (same totalk, same bytes)', (r) => void (r.tensors[0]!.xshape = [2, 1, 2, 2])],
    ['an index', (r) => void (r.tensors[0]!.indices = Uint8Array.from([0, 3, 2, 0]))],
    ['a sign bit', (r) => void (r.tensors[0]!.values = packSigns(Float32Array.from([1, -1, -1, -1])))],
    [
      'a value',
      (r) =>
        void (r.tensors[1]!.values = { kind: 'f32', values: Float32Array.from([0.5, -0.25, 2.0000002]) }),
    ],
    ['the value kind', (r) => void (r.tensors[1]!.values = packSigns(Float32Array.from([0.5, -0.25, 2])))],
    ['tensor order', (r) => void r.tensors.reverse()],
    ['a dropped tensor', (r) => void r.tensors.pop()],
  ];
  it.each(mutations)('changes when %s changes', (_name, mutate) => {
    const r = base();
    mutate(r);
    expect(resultCommitment(r)).not.toEqual(resultCommitment(base()));
  });

  it('no two distinct random results share a commitment (injective encoding)', () => {
    fc.assert(
      fc.property(fc.nat(0xffff), fc.nat(0xffff), fc.nat(1000), fc.nat(1000), (s1, s2, n1, n2) => {
        const a = { ...base(), step: s1, trainerNonce: n1 };
        const b = { ...base(), step: s2, trainerNonce: n2 };
        const same = s1 === s2 && n1 === n2;
        expect(resultCommitment(a).every((x, i) => x === resultCommitment(b)[i])).toBe(same);
      }),
      { numRuns: 50 },
    );
  });
});

describe('signed result envelope', () => {
  it('verifies for the signer and the exact payload, also after a frame round trip', () => {
    const env = signResult(alice.secretKey, base());
    expect(env.from).toEqual(alice.publicKey);
    expect(verifySignedResult(env, base())).toEqual(resultCommitment(base()));
    verifyResultEnvelope(env);
    const back = decodeSignedResult(encodeSignedResult({ envelope: env, result: base() }));
    expect(back.result).toEqual(base());
    expect(verifySignedResult(back.envelope, back.result)).toEqual(env.commitment);
  });

  it('fails for a wrong key, a tampered commitment, a tampered payload or a foreign signature', () => {
    const env = signResult(alice.secretKey, base());
    expect(code(() => verifySignedResult({ ...env, from: bob.publicKey }, base()))).toBe('bad_signature');
    const c = env.commitment.slice();
    c[0]! ^= 1;
    expect(code(() => verifySignedResult({ ...env, commitment: c }, base()))).toBe('bad_signature');
    expect(code(() => verifyResultEnvelope({ ...env, commitment: c }))).toBe('bad_signature');
    const changed = base();
    changed.step += 1;
    expect(code(() => verifySignedResult(env, changed))).toBe('bad_signature');
    // A signature over the bare commitment (no domain tag) is not accepted: no cross-protocol reuse.
    const bare = sign(alice.secretKey, env.commitment);
    expect(code(() => verifySignedResult({ ...env, signature: bare }, base()))).toBe('bad_signature');
    // Re-signing a changed payload with another key does not make it alice's.
    const forged = signResult(bob.secretKey, changed);
    expect(code(() => verifySignedResult({ ...forged, from: alice.publicKey }, changed))).toBe(
      'bad_signature',
    );
  });

  it('names the failing check', () => {
    const env = signResult(alice.secretKey, base());
    const changed = { ...base(), trainerNonce: 8 };
    try {
      verifySignedResult(env, changed);
      expect.unreachable();
    } catch (e) {
      expect((e as WireError).field).toBe('envelope.commitment');
    }
    try {
      verifySignedResult({ ...env, from: bob.publicKey }, base());
      expect.unreachable();
    } catch (e) {
      expect((e as WireError).field).toBe('envelope.signature');
    }
  });
});

describe('announce', () => {
  it('signs every field and checks the fetched frame against it', () => {
    const { announce, frame } = announceResult(alice.secretKey, base());
    expect(announce.size).toBe(frame.length);
    expect(announce.commitment).toEqual(resultCommitment(base()));
    verifyAnnounce(announce);
    const back = decodeAnnounce(encodeAnnounce(announce));
    expect(back).toEqual(announce);
    expect(verifyAnnouncedResult(back, frame)).toEqual(base());
  });

  it('fails when any announced field is altered', () => {
    const { announce } = announceResult(alice.secretKey, base());
    const alter: Partial<typeof announce>[] = [
      { runId: 'other' },
      { step: announce.step + 1 },
      { batch: { start: announce.batch.start, end: announce.batch.end + 1 } },
      { size: announce.size + 1 },
      { from: bob.publicKey },
      { commitment: new Uint8Array(32) },
    ];
    for (const a of alter) expect(code(() => verifyAnnounce({ ...announce, ...a }))).toBe('bad_signature');
  });

  it('rejects a frame that is not the announced one', () => {
    const { announce, frame } = announceResult(alice.secretKey, base());
    const other = encodeTrainingResult({ ...base(), trainerNonce: 99 });
    expect(other.length).toBe(frame.length);
    expect(code(() => verifyAnnouncedResult(announce, other))).toBe('bad_signature');
    expect(code(() => verifyAnnouncedResult(announce, frame.subarray(0, frame.length - 1)))).toBe(
      'bad_signature',
    );
    // An honest signer announcing a frame whose header fields disagree with the payload is caught too.
    const lying = signAnnounce(alice.secretKey, { ...announce, step: 43 });
    expect(code(() => verifyAnnouncedResult(lying, frame))).toBe('bad_signature');
  });
});
