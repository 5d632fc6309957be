// StateDelta (0x33), ResyncRequest (0x34) and the compact coordinator events they carry (transition.ts).
// Same bar as wire.test.ts: round trips, every truncation, every bit flip rejected or canonical.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFrame,
  decodeWireEvent,
  encodeStateDelta,
  encodeWireEvent,
  peerIdOfKey,
  WireError,
  wireLimits,
} from '../src/index.ts';
import type { StateDelta, WireEvent, WireMessage, WireTransition } from '../src/index.ts';
import { bytes, runIdArb, u32, u53, wireCode } from './fixtures/wire.ts';
import { MESSAGE_TYPE } from '../src/wire/frame.ts';
import { encodeMessage } from '../src/wire/messages.ts';
import { decodeResyncRequest, decodeStateDelta, MAX_DELTA_TRANSITIONS } from '../src/wire/state-delta.ts';
import type { ClientRef } from '../src/wire/transition.ts';

const refArb: fc.Arbitrary<ClientRef> = fc.oneof(
  fc.integer({ min: 0, max: 200_000 }).map((client) => ({ client })),
  fc.integer({ min: 0, max: 200_000 }).map((member) => ({ member })),
  bytes(32).map((key) => ({ key })),
);

const attestationArb = fc.uint8Array({ maxLength: 40 });

const batchArb = fc
  .tuple(u53, fc.integer({ min: 0, max: 1000 }))
  .filter(([s, n]) => s + n <= Number.MAX_SAFE_INTEGER)
  .map(([start, n]) => ({ start, end: start + n }));

const committeeProofArb = fc.record({
  committee: fc.constantFrom('TieBreaker' as const, 'Verifier' as const, 'Trainer' as const),
  position: u53,
  index: u53,
});

const eventArb: fc.Arbitrary<WireEvent> = fc.oneof(
  fc.constantFrom<WireEvent>({ type: 'tick' }, { type: 'pause' }, { type: 'resume' }),
  fc.uint8Array({ maxLength: 64 }).map((entropy) => ({ type: 'entropy' as const, entropy })),
  fc
    .tuple(bytes(32), fc.option(fc.option(fc.string({ maxLength: 60 }), { nil: null }), { nil: undefined }))
    // undefined: the key's own libp2p PeerId, as node-trainer and the tab join with.
    .map(([key, p]) => ({ type: 'join' as const, key, p2pId: p === undefined ? peerIdOfKey(key) : p })),
  refArb.map((who) => ({ type: 'leave' as const, who })),
  refArb.map((who) => ({ type: 'warmupWitness' as const, who })),
  fc
    .record({ who: refArb, reason: fc.string({ maxLength: 40 }) })
    .map((r) => ({ type: 'eject' as const, ...r })),
  fc
    .record({
      who: refArb,
      step: u32,
      proof: fc.record({ position: u53, index: u53, witness: fc.boolean() }),
      attested: attestationArb,
      broadcastMerkle: fc.option(bytes(32), { nil: null }),
    })
    .map((r) => ({ type: 'witness' as const, ...r })),
  fc.record({ slot: u32, commitment: bytes(32) }).map((r) => ({ type: 'admitted' as const, ...r })),
  fc
    .record({ who: refArb, step: u32, batch: batchArb, commitment: bytes(32) })
    .map((r) => ({ type: 'resultAdmitted' as const, ...r })),
  fc
    .record({ who: refArb, slot: u32, pass: fc.boolean() })
    .map((r) => ({ type: 'verdictSlot' as const, ...r })),
  fc
    .record({ who: refArb, step: u32, batch: batchArb, pass: fc.boolean() })
    .map((r) => ({ type: 'verdict' as const, ...r })),
  fc
    .record({
      who: refArb,
      checks: fc.array(fc.record({ who: refArb, proof: committeeProofArb }), { maxLength: 4 }),
    })
    .map((r) => ({ type: 'healthCheck' as const, ...r })),
  fc.string({ maxLength: 100 }).map((config) => ({ type: 'updateConfig' as const, config })),
);

const transitionsArb: fc.Arbitrary<WireTransition[]> = fc
  .tuple(
    fc.integer({ min: 0, max: 2 ** 40 }),
    fc.array(
      fc.record({
        dt: fc.integer({ min: -5, max: 300 }),
        entropy: fc.option(fc.uint8Array({ maxLength: 64 }), { nil: null }),
        event: eventArb,
      }),
      { minLength: 1, maxLength: 8 },
    ),
  )
  .map(([t0, items]) => {
    let now = t0;
    return items.map((x, i) => {
      if (i > 0) now = Math.max(0, now + x.dt);
      return { now, entropy: x.entropy, event: x.event };
    });
  });

const deltaArb: fc.Arbitrary<StateDelta> = fc
  .record({
    runId: runIdArb,
    fromSeq: fc.integer({ min: 0, max: 2 ** 50 }),
    transitions: transitionsArb,
    stateHash: fc.option(bytes(32), { nil: undefined }),
    paramHash: fc.option(fc.record({ epoch: u32, hash: bytes(32) }), { nil: undefined }),
  })
  .map(({ stateHash, paramHash, ...d }) => ({
    ...d,
    ...(stateHash === undefined ? {} : { stateHash }),
    ...(paramHash === undefined ? {} : { paramHash }),
  }));

const messageArb: fc.Arbitrary<WireMessage> = fc.oneof(
  deltaArb.map((message) => ({ kind: 'stateDelta' as const, message })),
  fc
    .record({ runId: runIdArb, seq: u53, hash: fc.option(bytes(32), { nil: undefined }) })
    .map(({ runId, seq, hash }) => ({
      kind: 'resyncRequest' as const,
      message:
        hash === undefined
          ? { runId, seq, reason: 'gap' as const }
          : { runId, seq, reason: 'mismatch' as const, stateHash: hash },
    })),
);

const attested = Uint8Array.of(0x81, 0x10, 0x0e);
const sampleDelta: StateDelta = {
  runId: 'run-1',
  fromSeq: 1234,
  transitions: [
    { now: 1_700_000_000, entropy: new Uint8Array(32).fill(3), event: { type: 'tick' } },
    {
      now: 1_700_000_000,
      entropy: null,
      event: { type: 'join', key: new Uint8Array(32).fill(9), p2pId: 'peer' },
    },
    {
      now: 1_700_000_001,
      entropy: null,
      event: { type: 'admitted', slot: 300, commitment: new Uint8Array(32).fill(4) },
    },
    {
      now: 1_700_000_001,
      entropy: null,
      event: {
        type: 'witness',
        who: { client: 17 },
        step: 40,
        proof: { position: 3, index: 17, witness: true },
        attested,
        broadcastMerkle: new Uint8Array(32).fill(2),
      },
    },
    {
      now: 1_699_999_999,
      entropy: null,
      event: { type: 'verdictSlot', who: { member: 2 }, slot: 5, pass: false },
    },
    {
      now: 1_700_000_002,
      entropy: null,
      event: {
        type: 'healthCheck',
        who: { key: new Uint8Array(32).fill(1) },
        checks: [{ who: { client: 0 }, proof: { committee: 'Trainer', position: 1, index: 2 } }],
      },
    },
  ],
  stateHash: new Uint8Array(32).fill(8),
  paramHash: { epoch: 2, hash: new Uint8Array(32).fill(5) },
};

const samples: WireMessage[] = [
  { kind: 'stateDelta', message: sampleDelta },
  {
    kind: 'stateDelta',
    message: { runId: 'r', fromSeq: 0, transitions: [{ now: 5, entropy: null, event: { type: 'pause' } }] },
  },
  { kind: 'resyncRequest', message: { runId: 'run-1', seq: 99, reason: 'gap' } },
  {
    kind: 'resyncRequest',
    message: { runId: 'run-1', seq: 99, reason: 'mismatch', stateHash: new Uint8Array(32).fill(6) },
  },
];

describe('state deltas on the wire', () => {
  it('have the registered type ids', () => {
    expect(MESSAGE_TYPE.stateDelta).toBe(0x33);
    expect(MESSAGE_TYPE.resyncRequest).toBe(0x34);
  });

  it('round-trip through encodeMessage / decodeFrame and re-encode to the same bytes', () => {
    fc.assert(
      fc.property(messageArb, (m) => {
        const frame = encodeMessage(m);
        const back = decodeFrame(frame);
        expect(back).toEqual(m);
        expect(encodeMessage(back)).toEqual(frame);
      }),
      { numRuns: 300 },
    );
  });

  it('events round-trip standalone (the relay log) and re-encode to the same bytes', () => {
    fc.assert(
      fc.property(eventArb, (e) => {
        const bytesOf = encodeWireEvent(e);
        const back = decodeWireEvent(bytesOf);
        expect(back).toEqual(e);
        expect(encodeWireEvent(back)).toEqual(bytesOf);
      }),
      { numRuns: 300 },
    );
  });

  for (const m of samples) {
    const label = `${m.kind} (${encodeMessage(m).length} B)`;
    it(`${label}: every proper prefix is truncated, an extra byte is trailing`, () => {
      const frame = encodeMessage(m);
      for (let n = 0; n < frame.length; n++)
        expect(wireCode(() => decodeFrame(frame.subarray(0, n)))).toBe('truncated');
      const longer = new Uint8Array(frame.length + 1);
      longer.set(frame);
      expect(wireCode(() => decodeFrame(longer))).toBe('trailing_bytes');
    });

    it(`${label}: every single bit flip is rejected or decodes to its one canonical spelling`, () => {
      const frame = encodeMessage(m);
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
        expect(encodeMessage(back)).toEqual(flipped);
        expect(back).not.toEqual(m);
      }
      expect(decoded).toBeGreaterThan(0);
    });
  }

  it('a join costs the same bytes whatever the size of the run', () => {
    const join = (n: number): number =>
      encodeStateDelta({
        runId: 'run-1',
        fromSeq: n,
        transitions: [
          {
            now: 1_700_000_000,
            entropy: null,
            event: { type: 'join', key: new Uint8Array(32), p2pId: 'x'.repeat(52) },
          },
        ],
      }).length;
    expect(join(100)).toBeLessThan(120);
    expect(Math.abs(join(1_000_000) - join(100))).toBeLessThanOrEqual(2);
  });

  it("spells a join's own PeerId in one byte, and only that way", () => {
    const key = new Uint8Array(32).fill(7);
    const frame = (p2pId: string | null) =>
      encodeStateDelta({
        runId: 'run-1',
        fromSeq: 9,
        transitions: [{ now: 1_700_000_000, entropy: null, event: { type: 'join', key, p2pId } }],
      });
    const derived = frame(peerIdOfKey(key));
    expect(derived.length).toBe(frame(null).length);
    expect(decodeStateDelta(derived).transitions[0]!.event).toEqual({
      type: 'join',
      key,
      p2pId: peerIdOfKey(key),
    });
    expect(peerIdOfKey(key)).toMatch(/^12D3KooW[1-9A-HJ-NP-Za-km-z]{44}$/);
    // The same PeerId (or the key's hex) spelled out as a string under tag 1 is another spelling: refused.
    const other = 'Q'.repeat(52);
    const spelled = frame(other);
    const respell = (alias: string) => {
      const text = new TextEncoder().encode(alias);
      const at = spelled.findIndex((_, i) => spelled[i] === 0x51 && spelled[i + 51] === 0x51);
      const forged = new Uint8Array(spelled.length - 52 + text.length);
      forged.set(spelled.subarray(0, at));
      forged[at - 1] = text.length; // the string's varint length
      forged.set(text, at);
      forged.set(spelled.subarray(at + 52), at + text.length);
      return forged;
    };
    expect(decodeStateDelta(respell('R'.repeat(60))).transitions[0]!.event).toMatchObject({
      p2pId: 'R'.repeat(60),
    });
    expect(wireCode(() => decodeStateDelta(respell(peerIdOfKey(key))))).toBe('inconsistent');
    expect(wireCode(() => decodeStateDelta(respell('07'.repeat(32))))).toBe('inconsistent');
  });

  it('refuses empty deltas, too many transitions, reserved header bits and unknown event types', () => {
    const one = encodeStateDelta({
      runId: 'r',
      fromSeq: 0,
      transitions: [{ now: 5, entropy: null, event: { type: 'tick' } }],
    });
    // header(4) runId(2) fromSeq(1) count(1) now(1) head(1) dNow(1) stateHash(1) paramHash(1)
    expect(one.length).toBe(13);
    const countAt = 7;
    const headAt = 9;
    const zero = one.slice();
    zero[countAt] = 0;
    expect(wireCode(() => decodeStateDelta(zero))).toBe('inconsistent');
    for (const head of [0x20, 0x40, 0x80, 0x0f]) {
      const bad = one.slice();
      bad[headAt] = head;
      expect(wireCode(() => decodeStateDelta(bad))).toBe('inconsistent');
    }
    const firstNow = one.slice();
    firstNow[headAt + 1] = 2; // the first transition must be at the frame's own time
    expect(wireCode(() => decodeStateDelta(firstNow))).toBe('inconsistent');
    const many: WireTransition[] = Array.from({ length: MAX_DELTA_TRANSITIONS + 1 }, () => ({
      now: 1,
      entropy: null,
      event: { type: 'tick' },
    }));
    expect(wireCode(() => encodeStateDelta({ runId: 'r', fromSeq: 0, transitions: many }))).toBe('limit');
    expect(wireCode(() => encodeStateDelta({ runId: 'r', fromSeq: 0, transitions: [] }))).toBe('limit');
  });

  it('a mismatch report carries a hash, a gap request none', () => {
    expect(
      wireCode(() =>
        encodeMessage({ kind: 'resyncRequest', message: { runId: 'r', seq: 1, reason: 'mismatch' } }),
      ),
    ).toBe('inconsistent');
    expect(
      wireCode(() =>
        encodeMessage({
          kind: 'resyncRequest',
          message: { runId: 'r', seq: 1, reason: 'gap', stateHash: new Uint8Array(32) },
        }),
      ),
    ).toBe('inconsistent');
    const frame = encodeMessage(samples[2]!);
    const bad = frame.slice();
    bad[bad.length - 1] = 2;
    expect(wireCode(() => decodeResyncRequest(bad))).toBe('inconsistent');
  });

  it('a delta over maxFrameBytes is not encoded and not decoded', () => {
    const limits = wireLimits({ maxFrameBytes: 64 });
    expect(wireCode(() => encodeStateDelta(sampleDelta, limits))).toBe('oversized');
    expect(wireCode(() => decodeStateDelta(encodeStateDelta(sampleDelta), limits))).toBe('oversized');
  });
});
