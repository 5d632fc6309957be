// Wire messages of the client↔relay session (apps/relay/PROTOCOL.md): Challenge, StateSnapshot, ParamHash,
// WarmupWitness.
// Same bar as wire.test.ts: round trips, every truncation, every bit flip rejected or canonical.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createCoordinator,
  decodeFrame,
  DEFAULT_RUN_TOML,
  encodeStateSnapshot,
  coordinatorConfigOf,
  parseRunConfig,
  tick,
  WireError,
  wireLimits,
} from '../src/index.ts';
import type { CoordinatorState, WireMessage } from '../src/index.ts';
import { bytes, runIdArb, u32, u53, wireCode } from './fixtures/wire.ts';
import { internState } from '../src/wire/state-interning.ts';
import { decodeChallenge } from '../src/wire/challenge.ts';
import { MESSAGE_TYPE } from '../src/wire/frame.ts';
import { encodeMessage } from '../src/wire/messages.ts';
import { decodeParamHash } from '../src/wire/param-hash.ts';
import { decodeStateSnapshot } from '../src/wire/state-snapshot.ts';
import { decodeWarmupWitness } from '../src/wire/warmup-witness.ts';

const config = coordinatorConfigOf(parseRunConfig(DEFAULT_RUN_TOML).config);

function stateFor(runId: string, members: number): CoordinatorState {
  let s = createCoordinator({ run_id: runId, run_seed: '11'.repeat(32), config, now: 1000 });
  for (let i = 0; i < members; i++) {
    const r = tick(s, { type: 'join', id: i.toString(16).padStart(64, '0'), p2p_id: `peer-${i}` }, 1001);
    s = r.state;
  }
  return s;
}

const messageArb: fc.Arbitrary<WireMessage> = fc.oneof(
  fc
    .record({
      runId: runIdArb,
      challenge: bytes(32),
      serverTime: u53,
      powBits: fc.integer({ min: 0, max: 32 }),
    })
    .map((message) => ({ kind: 'challenge' as const, message })),
  fc
    .record({ runId: runIdArb, epoch: u32, step: u32, hash: bytes(32) })
    .map((message) => ({ kind: 'paramHash' as const, message })),
  fc.record({ runId: runIdArb, epoch: u32 }).map((message) => ({ kind: 'warmupWitness' as const, message })),
  fc
    .record({
      runId: runIdArb,
      seq: u53,
      serverTime: u53,
      paramHash: fc.option(fc.record({ epoch: u32, hash: bytes(32) }), { nil: undefined }),
      members: fc.integer({ min: 0, max: 3 }),
    })
    .map(({ runId, seq, serverTime, paramHash, members }) => ({
      kind: 'stateSnapshot' as const,
      message: {
        runId,
        seq,
        serverTime,
        state: stateFor(runId, members),
        ...(paramHash === undefined ? {} : { paramHash }),
      },
    })),
);

describe('relay session messages', () => {
  it('have the registered type ids', () => {
    expect(MESSAGE_TYPE.challenge).toBe(0x22);
    expect(MESSAGE_TYPE.stateSnapshot).toBe(0x31);
    expect(MESSAGE_TYPE.paramHash).toBe(0x32);
    expect(MESSAGE_TYPE.warmupWitness).toBe(0x12);
  });

  it('round-trip through encodeMessage / decodeFrame and re-encode to the same bytes', () => {
    fc.assert(
      fc.property(messageArb, (m) => {
        const frame = encodeMessage(m);
        const back = decodeFrame(frame);
        expect(back).toEqual(m);
        expect(encodeMessage(back)).toEqual(frame);
      }),
      { numRuns: 200 },
    );
  });

  it('typed decoders refuse other kinds', () => {
    const frame = encodeMessage({ kind: 'ack', message: { requestId: 1 } });
    expect(wireCode(() => decodeChallenge(frame))).toBe('unknown_type');
    expect(wireCode(() => decodeParamHash(frame))).toBe('unknown_type');
    expect(wireCode(() => decodeStateSnapshot(frame))).toBe('unknown_type');
    expect(wireCode(() => decodeWarmupWitness(frame))).toBe('unknown_type');
  });

  const samples: WireMessage[] = [
    {
      kind: 'challenge',
      message: { runId: 'run-1', challenge: new Uint8Array(32).fill(7), serverTime: 1e12, powBits: 20 },
    },
    { kind: 'paramHash', message: { runId: 'run-1', epoch: 3, step: 140, hash: new Uint8Array(32).fill(9) } },
    { kind: 'warmupWitness', message: { runId: 'run-1', epoch: 300 } },
    {
      kind: 'stateSnapshot',
      message: {
        runId: 'run-1',
        seq: 42,
        serverTime: 1e12,
        paramHash: { epoch: 2, hash: new Uint8Array(32).fill(5) },
        state: stateFor('run-1', 2),
      },
    },
  ];

  for (const m of samples) {
    it(`${m.kind}: every proper prefix is truncated, an extra byte is trailing`, () => {
      const frame = encodeMessage(m);
      for (let n = 0; n < frame.length; n++)
        expect(wireCode(() => decodeFrame(frame.subarray(0, n)))).toBe('truncated');
      const longer = new Uint8Array(frame.length + 1);
      longer.set(frame);
      expect(wireCode(() => decodeFrame(longer))).toBe('trailing_bytes');
    });

    it(`${m.kind}: every single bit flip is rejected or decodes to its one canonical spelling`, () => {
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

  it('state JSON must be canonical, an object, version 1 and name the frame run', () => {
    const good = samples.find((m) => m.kind === 'stateSnapshot')!;
    if (good.kind !== 'stateSnapshot') throw new Error('sample order');
    // The frame carries the state interned (state-interning.ts); its text is still canonical JSON.
    const text = internState(good.message.state).text;
    // Re-spell the JSON by hand and splice it into an otherwise valid frame.
    const withState = (json: string) => {
      const frame = encodeStateSnapshot(good.message);
      const prefixLen = frame.length - new TextEncoder().encode(text).length - varintLen(text.length);
      const body = new TextEncoder().encode(json);
      const len = varint(body.length);
      const out = new Uint8Array(prefixLen + len.length + body.length);
      out.set(frame.subarray(0, prefixLen));
      out.set(len, prefixLen);
      out.set(body, prefixLen + len.length);
      return out;
    };
    expect(decodeStateSnapshot(withState(text))).toEqual(good.message);
    expect(wireCode(() => decodeStateSnapshot(withState(` ${text}`)))).toBe('inconsistent');
    expect(wireCode(() => decodeStateSnapshot(withState(text.slice(0, -1))))).toBe('inconsistent');
    expect(wireCode(() => decodeStateSnapshot(withState('[1]')))).toBe('inconsistent');
    expect(wireCode(() => decodeStateSnapshot(withState('null')))).toBe('inconsistent');
    expect(wireCode(() => decodeStateSnapshot(withState(text.replace('"version":1', '"version":2'))))).toBe(
      'inconsistent',
    );
    expect(
      wireCode(() => decodeStateSnapshot(withState(text.replace('"run_id":"run-1"', '"run_id":"run-2"')))),
    ).toBe('inconsistent');
  });

  it('a snapshot over maxFrameBytes is refused before parsing, and not encoded', () => {
    const m = samples.find((x) => x.kind === 'stateSnapshot')!;
    const limits = wireLimits({ maxFrameBytes: 256 });
    expect(wireCode(() => encodeMessage(m, limits))).toBe('limit');
    const frame = encodeMessage(m);
    expect(wireCode(() => decodeFrame(frame, limits))).toBe('oversized');
  });
});

function varint(n: number): Uint8Array {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return Uint8Array.from(out);
}

function varintLen(n: number): number {
  return varint(n).length;
}
