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
  compactTransition,
  createCoordinator,
  currentRound,
  decodeStateDelta,
  encodeStateDelta,
  expandEvent,
  replayTransition,
  roundAtHeight,
  roundSelection,
  stateHash,
  tick,
  unhealthyTrainers,
  usesEntropy,
  verificationTasks,
  WireError,
} from '../src/index.ts';
import type { CoordinatorConfig, CoordinatorEvent, CoordinatorState, WireTransition } from '../src/index.ts';
import { clientId, honestWitnessEvents } from '../../../bench/lib/honest-client.ts';
import { baseConfig } from './fixtures/coordinator.ts';

const POOL = 10;

type Action =
  | { kind: 'tick'; dt: number; entropyInTick: boolean }
  | { kind: 'join'; who: number; noP2p: boolean }
  | { kind: 'leave'; who: number }
  | { kind: 'warmup' }
  | { kind: 'honest'; some: number; merkle: boolean }
  | { kind: 'verdicts'; failEvery: number }
  | { kind: 'health' }
  /** The client goes silent (no result, no witness) until it joins again: health checks accuse it. */
  | { kind: 'crash'; who: number }
  | { kind: 'forged'; who: number }
  | { kind: 'eject'; who: number }
  | { kind: 'pause' }
  | { kind: 'resume' }
  | { kind: 'config'; batch: number };

const who = fc.integer({ min: 0, max: POOL - 1 });
const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      dt: fc.integer({ min: -2, max: 12 }),
      entropyInTick: fc.boolean(),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('join' as const), who, noP2p: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('leave' as const), who }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('warmup' as const) }) },
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant('honest' as const),
      some: fc.integer({ min: 1, max: 20 }),
      merkle: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('verdicts' as const),
      failEvery: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('health' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('crash' as const), who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('forged' as const), who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('eject' as const), who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('pause' as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('resume' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('config' as const), batch: fc.integer({ min: 2, max: 12 }) }),
  },
);

const config: CoordinatorConfig = {
  ...baseConfig,
  warmup_time: 4,
  cooldown_time: 2,
  epoch_time: 40,
  max_round_train_time: 6,
  min_clients: 2,
  init_min_clients: 3,
  witness_nodes: 0,
  max_witnesses: 3,
  verification_percent: 60,
  total_steps: 60,
  max_clients: 8,
  bloom_false_positive_rate: 1e-6,
};

function eventsOf(s: CoordinatorState, a: Action, alive: (id: string) => boolean): CoordinatorEvent[] {
  const round = currentRound(s);
  switch (a.kind) {
    case 'tick':
    case 'crash':
      return [];
    case 'join':
      return [{ type: 'join', id: clientId(a.who), p2p_id: a.noP2p ? clientId(a.who) : `peer-${a.who}` }];
    case 'leave':
      return [{ type: 'leave', id: clientId(a.who) }];
    case 'warmup':
      return s.epoch.clients
        .filter((c) => alive(c.id))
        .map((c) => ({ type: 'warmup_witness' as const, id: c.id }));
    case 'honest':
      return honestWitnessEvents(s, alive)
        .slice(0, a.some)
        .map((e) => (e.type === 'witness' && a.merkle ? { ...e, broadcast_merkle: 'ab'.repeat(32) } : e));
    case 'verdicts': {
      const judged = round ? roundAtHeight(s, round.height - 1) : null;
      if (!round || !judged) return [];
      return verificationTasks(s, judged, round).flatMap((t, i) =>
        t.verifiers.map((id) => ({
          type: 'verdict' as const,
          id,
          step: judged.step,
          batch: t.trainer.batch,
          pass: i % a.failEvery !== 0,
        })),
      );
    }
    case 'health': {
      const judged = round ? roundAtHeight(s, round.height - 2) : null;
      if (!round || !judged) return [];
      const checks = unhealthyTrainers(s).map((x) => ({
        id: x.id,
        proof: roundSelection(judged).committeeProof(x.index),
      }));
      if (checks.length === 0) return [];
      const sel = roundSelection(round);
      return sel
        .witnesses()
        .map((i) => s.epoch.clients[round.roster[i]!]!.id)
        .filter(alive)
        .map((id) => ({ type: 'health_check' as const, id, checks }));
    }
    case 'forged': {
      if (!round || round.roster.length === 0) return [];
      const e = honestWitnessEvents(s).find((x) => x.type === 'witness');
      if (!e || e.type !== 'witness') return [];
      const i = a.who % round.roster.length;
      return [
        {
          ...e,
          id: s.epoch.clients[round.roster[i]!]!.id,
          proof: { ...e.proof, position: e.proof.position + 1 },
        },
      ];
    }
    case 'eject':
      return [{ type: 'eject', id: clientId(a.who), reason: 'x'.repeat(400) }];
    case 'pause':
      return [{ type: 'pause' }];
    case 'resume':
      return [{ type: 'resume' }];
    case 'config':
      return [
        {
          type: 'update_config',
          config: { ...s.config, global_batch_size_start: a.batch, global_batch_size_end: a.batch },
        },
      ];
  }
}

/** The relay's RunHost, reduced to what it feeds core: entropy only where a round starts. */
class Host {
  state: CoordinatorState;
  now: number;
  /** history[i]: the state at seq i. */
  readonly history: CoordinatorState[];
  readonly log: WireTransition[] = [];
  private n = 0;
  constructor(t0: number) {
    this.now = t0;
    this.state = createCoordinator({ run_id: 'replay', run_seed: '5a'.repeat(32), config, now: t0 });
    this.history = [this.state];
  }
  private entropy(): string {
    this.n++;
    return (this.n * 2654435761).toString(16).padStart(8, '0').repeat(4);
  }
  apply(event: CoordinatorEvent): void {
    let r = tick(this.state, event, this.now);
    if (r.state === this.state) return;
    let entropy: string | undefined;
    if (usesEntropy(r.effects)) {
      entropy = this.entropy();
      r = tick(tick(this.state, { type: 'entropy', entropy }, this.now).state, event, this.now);
    }
    this.commit(r.state, { now: this.now, event, ...(entropy === undefined ? {} : { entropy }) });
  }
  timer(withEntropyInTick: boolean): void {
    const probe = tick(this.state, { type: 'tick' }, this.now);
    if (probe.state === this.state) return;
    if (!usesEntropy(probe.effects))
      return this.commit(probe.state, { now: this.now, event: { type: 'tick' } });
    const entropy = this.entropy();
    if (withEntropyInTick) {
      const r = tick(this.state, { type: 'tick', entropy }, this.now);
      this.commit(r.state, { now: this.now, event: { type: 'tick', entropy } });
    } else {
      const r = tick(
        tick(this.state, { type: 'entropy', entropy }, this.now).state,
        { type: 'tick' },
        this.now,
      );
      this.commit(r.state, { now: this.now, entropy, event: { type: 'tick' } });
    }
  }
  private commit(next: CoordinatorState, t: Parameters<typeof compactTransition>[1]): void {
    this.log.push(compactTransition(this.state, t));
    this.state = next;
    this.history.push(next);
  }
}

function drive(actions: Action[], t0: number): Host {
  const host = new Host(t0);
  const crashed = new Set<string>();
  const alive = (id: string) => !crashed.has(id);
  for (const a of actions) {
    if (a.kind === 'tick') {
      host.now = Math.max(0, host.now + a.dt);
      host.timer(a.entropyInTick);
      continue;
    }
    if (a.kind === 'crash') crashed.add(clientId(a.who));
    if (a.kind === 'join') crashed.delete(clientId(a.who));
    for (const e of eventsOf(host.state, a, alive)) host.apply(e);
  }
  return host;
}

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
