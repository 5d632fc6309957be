// The coordinator under random event sequences and random clocks (fast-check): allowed transitions only,
// quorum, min_clients, pause, data accounting, JSON safety, and liveness with enough honest clients.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  acceptedCommitments,
  createCoordinator,
  currentRound,
  roundAtHeight,
  roundSelection,
  tick,
  type CoordinatorConfig,
  type CoordinatorEvent,
  type CoordinatorState,
  type RunState,
  type TickResult,
} from '../src/coordinator/index.ts';
import { clientId, honestWitnessEvents } from '../../../bench/lib/honest-client.ts';

const ALLOWED: Record<RunState, RunState[]> = {
  Uninitialized: ['Paused'],
  WaitingForMembers: ['Warmup', 'Paused'],
  Warmup: ['RoundTrain', 'WaitingForMembers', 'Paused', 'Finished'],
  RoundTrain: ['RoundWitness'],
  RoundWitness: ['RoundTrain', 'Cooldown'],
  Cooldown: ['WaitingForMembers', 'Paused', 'Finished'],
  Paused: ['WaitingForMembers', 'Finished'],
  Finished: [],
};

const PENALISED = new Set(['BadProof', 'NotAWitness', 'BadBloom', 'SaturatedBloom']);
const POOL = 8;

type Action =
  | { kind: 'tick'; dt: number }
  | { kind: 'join'; who: number }
  | { kind: 'leave'; who: number }
  | { kind: 'warmup' }
  | { kind: 'witness'; some: number }
  /** What all live clients do for a while: warmup witnesses, every witness, a clock step. */
  | { kind: 'honest'; dt: number }
  | { kind: 'forged'; who: number }
  | { kind: 'health'; who: number; target: number }
  | { kind: 'pause' }
  | { kind: 'resume' }
  | { kind: 'eject'; who: number };

const who = fc.integer({ min: 0, max: POOL - 1 });
const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant('tick' as const), dt: fc.integer({ min: -2, max: 15 }) }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('join' as const), who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('leave' as const), who }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('warmup' as const) }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('witness' as const), some: fc.integer({ min: 0, max: 4 }) }),
  },
  {
    weight: 10,
    arbitrary: fc.record({ kind: fc.constant('honest' as const), dt: fc.integer({ min: 0, max: 4 }) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('forged' as const), who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('health' as const), who, target: who }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('pause' as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('resume' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('eject' as const), who }) },
);

const configArb: fc.Arbitrary<CoordinatorConfig> = fc
  .record({
    min_clients: fc.integer({ min: 1, max: 3 }),
    extra_init: fc.integer({ min: 0, max: 2 }),
    witness_nodes: fc.integer({ min: 0, max: 3 }),
    max_witnesses: fc.integer({ min: 1, max: 4 }),
    batch: fc.integer({ min: 1, max: 12 }),
    epoch_time: fc.integer({ min: 20, max: 80 }),
    total_steps: fc.integer({ min: 3, max: 40 }),
  })
  .map((r) => ({
    warmup_time: 5,
    cooldown_time: 3,
    epoch_time: r.epoch_time,
    max_round_train_time: 8,
    round_witness_time: 1,
    min_clients: r.min_clients,
    init_min_clients: r.min_clients + r.extra_init,
    verification_percent: 0,
    witness_nodes: Math.min(r.witness_nodes, r.max_witnesses),
    global_batch_size_start: Math.max(1, r.batch - 4),
    global_batch_size_end: r.batch,
    global_batch_size_warmup_tokens: 64,
    total_steps: r.total_steps,
    waiting_for_members_extra_time: 2,
    max_clients: 6,
    max_witnesses: r.max_witnesses,
    bloom_false_positive_rate: 0.01,
    max_seq_len: 4,
    cold_start_warmup_steps: 0,
  }));

/** Checks what must hold for every single transition, and tracks which data got applied. */
class Checker {
  nextApplied = 0;
  check(before: CoordinatorState, event: CoordinatorEvent, r: TickResult): void {
    const after = r.state;
    if (r.error) {
      expect(r.effects.filter((e) => e.type === 'RunStateChanged')).toEqual([]);
      if (!PENALISED.has(r.error.code)) expect(after).toBe(before);
      else expect(after.run_state).toBe(before.run_state);
    }
    let phase = before.run_state;
    for (const e of r.effects) {
      if (e.type === 'RunStateChanged') {
        expect(e.from).toBe(phase);
        expect(ALLOWED[phase], `${phase} -> ${e.to} on ${event.type}`).toContain(e.to);
        phase = e.to;
      }
      if (e.type === 'RoundStarted') {
        expect(e.clients).toBeGreaterThanOrEqual(after.config.min_clients);
        expect(before.pending_pause && before.run_state === 'RoundWitness').toBe(false);
        const round = currentRound(after)!;
        expect(round.height).toBe(e.height);
        if (e.height === 0) expect(round.data_index).toBe(after.progress.epoch_start_data_index);
        const prev = roundAtHeight(after, e.height - 1);
        if (prev) expect(round.data_index).toBe(prev.data_index + prev.batch_size);
        if (!round.training) expect(round.batch_size).toBe(0);
        // Round h-2 is applied by everyone at the start of round h: it must continue the data exactly.
        const applied = roundAtHeight(after, e.height - 2);
        if (applied) {
          expect(applied.data_index).toBe(this.nextApplied);
          this.nextApplied += applied.batch_size;
        }
      }
      if (e.type === 'RoundEnded' && !e.quorum_reached) {
        expect(after.run_state).toBe('Cooldown');
        const prevHeight = e.height - 1;
        const none = acceptedCommitments(after, prevHeight, () => []);
        if (none) for (const a of none) expect(a.commitment).toBeNull();
      }
    }
    expect(after.run_state).toBe(phase);
    if (after.run_state === 'Warmup' && before.run_state === 'WaitingForMembers') {
      expect(after.epoch.clients.length).toBeGreaterThanOrEqual(after.config.init_min_clients);
    }
    const round = currentRound(after);
    if (round) expect(round.witnesses.length).toBeLessThanOrEqual(round.witness_count);
    if (after.run_state === ('EpochStart' as RunState)) throw new Error('unreachable');
  }
}

function toEvents(state: CoordinatorState, a: Action): CoordinatorEvent[] {
  switch (a.kind) {
    case 'tick':
    case 'honest':
      return [{ type: 'tick' }];
    case 'join':
      return [{ type: 'join', id: clientId(a.who), p2p_id: `p${a.who}` }];
    case 'leave':
      return [{ type: 'leave', id: clientId(a.who) }];
    case 'warmup':
      return state.epoch.clients.map((c) => ({ type: 'warmup_witness', id: c.id }));
    case 'witness':
      return honestWitnessEvents(state).slice(0, a.some);
    case 'forged': {
      const round = currentRound(state);
      if (!round || round.roster.length === 0) return [];
      const i = a.who % round.roster.length;
      const e = honestWitnessEvents(state)[0];
      const proof = roundSelection(round).witnessProof(i);
      const base = e && e.type === 'witness' ? e : null;
      if (!base) return [];
      return [
        {
          ...base,
          id: state.epoch.clients[round.roster[i]!]!.id,
          proof: { ...proof, witness: true, position: proof.position + 1 },
        },
      ];
    }
    case 'health': {
      const round = currentRound(state);
      const judged = round ? roundAtHeight(state, round.height - 2) : null;
      if (!judged || judged.roster.length === 0) return [];
      const i = a.target % judged.roster.length;
      const target = state.epoch.clients[judged.roster[i]!]!.id;
      return [
        {
          type: 'health_check',
          id: clientId(a.who),
          checks: [{ id: target, proof: roundSelection(judged).committeeProof(i) }],
        },
      ];
    }
    case 'pause':
      return [{ type: 'pause' }];
    case 'resume':
      return [{ type: 'resume' }];
    case 'eject':
      return [{ type: 'eject', id: clientId(a.who), reason: 'test' }];
  }
}

function run(config: CoordinatorConfig, actions: Action[], startAt: number) {
  let state = createCoordinator({ run_id: 'prop', run_seed: '11'.repeat(32), config, now: startAt });
  let now = startAt;
  const checker = new Checker();
  for (const a of actions) {
    const send = (event: CoordinatorEvent) => {
      const r = tick(state, event, now);
      checker.check(state, event, r);
      state = r.state;
    };
    if (a.kind === 'tick') now = Math.max(0, now + a.dt);
    if (a.kind === 'honest') {
      // Live clients that are not members keep asking to join (refusals — banned, full — are checked too).
      if (state.run_state === 'WaitingForMembers')
        for (let i = 0; i < POOL; i++)
          if (!state.members.some((m) => m.id === clientId(i)))
            send({ type: 'join', id: clientId(i), p2p_id: `p${i}` });
      for (const e of toEvents(state, { kind: 'warmup' })) if (state.run_state === 'Warmup') send(e);
      for (const e of honestWitnessEvents(state)) send(e);
      now += a.dt;
      send({ type: 'tick' });
      continue;
    }
    for (const event of toEvents(state, a)) send(event);
  }
  return { state, now, checker };
}

describe('coordinator under random event sequences', () => {
  it('only takes allowed transitions, honours quorum/min_clients/pause, applies every sample once, stays JSON', () => {
    fc.assert(
      fc.property(
        configArb,
        fc.array(action, { minLength: 1, maxLength: 250 }),
        fc.integer({ min: 0, max: 1e9 }),
        (config, actions, t0) => {
          const { state } = run(config, actions, t0);
          expect(JSON.parse(JSON.stringify(state))).toEqual(state);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('never deadlocks: with enough honest clients and advancing time it reaches the next round or the end', () => {
    fc.assert(
      fc.property(
        configArb,
        fc.array(action, { maxLength: 80 }),
        fc.integer({ min: 0, max: 1e9 }),
        (config, actions, t0) => {
          let { state, now } = run(config, actions, t0);
          const checker = new Checker();
          checker.nextApplied = Number.NaN; // data tracking restarts mid-epoch; only transitions are checked here
          const send = (e: CoordinatorEvent) => {
            const r = tick(state, e, now);
            if (!Number.isNaN(checker.nextApplied)) checker.check(state, e, r);
            state = r.state;
            return r;
          };
          if (state.run_state === 'Paused') send({ type: 'resume' });
          // Fresh honest clients (ids past the random pool, so none is banned) keep asking to join, as real
          // clients do while waiting; silent members in the way are dropped when they fail as witnesses.
          const honestIds = Array.from({ length: config.init_min_clients + 1 }, (_, i) => clientId(100 + i));
          const honest = new Set(honestIds);
          const alive = (id: string) => honest.has(id);
          let progressed = false;
          for (let k = 0; k < 400 && !progressed; k++) {
            for (const id of honestIds)
              if (!state.members.some((m) => m.id === id)) send({ type: 'join', id, p2p_id: id.slice(0, 8) });
            // A pause requested before this phase may still land; the admin resumes it.
            if (state.run_state === 'Paused') send({ type: 'resume' });
            now += 1 + (k % 3);
            const r = send({ type: 'tick' });
            // A round that follows a round with quorum: the run moved forward.
            for (const e of r.effects) if (e.type === 'RoundStarted' && e.height >= 1) progressed = true;
            if (state.run_state === 'Finished') progressed = true;
            if (state.run_state === 'Warmup')
              for (const c of state.epoch.clients)
                if (alive(c.id) && state.run_state === 'Warmup') send({ type: 'warmup_witness', id: c.id });
            for (const e of honestWitnessEvents(state, alive)) send(e);
          }
          expect(progressed, `stuck in ${state.run_state}`).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });
});
