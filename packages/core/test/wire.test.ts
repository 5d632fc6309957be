// Wire codec: round trips for every message, rejection of every truncation and bit flip, limits checked
// before allocation, the invariants of DisTrO results, Psyche's 1-bit packing and the byte accounting.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  chunkSizeOf,
  decodeFrame,
  decodeTrainingResult,
  encodedDistroResultSize,
  encodeTrainingResult,
  identityFromSeed,
  indexWidth,
  packSigns,
  signJoin,
  signResult,
  unpackSigns,
  verifyAnnounce,
  verifySignedResult,
  WireError,
  wireLimits,
} from '../src/index.ts';
import type { DistroResult, TrainingResult, WireMessage } from '../src/index.ts';
import { bytes, emptyResult, runIdArb, u32, u53, wireCode } from './fixtures/wire.ts';
import type { CommitteeProof } from '../src/selection/committee.ts';
import { announceResult } from '../src/wire/announce.ts';
import { ByteWriter } from '../src/wire/codec.ts';
import {
  decodeCoordinatorState,
  encodeCoordinatorState,
  type CoordinatorStateBroadcast,
} from '../src/wire/coordinator-state.ts';
import type { SparseIndices } from '../src/wire/distro-result.ts';
import type { WireErrorCode } from '../src/wire/errors.ts';
import { WIRE_VERSION } from '../src/wire/frame.ts';
import { verifyJoin } from '../src/wire/membership.ts';
import { encodeMessage } from '../src/wire/messages.ts';

// ---------------------------------------------------------------------------------------------------
// Arbitraries

const textArb = fc.string({ unit: 'binary', maxLength: 40 });
const f32 = fc.float({ noNaN: true, noDefaultInfinity: true });
const f32OrNaN = fc.oneof(f32, fc.constant(Number.NaN));

function typedIndices(values: number[], totalk: number): SparseIndices {
  const w = indexWidth(totalk);
  return w === 1 ? Uint8Array.from(values) : w === 2 ? Uint16Array.from(values) : Uint32Array.from(values);
}

// xshape generators covering every index width and the 1-D / 2-D block forms (rank ≤ 2 vs > 2).
const xshapeArb: fc.Arbitrary<number[]> = fc.oneof<fc.Arbitrary<number[]>[]>(
  fc.tuple(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 64 })).map(([a, b]) => [a, b]),
  fc
    .tuple(
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 2 }),
      fc.integer({ min: 1, max: 24 }),
      fc.integer({ min: 1, max: 24 }),
    )
    .map((t) => [...t]),
  fc.tuple(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 257, max: 5000 })).map(([a, b]) => [a, b]),
  fc.constant<number[]>([1, 70_000]),
  fc.integer({ min: 1, max: 40 }).map((n) => [n]),
  fc.constant<number[]>([2, 1, 1, 8, 8]),
);

const distroResultArb: fc.Arbitrary<DistroResult> = xshapeArb.chain((xshape) => {
  const totalk = chunkSizeOf(xshape);
  const chunks = xshape.reduce((a, b) => a * b, 1) / totalk;
  return fc
    .integer({ min: 1, max: Math.min(totalk, 12) })
    .chain((k) =>
      fc.tuple(
        fc.array(fc.uniqueArray(fc.integer({ min: 0, max: totalk - 1 }), { minLength: k, maxLength: k }), {
          minLength: chunks,
          maxLength: chunks,
        }),
        fc.boolean(),
        fc.array(f32, { minLength: chunks * k, maxLength: chunks * k }),
      ),
    )
    .map(([perChunk, oneBit, vals]) => {
      const values = Float32Array.from(vals);
      return {
        xshape,
        totalk,
        indices: typedIndices(perChunk.flat(), totalk),
        values: oneBit ? packSigns(values) : { kind: 'f32' as const, values },
      };
    });
});

const batchArb = fc.tuple(u53, fc.integer({ min: 0, max: 10_000 })).map(([start, len]) => ({
  start: Math.min(start, Number.MAX_SAFE_INTEGER - len),
  end: Math.min(start, Number.MAX_SAFE_INTEGER - len) + len,
}));

const trainingResultArb: fc.Arbitrary<TrainingResult> = fc.record({
  runId: runIdArb,
  step: u32,
  batch: batchArb,
  trainerNonce: u32,
  tensors: fc.array(distroResultArb, { maxLength: 3 }),
});

const attestationArb = fc.uint8Array({ maxLength: 130 });

const committeeProofArb: fc.Arbitrary<CommitteeProof> = fc.record({
  committee: fc.constantFrom('TieBreaker' as const, 'Verifier' as const, 'Trainer' as const),
  position: u53,
  index: u53,
});

const seedArb = bytes(32);
const identityArb = seedArb.map(identityFromSeed);

const coordinatorStateArb: fc.Arbitrary<CoordinatorStateBroadcast> = fc
  .record({
    runId: runIdArb,
    runState: fc.constantFrom(
      'Uninitialized',
      'WaitingForMembers',
      'Warmup',
      'RoundTrain',
      'RoundWitness',
      'Cooldown',
      'Finished',
      'Paused',
    ),
    epoch: u32,
    step: u32,
    round: fc.option(
      fc.record({
        height: u32,
        dataIndex: u53,
        randomSeed: bytes(8).map((b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')),
        clientsLen: u32,
      }),
      { nil: null },
    ),
    phaseStartedAt: u53,
    pendingPause: fc.boolean(),
    clients: fc.array(
      fc.record({ pubkey: bytes(32), state: fc.constantFrom('Healthy', 'Dropped', 'Withdrawn', 'Ejected') }),
      { maxLength: 5 },
    ),
    witnessCount: u32,
    quorum: u32,
    paramHash: fc.option(bytes(32), { nil: undefined }),
  })
  .map((s) => {
    // Optional keys are absent (not undefined) after decoding; mirror that so toEqual compares like with like.
    const { paramHash, ...rest } = s;
    return paramHash === undefined ? rest : { ...rest, paramHash };
  }) as fc.Arbitrary<CoordinatorStateBroadcast>;

const messageArb: fc.Arbitrary<WireMessage> = fc.oneof(
  trainingResultArb.map((message) => ({ kind: 'trainingResult' as const, message })),
  fc.tuple(identityArb, trainingResultArb).map(([id, result]) => ({
    kind: 'signedResult' as const,
    message: { envelope: signResult(id.secretKey, result), result },
  })),
  fc.tuple(identityArb, trainingResultArb).map(([id, result]) => ({
    kind: 'announce' as const,
    message: announceResult(id.secretKey, result).announce,
  })),
  fc
    .record({
      step: u32,
      proof: fc.record({ position: u53, index: u53, witness: fc.boolean() }),
      attested: attestationArb,
      broadcastMerkle: bytes(32),
      metadata: fc.option(fc.record({ loss: f32OrNaN, tokensPerSec: f32, bandwidth: f32 }), {
        nil: undefined,
      }),
    })
    .map(({ metadata, ...rest }) => ({
      kind: 'witness' as const,
      message: metadata === undefined ? rest : { ...rest, metadata },
    })),
  fc
    .record({
      step: u32,
      reports: fc.array(fc.record({ clientIndex: u32, committeeProof: committeeProofArb }), { maxLength: 6 }),
    })
    .map((message) => ({ kind: 'healthCheck' as const, message })),
  fc
    .tuple(identityArb, runIdArb, textArb, fc.string({ maxLength: 20 }), bytes(32))
    .filter(([, , peer]) => new TextEncoder().encode(peer).length <= 128)
    .map(([id, runId, p2pPeerId, deviceKind, challenge]) => ({
      kind: 'join' as const,
      message: signJoin(id.secretKey, { runId, p2pPeerId, deviceKind, challenge }),
    })),
  fc.record({ runId: runIdArb, reason: textArb }).map((message) => ({ kind: 'leave' as const, message })),
  coordinatorStateArb.map((message) => ({ kind: 'coordinatorState' as const, message })),
  fc
    .record({ requestId: u32, code: fc.string({ minLength: 1, maxLength: 20 }), message: textArb })
    .map((message) => ({ kind: 'error' as const, message })),
  u32.map((requestId) => ({ kind: 'ack' as const, message: { requestId } })),
);

// ---------------------------------------------------------------------------------------------------
// Helpers

/** A verification of the signed parts of a decoded message; throws WireError when it fails. */
function verifyDecoded(m: WireMessage, challenge: Uint8Array): void {
  if (m.kind === 'signedResult') verifySignedResult(m.message.envelope, m.message.result);
  else if (m.kind === 'announce') verifyAnnounce(m.message);
  else if (m.kind === 'join') verifyJoin(m.message, challenge);
}

const SIGNED_KINDS = new Set(['signedResult', 'announce', 'join']);

// ---------------------------------------------------------------------------------------------------

describe('round trips', () => {
  it('decodeFrame(encodeMessage(m)) equals m for every message kind, and re-encodes to the same bytes', () => {
    fc.assert(
      fc.property(messageArb, (m) => {
        const frame = encodeMessage(m);
        const back = decodeFrame(frame);
        expect(back).toEqual(m);
        expect(encodeMessage(back)).toEqual(frame);
      }),
      { numRuns: 400 },
    );
  });

  it('signed messages verify after a round trip', () => {
    fc.assert(
      fc.property(messageArb, (m) => {
        const back = decodeFrame(encodeMessage(m));
        const challenge = back.kind === 'join' ? back.message.challenge : new Uint8Array(32);
        verifyDecoded(back, challenge);
      }),
      { numRuns: 100 },
    );
  });

  it('accepts indices in any typed array and narrows them by totalk', () => {
    const t: DistroResult = {
      xshape: [2, 300],
      totalk: 300,
      indices: Uint32Array.from([299, 0, 7, 256]),
      values: { kind: 'f32', values: Float32Array.from([1, -2, 3, -4]) },
    };
    const r: TrainingResult = {
      runId: 'r',
      step: 1,
      batch: { start: 0, end: 0 },
      trainerNonce: 0,
      tensors: [t],
    };
    const back = decodeTrainingResult(encodeTrainingResult(r));
    expect(back.tensors[0]!.indices).toBeInstanceOf(Uint16Array);
    expect(Array.from(back.tensors[0]!.indices)).toEqual([299, 0, 7, 256]);
  });

  it('encodedDistroResultSize is the exact encoded size', () => {
    fc.assert(
      fc.property(distroResultArb, (t) => {
        const base = emptyResult();
        const empty = encodeTrainingResult(base).length;
        const one = encodeTrainingResult({ ...base, tensors: [t] }).length;
        const k = t.indices.length / (t.xshape.reduce((a, b) => a * b, 1) / t.totalk);
        expect(one - empty).toBe(encodedDistroResultSize(t.xshape, k, t.values.kind));
      }),
    );
  });
});

describe('every truncation and every bit flip of a valid frame', () => {
  // One deterministic sample per kind. Unsigned kinds: the largest frame up to 600 bytes (most fields
  // exercised). Signed kinds: the smallest with some payload, since every decodable flip costs an
  // Ed25519 verification.
  const samples = new Map<string, WireMessage>();
  const hasPayload = (m: WireMessage) => m.kind !== 'signedResult' || m.message.result.tensors.length > 0;
  for (const m of fc.sample(messageArb, { numRuns: 400, seed: 1234 })) {
    const size = encodeMessage(m).length;
    const prev = samples.get(m.kind);
    const prevSize = prev === undefined ? undefined : encodeMessage(prev).length;
    if (SIGNED_KINDS.has(m.kind)) {
      if (hasPayload(m) && (prevSize === undefined || size < prevSize)) samples.set(m.kind, m);
    } else if (size <= 600 && (prevSize === undefined || size > prevSize)) {
      samples.set(m.kind, m);
    }
  }

  it('has a sample of every kind', () => {
    expect([...samples.keys()].sort()).toEqual([
      'ack',
      'announce',
      'coordinatorState',
      'error',
      'healthCheck',
      'join',
      'leave',
      'signedResult',
      'trainingResult',
      'witness',
    ]);
  });

  for (const [kind, m] of samples) {
    it(`${kind}: every proper prefix is rejected as truncated, an extra byte as trailing`, () => {
      const frame = encodeMessage(m);
      for (let n = 0; n < frame.length; n++) {
        expect(wireCode(() => decodeFrame(frame.subarray(0, n)))).toBe('truncated');
      }
      const longer = new Uint8Array(frame.length + 1);
      longer.set(frame);
      expect(wireCode(() => decodeFrame(longer))).toBe('trailing_bytes');
    });

    it(`${kind}: every single bit flip is rejected, or decodes canonically${SIGNED_KINDS.has(kind) ? ' and fails verification' : ''}`, () => {
      const frame = encodeMessage(m);
      const challenge = m.kind === 'join' ? m.message.challenge : new Uint8Array(32);
      let decoded = 0;
      for (let bit = 0; bit < frame.length * 8; bit++) {
        const flipped = frame.slice();
        flipped[bit >> 3]! ^= 1 << (bit & 7);
        let back: WireMessage;
        try {
          back = decodeFrame(flipped);
        } catch (e) {
          expect(e).toBeInstanceOf(WireError);
          continue;
        }
        decoded++;
        // No silent aliasing: the flipped bytes are the one spelling of what they decode to.
        expect(encodeMessage(back)).toEqual(flipped);
        expect(back).not.toEqual(m);
        if (SIGNED_KINDS.has(kind) || SIGNED_KINDS.has(back.kind)) {
          expect(wireCode(() => verifyDecoded(back, challenge))).toBe('bad_signature');
        }
      }
      // Sanity: the test is not vacuous (some flips do decode, e.g. in payload bytes).
      expect(decoded).toBeGreaterThan(0);
    });
  }
});

describe('frame header', () => {
  const frame = encodeMessage({ kind: 'ack', message: { requestId: 7 } });
  it('rejects bad magic, version and type', () => {
    expect(wireCode(() => decodeFrame(Uint8Array.from([0x4d, 0x55, ...frame.subarray(2)])))).toBe(
      'bad_magic',
    );
    expect(
      wireCode(() => decodeFrame(Uint8Array.from([0x4d, 0x54, WIRE_VERSION + 1, ...frame.subarray(3)]))),
    ).toBe('bad_version');
    expect(wireCode(() => decodeFrame(Uint8Array.from([0x4d, 0x54, WIRE_VERSION, 0x7f, 0x07])))).toBe(
      'unknown_type',
    );
    expect(wireCode(() => decodeTrainingResult(frame))).toBe('unknown_type');
  });
  it('rejects a frame over maxFrameBytes before parsing it', () => {
    const big = new Uint8Array(1025); // not even a valid header: size is checked first
    expect(wireCode(() => decodeFrame(big, wireLimits({ maxFrameBytes: 1024 })))).toBe('oversized');
  });
  it('refuses to encode a frame over maxFrameBytes', () => {
    const limits = wireLimits({ maxFrameBytes: 64 });
    expect(
      wireCode(() =>
        encodeMessage({ kind: 'leave', message: { runId: 'r', reason: 'x'.repeat(100) } }, limits),
      ),
    ).toBe('oversized');
  });
});

// Builders of raw (possibly invalid) TrainingResult frames, bypassing the encoder's validation.
function rawResult(
  writeTensors: (w: ByteWriter) => void,
  tensorCount = 1,
  batch = { start: 0, end: 0 },
): Uint8Array {
  const w = new ByteWriter(wireLimits({ maxFrameBytes: Number.MAX_SAFE_INTEGER }));
  w.raw(Uint8Array.from([0x4d, 0x54, WIRE_VERSION, 0x01]));
  w.string('run', 64, 'runId');
  w.u32(3, 'step');
  w.raw(Uint8Array.from([])); // batch written raw so that end < start is expressible
  w.u53(batch.start, 'batch.start');
  w.u53(batch.end, 'batch.end');
  w.u32(0, 'nonce');
  w.u32(0, 'fingerprint length');
  w.u32(tensorCount, 'count');
  writeTensors(w);
  return w.finish();
}

interface RawTensor {
  xshape: number[];
  totalk: number;
  k: number;
  indexBytes: number[];
  kind: number;
  valueBytes: number[];
}

function writeRawTensor(w: ByteWriter, t: RawTensor): void {
  w.u8(t.xshape.length, 'rank');
  for (const d of t.xshape) w.u32(d, 'dim');
  w.u32(t.totalk, 'totalk');
  w.u32(t.k, 'k');
  w.raw(Uint8Array.from(t.indexBytes));
  w.u8(t.kind, 'kind');
  w.raw(Uint8Array.from(t.valueBytes));
}

const good: RawTensor = {
  xshape: [2, 4],
  totalk: 4,
  k: 2,
  indexBytes: [0, 3, 2, 1],
  kind: 1,
  valueBytes: [0b0101],
};

function decodeRaw(
  t: Partial<RawTensor>,
  extra?: Partial<{ batch: { start: number; end: number } }>,
): WireErrorCode | 'no-error' {
  return wireCode(() =>
    decodeTrainingResult(rawResult((w) => writeRawTensor(w, { ...good, ...t }), 1, extra?.batch)),
  );
}

describe('inconsistent DisTrO results are rejected', () => {
  it('accepts the reference tensor', () => {
    expect(decodeRaw({})).toBe('no-error');
  });
  it.each<[string, Partial<RawTensor>, WireErrorCode]>([
    ['rank 0', { xshape: [] }, 'inconsistent'],
    ['rank 9', { xshape: [1, 1, 1, 1, 1, 1, 1, 2, 4], totalk: 8 }, 'inconsistent'],
    ['zero dimension', { xshape: [0, 4] }, 'inconsistent'],
    ['totalk ≠ last dim (rank 2)', { totalk: 8 }, 'inconsistent'],
    ['totalk ≠ last two dims (rank 4)', { xshape: [1, 1, 2, 4], totalk: 4 }, 'inconsistent'],
    ['k = 0', { k: 0, indexBytes: [], valueBytes: [0] }, 'inconsistent'],
    ['k > totalk', { k: 5 }, 'inconsistent'],
    ['index ≥ totalk', { indexBytes: [0, 4, 2, 1] }, 'inconsistent'],
    ['duplicate index in a chunk', { indexBytes: [3, 3, 2, 1] }, 'inconsistent'],
    ['non-zero sign padding bits', { valueBytes: [0b1_0101] }, 'inconsistent'],
    ['unknown value kind', { kind: 3 }, 'inconsistent'],
    [
      'non-finite f32 value',
      { kind: 0, valueBytes: [0, 0, 0x80, 0x7f, ...new Array<number>(12).fill(0)] },
      'inconsistent',
    ],
    [
      'NaN f32 value',
      { kind: 0, valueBytes: [0, 0, 0xc0, 0x7f, ...new Array<number>(12).fill(0)] },
      'inconsistent',
    ],
    ['sign bytes missing', { valueBytes: [] }, 'truncated'],
    ['extra sign byte', { valueBytes: [0b0101, 0] }, 'trailing_bytes'],
    ['index bytes short', { indexBytes: [0, 3, 2], valueBytes: [] }, 'truncated'],
  ])('%s → %s', (_name, t, code) => {
    expect(decodeRaw(t)).toBe(code);
  });
  it('the same index in different chunks is fine', () => {
    expect(decodeRaw({ indexBytes: [1, 2, 1, 2] })).toBe('no-error');
  });
  it('batch end < start', () => {
    expect(decodeRaw({}, { batch: { start: 5, end: 4 } })).toBe('inconsistent');
  });
  it('the encoder refuses inconsistent in-memory results too', () => {
    const base = emptyResult();
    const t = (over: Partial<DistroResult>): TrainingResult => ({
      ...base,
      tensors: [
        {
          xshape: [2, 4],
          totalk: 4,
          indices: Uint8Array.from([0, 1, 2, 3]),
          values: packSigns(new Float32Array(4)),
          ...over,
        },
      ],
    });
    expect(wireCode(() => encodeTrainingResult(t({})))).toBe('no-error');
    expect(wireCode(() => encodeTrainingResult(t({ indices: Uint8Array.from([0, 1, 2]) })))).toBe(
      'inconsistent',
    );
    expect(wireCode(() => encodeTrainingResult(t({ values: packSigns(new Float32Array(3)) })))).toBe(
      'inconsistent',
    );
    expect(
      wireCode(() => encodeTrainingResult(t({ values: { kind: 'f32', values: new Float32Array(5) } }))),
    ).toBe('inconsistent');
    expect(
      wireCode(() =>
        encodeTrainingResult(t({ values: { kind: 'sign', bits: Uint8Array.from([0xf0]), count: 4 } })),
      ),
    ).toBe('inconsistent');
    expect(wireCode(() => encodeTrainingResult(t({ indices: Uint8Array.from([0, 0, 2, 3]) })))).toBe(
      'inconsistent',
    );
    expect(wireCode(() => encodeTrainingResult(t({ totalk: 8 })))).toBe('inconsistent');
    expect(wireCode(() => encodeTrainingResult({ ...t({}), batch: { start: 2, end: 1 } }))).toBe(
      'inconsistent',
    );
    expect(wireCode(() => encodeTrainingResult({ ...t({}), runId: '' }))).toBe('inconsistent');
    expect(wireCode(() => encodeTrainingResult({ ...t({}), step: 2 ** 32 }))).toBe('oversized');
  });
  it('large k uses the sorting duplicate check and still finds repeats', () => {
    const idx = Array.from({ length: 40 }, (_, i) => i);
    expect(
      decodeRaw({
        xshape: [1, 64],
        totalk: 64,
        k: 40,
        indexBytes: idx,
        valueBytes: new Array<number>(5).fill(0),
      }),
    ).toBe('no-error');
    idx[39] = 5;
    expect(
      decodeRaw({
        xshape: [1, 64],
        totalk: 64,
        k: 40,
        indexBytes: idx,
        valueBytes: new Array<number>(5).fill(0),
      }),
    ).toBe('inconsistent');
  });
});

describe('counts are checked before anything is allocated', () => {
  const huge = wireLimits({
    maxFrameBytes: Number.MAX_SAFE_INTEGER,
    maxTensors: Number.MAX_SAFE_INTEGER,
    maxElements: Number.MAX_SAFE_INTEGER,
    maxClients: Number.MAX_SAFE_INTEGER,
    maxStringBytes: Number.MAX_SAFE_INTEGER,
  });

  it('tensor count', () => {
    const f = rawResult(() => {}, 0xffff_ffff);
    expect(wireCode(() => decodeTrainingResult(f))).toBe('limit');
    expect(wireCode(() => decodeTrainingResult(f, huge))).toBe('truncated');
  });

  it('element count (chunks × k), against maxElements and against the bytes present', () => {
    // 1e9 chunks of 64 with k = 64: 6.4e10 entries claimed in a few bytes.
    const f = rawResult((w) =>
      writeRawTensor(w, { xshape: [1e9, 64], totalk: 64, k: 64, indexBytes: [], kind: 1, valueBytes: [] }),
    );
    expect(wireCode(() => decodeTrainingResult(f))).toBe('limit');
    expect(wireCode(() => decodeTrainingResult(f, huge))).toBe('truncated');
    // The budget is shared by all tensors of a frame.
    const two = rawResult((w) => {
      writeRawTensor(w, good);
      writeRawTensor(w, good);
    }, 2);
    expect(wireCode(() => decodeTrainingResult(two, wireLimits({ maxElements: 8 })))).toBe('no-error');
    expect(wireCode(() => decodeTrainingResult(two, wireLimits({ maxElements: 7 })))).toBe('limit');
  });

  it('xshape products beyond 2^53 are refused', () => {
    const f = rawResult((w) =>
      writeRawTensor(w, {
        xshape: [0xffff_ffff, 0xffff_ffff, 1],
        totalk: 0xffff_ffff,
        k: 1,
        indexBytes: [],
        kind: 1,
        valueBytes: [],
      }),
    );
    expect(wireCode(() => decodeTrainingResult(f, huge))).toBe('oversized');
  });

  it('client table of a coordinator state', () => {
    const s: CoordinatorStateBroadcast = {
      runId: 'r',
      runState: 'RoundTrain',
      epoch: 0,
      step: 1,
      round: null,
      phaseStartedAt: 0,
      pendingPause: false,
      clients: [],
      witnessCount: 0,
      quorum: 0,
    };
    const frame = encodeCoordinatorState(s);
    // Patch clientCount (a single 0 byte) to a 5-byte varint of 2^32−1.
    const at = frame.length - 4; // clientCount, witnessCount, quorum, paramHash tag
    const patched = Uint8Array.from([
      ...frame.subarray(0, at),
      0xff,
      0xff,
      0xff,
      0xff,
      0x0f,
      ...frame.subarray(at + 1),
    ]);
    expect(wireCode(() => decodeCoordinatorState(patched))).toBe('limit');
    expect(wireCode(() => decodeCoordinatorState(patched, huge))).toBe('truncated');
  });

  it('attestation bytes', () => {
    const w = new ByteWriter(huge);
    w.raw(Uint8Array.from([0x4d, 0x54, WIRE_VERSION, 0x10]));
    w.u32(1, 'step');
    w.raw(Uint8Array.from([0, 0, 1])); // proof
    w.u53(2 ** 50, 'attested'); // length of the attestation
    const f = w.finish();
    expect(wireCode(() => decodeFrame(f))).toBe('limit');
    expect(wireCode(() => decodeFrame(f, huge))).toBe('truncated');
  });

  it('health-check reports', () => {
    const f = Uint8Array.from([0x4d, 0x54, WIRE_VERSION, 0x11, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    expect(wireCode(() => decodeFrame(f))).toBe('limit');
    expect(wireCode(() => decodeFrame(f, huge))).toBe('truncated');
  });

  it('string lengths', () => {
    // Leave with a reason claiming 2^40 bytes.
    const f = Uint8Array.from([
      0x4d,
      0x54,
      WIRE_VERSION,
      0x21,
      0x01,
      0x72,
      0x80,
      0x80,
      0x80,
      0x80,
      0x80,
      0x20,
    ]);
    expect(wireCode(() => decodeFrame(f))).toBe('limit');
    expect(wireCode(() => decodeFrame(f, huge))).toBe('truncated');
  });
});

describe('Psyche\'s 1-bit packing (docs/protocol.md "Top-k and 1-bit signs")', () => {
  // Hand-written frame: run "r", step 5, batch [300, 301], nonce 1, one tensor xshape [1, 9], totalk 9,
  // k 9, indices 0..8 (u8), signs of [-1, 2, -0, 3, 4, 5, 6, -7, -8]: element 8i+j is bit j of byte i,
  // true = negative (−0 included) → bits 0, 2, 7 of byte 0 (0x85) and bit 0 of byte 1 (0x01).
  const fixture = Uint8Array.from([
    0x4d,
    0x54,
    0x01,
    0x01, // "MT", version 1, TrainingResult
    0x01,
    0x72, // runId "r"
    0x05, // step 5
    0xac,
    0x02,
    0xad,
    0x02, // batch 300..301
    0x01, // trainerNonce 1
    0x00, // no fingerprint
    0x01, // one tensor
    0x02,
    0x01,
    0x09, // rank 2, xshape [1, 9]
    0x09,
    0x09, // totalk 9, k 9
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8, // indices
    0x01,
    0x85,
    0x01, // sign kind, packed bits
  ]);
  const values = Float32Array.from([-1, 2, -0, 3, 4, 5, 6, -7, -8]);

  it('encodes exactly to the hand-written bytes', () => {
    const r: TrainingResult = {
      runId: 'r',
      step: 5,
      batch: { start: 300, end: 301 },
      trainerNonce: 1,
      tensors: [
        {
          xshape: [1, 9],
          totalk: 9,
          indices: Uint8Array.from([0, 1, 2, 3, 4, 5, 6, 7, 8]),
          values: packSigns(values),
        },
      ],
    };
    expect(encodeTrainingResult(r)).toEqual(fixture);
  });

  it('decodes the bytes to ±1 signs', () => {
    const r = decodeTrainingResult(fixture);
    const v = r.tensors[0]!.values;
    expect(v.kind).toBe('sign');
    if (v.kind !== 'sign') return;
    expect(v.count).toBe(9);
    expect(Array.from(unpackSigns(v))).toEqual([-1, 1, -1, 1, 1, 1, 1, -1, -1]);
  });

  it('u16 indices are little-endian', () => {
    const r: TrainingResult = {
      runId: 'r',
      step: 0,
      batch: { start: 0, end: 0 },
      trainerNonce: 0,
      tensors: [
        {
          xshape: [1, 1, 64, 64],
          totalk: 4096,
          indices: Uint16Array.from([0x0102, 4095]),
          values: packSigns(Float32Array.from([1, -1])),
        },
      ],
    };
    const f = encodeTrainingResult(r);
    // rank 4, dims 1 1 64 64, totalk 4096 (0x80 0x20), k 2, indices 0x0102 → 02 01, 4095 → ff 0f, sign kind, bits 0b10
    expect(Array.from(f.subarray(f.length - 14))).toEqual([
      0x04, 0x01, 0x01, 0x40, 0x40, 0x80, 0x20, 0x02, 0x02, 0x01, 0xff, 0x0f, 0x01, 0x02,
    ]);
    expect(decodeTrainingResult(f).tensors[0]!.indices).toEqual(Uint16Array.from([0x0102, 4095]));
  });
});

describe('bytes per tensor (docs/protocol.md "Result sizes")', () => {
  function signsTensor(xshape: number[], k: number): DistroResult {
    const totalk = chunkSizeOf(xshape);
    const chunks = xshape.reduce((a, b) => a * b, 1) / totalk;
    const idx: number[] = [];
    for (let c = 0; c < chunks; c++) for (let j = 0; j < k; j++) idx.push((c * 131 + j * 509) % totalk);
    const vals = Float32Array.from(idx, (_, i) => (i % 3 === 0 ? -1 : 1));
    return { xshape, totalk, indices: typedIndices(idx, totalk), values: packSigns(vals) };
  }
  const base = emptyResult();
  const tensorBytes = (t: DistroResult) =>
    encodeTrainingResult({ ...base, tensors: [t] }).length - encodeTrainingResult(base).length;

  it('64×64 blocks at k = 8, 1-bit: 16 B of indices + 1 B of signs per block, plus ≤ 16 B per tensor', () => {
    // A 512×512 matrix is 8×8 blocks of 64×64.
    const bytesPerTensor = tensorBytes(signsTensor([8, 8, 64, 64], 8));
    expect(bytesPerTensor).toBeGreaterThanOrEqual(64 * 17);
    expect(bytesPerTensor).toBeLessThanOrEqual(64 * 17 + 16);
    expect(bytesPerTensor).toBe(encodedDistroResultSize([8, 8, 64, 64], 8, 'sign'));
  });

  it('1-D chunks of 64 at k = 8, 1-bit: 8 B + 1 B per chunk', () => {
    const bytesPerTensor = tensorBytes(signsTensor([64, 64], 8));
    expect(bytesPerTensor).toBeGreaterThanOrEqual(64 * 9);
    expect(bytesPerTensor).toBeLessThanOrEqual(64 * 9 + 16);
  });
});

describe('coordinator state at scale', () => {
  it('10,000 clients take 33 bytes each and round-trip', () => {
    const clients = Array.from({ length: 10_000 }, (_, i) => {
      const pubkey = new Uint8Array(32);
      new DataView(pubkey.buffer).setUint32(0, i);
      return { pubkey, state: (['Healthy', 'Dropped', 'Withdrawn', 'Ejected'] as const)[i % 4]! };
    });
    const s: CoordinatorStateBroadcast = {
      runId: 'big-run',
      runState: 'RoundWitness',
      epoch: 3,
      step: 1234,
      round: { height: 17, dataIndex: 123_456_789, randomSeed: '0123456789abcdef', clientsLen: 10_000 },
      phaseStartedAt: 1_760_000_000,
      pendingPause: false,
      clients,
      witnessCount: 32,
      quorum: 21,
      paramHash: new Uint8Array(32).fill(7),
    };
    const f = encodeCoordinatorState(s);
    expect(f.length).toBeLessThanOrEqual(10_000 * 33 + 80);
    expect(decodeCoordinatorState(f)).toEqual(s);
  });

  it('randomSeed must be 16 lower-case hex digits', () => {
    const s: CoordinatorStateBroadcast = {
      runId: 'r',
      runState: 'RoundTrain',
      epoch: 0,
      step: 1,
      round: { height: 0, dataIndex: 0, randomSeed: '0123456789ABCDEF', clientsLen: 1 },
      phaseStartedAt: 0,
      pendingPause: false,
      clients: [],
      witnessCount: 0,
      quorum: 0,
    };
    expect(wireCode(() => encodeCoordinatorState(s))).toBe('inconsistent');
  });
});
