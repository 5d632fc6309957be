// Replaying deltas gives the relay's exact state. A host drives a coordinator through random runs (joins,
// leaves, warmup, results, witnesses with real attestations, verdicts, health checks, forged witnesses that earn
// strikes, ejections, pauses, config updates, clock jumps) the way the relay does — fresh entropy only where a
// transition starts a round — and records what it applied; a replica that starts from a JSON snapshot taken
// at a random point and replays the encoded StateDelta frames must equal the host's state at every frame end:
// the same canonical JSON, deep-equal, the same stateHash.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  applyStateDelta,
  compactEvent,
  currentRound,
  encodeStateDelta,
  expandEvent,
  replayTransition,
  stateHash,
  WireError,
} from '../src/index.ts';
import type { CoordinatorEvent, CoordinatorState, WireTransition } from '../src/index.ts';
import { clientId } from '../../../bench/lib/honest-client.ts';
import { actionArb, drive } from './fixtures/random-run.ts';
import { decodeStateDelta } from '../src/wire/state-delta.ts';

function expectSame(replica: CoordinatorState, host: CoordinatorState): void {
  expect(JSON.stringify(replica)).toBe(JSON.stringify(host));
  expect(replica).toEqual(host);
  expect(stateHash(replica)).toEqual(stateHash(host));
}

describe('replaying state deltas', () => {
  it('a replica from any snapshot plus the encoded deltas equals the host state at every frame', () => {
    let transitions = 0;
    const kinds = new Set<string>();
    fc.assert(
      fc.property(
        fc.array(actionArb, { minLength: 60, maxLength: 300, size: 'max' }),
        fc.integer({ min: 0, max: 2e9 }),
        fc.nat(),
        fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 64 }),
        (actions, t0, startPick, chunks) => {
          const host = drive(actions, t0);
          transitions += host.log.length;
          for (const t of host.log) kinds.add(t.event.type + (t.entropy ? '+entropy' : ''));
          if (host.log.length === 0) return;
          // The replica joins at seq k with the JSON snapshot a relay would send (parsed, not shared).
          const k = startPick % host.log.length;
          let seq = k;
          let replica = JSON.parse(JSON.stringify(host.history[k])) as CoordinatorState;
          // Frames overlap what the snapshot held (the shared frame of a coalescing window) by a step.
          let from = Math.max(0, k - 1);
          let c = 0;
          while (from < host.log.length) {
            const n = chunks[c++ % chunks.length]!;
            const frame = encodeStateDelta({
              runId: 'replay',
              fromSeq: from,
              transitions: host.log.slice(from, from + n),
              stateHash: stateHash(host.history[Math.min(from + n, host.log.length)]!),
            });
            const delta = decodeStateDelta(frame);
            const out = applyStateDelta(replica, seq, delta);
            expect(out.gap).toBe(false);
            replica = out.state;
            seq = out.seq;
            expect(seq).toBe(Math.min(from + n, host.log.length));
            expectSame(replica, host.history[seq]!);
            expect(delta.stateHash).toEqual(stateHash(replica));
            from += n;
          }
        },
      ),
      { numRuns: 120 },
    );
    // The runs must actually exercise the protocol, not just joins and ticks.
    for (const k of [
      'join',
      'leave',
      'warmupWitness',
      'witness',
      'admitted',
      'verdictSlot',
      'healthCheck',
      'eject',
      'tick+entropy',
      'pause',
      'resume',
      'updateConfig',
    ])
      expect(kinds, `no ${k} transition in any run`).toContain(k);
    expect(transitions).toBeGreaterThan(5000);
  });

  it('a delta that starts past the replica is a gap; one that does not fit the state is refused', () => {
    const host = drive(
      [
        { kind: 'join', who: 0, noP2p: false },
        { kind: 'join', who: 1, noP2p: false },
        { kind: 'join', who: 2, noP2p: false },
        { kind: 'tick', dt: 3, entropyInTick: false },
        { kind: 'warmup' },
        { kind: 'leave', who: 1 },
      ],
      1000,
    );
    expect(host.log.length).toBeGreaterThan(5);
    const delta = { runId: 'replay', fromSeq: 3, transitions: host.log.slice(3) };
    expect(applyStateDelta(host.history[2]!, 2, delta).gap).toBe(true);
    // A leave naming epoch client 7 of an epoch of three clients names nobody.
    const bad: WireTransition = {
      now: host.now,
      entropy: null,
      event: { type: 'leave', who: { client: 7 } },
    };
    expect(() => replayTransition(host.state, bad)).toThrow(WireError);
  });

  it('events outside the open round keep their full form and expand back to themselves', () => {
    const host = drive(
      [
        { kind: 'join', who: 0, noP2p: false },
        { kind: 'join', who: 1, noP2p: true },
        { kind: 'join', who: 2, noP2p: false },
        { kind: 'tick', dt: 3, entropyInTick: false },
        { kind: 'warmup' },
        { kind: 'honest', some: 20, merkle: false },
      ],
      1000,
    );
    const s = host.state;
    expect(currentRound(s)).not.toBeNull();
    const events: CoordinatorEvent[] = [
      {
        type: 'result_admitted',
        id: clientId(0),
        step: 99,
        batch: { start: 1, end: 2 },
        commitment: '11'.repeat(32),
      },
      { type: 'verdict', id: clientId(1), step: 99, batch: { start: 3, end: 4 }, pass: true },
      { type: 'leave', id: clientId(9) },
      { type: 'join', id: clientId(1), p2p_id: clientId(1) },
      { type: 'update_config', config: s.config },
      { type: 'entropy', entropy: '' },
    ];
    for (const e of events) expect(expandEvent(s, compactEvent(s, e))).toEqual(e);
    expect(compactEvent(s, events[0]!).type).toBe('resultAdmitted');
    expect(compactEvent(s, events[1]!).type).toBe('verdict');
    expect(compactEvent(s, events[2]!)).toMatchObject({
      type: 'leave',
      who: { key: expect.any(Uint8Array) },
    });
    expect(compactEvent(s, events[3]!)).toMatchObject({ type: 'join', p2pId: null });
  });
});
