// The replica's follower (replica/follower.ts): snapshots replace the state unless stale, deltas apply past
// the seq, a delta past it is a gap, one that does not fit or a hash that differs marks the replica diverged
// until the next snapshot, and a hash check about a replaced state is stale. The deltas are a real
// coordinator run's (fixtures/random-run.ts), compacted as the relay sends them.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compactTransition,
  Follower,
  stateHash,
  type StateDelta,
  type WireTransition,
} from '../src/index.ts';
import { actionArb, drive } from './fixtures/random-run.ts';

const [actions] = fc.sample(fc.array(actionArb, { minLength: 250, maxLength: 250 }), {
  seed: 21,
  numRuns: 1,
});
const host = drive(actions!, 4_000_000);
const wire: WireTransition[] = host.applied.map((t, i) => compactTransition(host.history[i]!, t));
const delta = (from: number, to: number, hash = false): StateDelta => ({
  runId: host.state.run_id,
  fromSeq: from,
  transitions: wire.slice(from, to),
  ...(hash ? { stateHash: stateHash(host.history[to]!) } : {}),
});
const snapshot = (seq: number) => ({ runId: 'r', seq, serverTime: 0, state: host.history[seq]! });

describe('Follower', () => {
  it('applies deltas past its seq to the relay state, and reports gaps and old frames', () => {
    expect(host.applied.length).toBeGreaterThan(20);
    const f = new Follower();
    expect(f.applyDelta(delta(0, 5)).kind).toBe('ignored');
    expect(f.takeSnapshot(snapshot(3))).toBe(true);
    const step = f.applyDelta(delta(0, 10, true));
    expect(step.kind).toBe('applied');
    if (step.kind !== 'applied') return;
    expect(step.seq).toBe(10);
    expect(JSON.stringify(step.state)).toBe(JSON.stringify(host.history[10]));
    expect(step.stateHash).toEqual(stateHash(host.history[10]!));
    expect(f.checkHash(f.generation, stateHash(step.state), step.stateHash!)).toBe('same');
    expect(f.applyDelta(delta(5, 10)).kind).toBe('ignored');
    expect(f.applyDelta(delta(12, 15))).toEqual({ kind: 'gap', fromSeq: 12 });
    expect(f.seq).toBe(10);
    // An older snapshot is stale while the replica is sound.
    expect(f.takeSnapshot(snapshot(4))).toBe(false);
  });

  it('a differing hash or an unfit delta diverges it until a snapshot; a check about a replaced state is stale', () => {
    const f = new Follower();
    f.takeSnapshot(snapshot(0));
    const generation = f.generation;
    expect(f.checkHash(generation, new Uint8Array(32), stateHash(host.history[0]!))).toBe('mismatch');
    expect(f.diverged).toBe(true);
    expect(f.applyDelta(delta(0, 5)).kind).toBe('ignored');
    // Known wrong, it takes even an older snapshot.
    expect(f.takeSnapshot(snapshot(0))).toBe(true);
    expect(f.diverged).toBe(false);
    expect(f.checkHash(generation, new Uint8Array(32), stateHash(host.history[0]!))).toBe('stale');
    // A slot that names nothing in the state does not fit it.
    const unfit: StateDelta = {
      runId: host.state.run_id,
      fromSeq: 0,
      transitions: [
        { now: 1, entropy: null, event: { type: 'admitted', slot: 1_000, commitment: new Uint8Array(32) } },
      ],
    };
    const step = f.applyDelta(unfit);
    expect(step.kind).toBe('unfit');
    expect(f.diverged).toBe(true);
  });
});
