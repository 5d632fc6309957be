// An honest minority is enough (docs/protocol.md "Trust: anchors, verified history and probation"): pure
// state-machine runs of the coordinator with colluding identities, lying verifiers and occasional cheaters,
// each client acting out its role on every task core's verificationTasks gives it. Results are abstract
// here (fakeCommitment): what a role fabricates is tracked beside the run, and a verifier reports what its
// role would on the real measurements — an honest one fails a fabricated result conclusively (with the
// evidence a mismatched fingerprint gives) and passes an honest one; a colluder passes its own side's
// results and fails everyone else's conclusively.
import { describe, expect, it } from 'vitest';
import {
  applyLightDelta,
  compactEvent,
  decodeWireEvent,
  encodeWireEvent,
  expandEvent,
  lightTransitionOf,
  originTag,
  createCoordinator,
  currentRound,
  decodeLightDelta,
  encodeLightDelta,
  roundAssignments,
  roundAtHeight,
  stateHash,
  summarizeState,
  tick,
  trustWarning,
  verificationTasks,
  type CoordinatorConfig,
  type CoordinatorEvent,
  type CoordinatorState,
} from '../src/index.ts';
import { clientId, honestWitnessEvents } from '../../../bench/lib/honest-client.ts';
import { baseConfig } from './fixtures/coordinator.ts';
import { checkCoordinatorConfig } from '../src/coordinator/config-check.ts';
import { MAX_STRIKES } from '../src/coordinator/membership.ts';
import { acceptedSlots } from '../src/coordinator/round-outcome.ts';
import { hasRecord } from '../src/coordinator/trust.ts';
import { originNetwork } from '../src/protocol/origin.ts';

/** `verifier`: a trusted verify-only client (`node-trainer verify`). */
type Role = 'honest' | 'trusted' | 'verifier' | 'sybil' | 'liar' | 'third' | 'cheat' | 'sleeper' | 'turncoat';

/** The step from which sleepers and turncoats lie: long enough to earn a verified record first. */
const SLEEPERS_WAKE = 16;

interface Member {
  id: string;
  role: Role;
  origin: string;
}

/** Colluders: fabricate (sybil) or lie as verifiers (liar), and pass each other's results. */
const COLLUDING = new Set<Role>(['sybil', 'liar']);

class Sim {
  state: CoordinatorState;
  now = 1000;
  readonly members: Member[];
  readonly roleOf = new Map<string, Role>();
  /** Per (step, slot): whether the admitted result was fabricated. */
  private readonly fabricated = new Map<string, boolean>();
  private readonly resultsSent = new Map<string, number>();
  /** Per trainer id: its results (and fabricated ones) that an ended round accepted. */
  readonly applied = new Map<string, { all: number; fabricated: number }>();
  /** Per id: results it had sent when it was ejected. */
  readonly ejectedAfter = new Map<string, number>();
  readonly refuted = new Map<string, number>();
  /** Replicas following the run: a full one through encoded events, a light one through LightDelta frames. */
  light: CoordinatorState;
  replica: CoordinatorState;
  private seq = 0;

  constructor(members: Member[], config: Partial<CoordinatorConfig>, runSeed = 'ab'.repeat(32)) {
    this.members = members;
    for (const m of members) this.roleOf.set(m.id, m.role);
    const trusted = members.filter((m) => m.role === 'trusted' || m.role === 'verifier').map((m) => m.id);
    const full: CoordinatorConfig = {
      ...baseConfig,
      witness_nodes: 0,
      min_clients: 2,
      init_min_clients: 2,
      global_batch_size_start: 2 * members.length,
      global_batch_size_end: 2 * members.length,
      epoch_time: 100_000,
      max_clients: 64,
      ...(trusted.length > 0 ? { trusted_verifiers: trusted } : {}),
      ...config,
    };
    expect(checkCoordinatorConfig(full)).toEqual([]);
    this.state = createCoordinator({ run_id: 't', run_seed: runSeed, config: full, now: this.now });
    this.light = this.state;
    this.replica = this.state;
    for (const m of members)
      this.ok({
        type: 'join',
        id: m.id,
        p2p_id: m.id,
        origin: m.origin,
        ...(m.role === 'verifier' ? { verifier_only: true as const } : {}),
      });
  }

  private send(e: CoordinatorEvent) {
    const before = this.state;
    const r = tick(before, e, this.now);
    if (r.error) return r;
    // A full replica takes the event through the wire (StateDelta's event encoding)...
    const wire = decodeWireEvent(encodeWireEvent(compactEvent(this.replica, e)));
    const fr = tick(this.replica, expandEvent(this.replica, wire), this.now);
    expect(fr.error, fr.error?.message).toBeUndefined();
    this.replica = fr.state;
    expect(stateHash(this.replica)).toEqual(stateHash(r.state));
    // ...and a light one what the transition decided, as a LightDelta frame.
    const lt = lightTransitionOf(before, { now: this.now, event: e }, r, this.seq + 1);
    const want = summarizeState(r.state);
    if (lt) {
      const frame = encodeLightDelta({
        runId: 't',
        fromSeq: this.seq,
        toSeq: this.seq + 1,
        transitions: [lt],
        stateHash: stateHash(want),
      });
      const out = applyLightDelta(this.light, this.seq, decodeLightDelta(frame));
      this.light = out.state;
    }
    expect(stateHash(this.light)).toEqual(stateHash(want));
    this.seq++;
    this.state = r.state;
    for (const eff of r.effects) {
      if (eff.type === 'AccusationRefuted')
        this.refuted.set(eff.verifier, (this.refuted.get(eff.verifier) ?? 0) + 1);
      if (eff.type === 'ClientEjected') this.ejectedAfter.set(eff.id, this.resultsSent.get(eff.id) ?? 0);
    }
    return r;
  }

  private ok(e: CoordinatorEvent) {
    const r = this.send(e);
    expect(r.error, r.error?.message).toBeUndefined();
    return r;
  }

  private fabricates(id: string): boolean {
    const role = this.roleOf.get(id)!;
    const n = (this.resultsSent.get(id) ?? 0) + 1;
    this.resultsSent.set(id, n);
    if (role === 'sybil' || role === 'cheat') return true;
    if (role === 'turncoat') return this.state.progress.step >= SLEEPERS_WAKE;
    return role === 'third' && n % 3 === 0;
  }

  /** What verifier `v` reports on a result of `trainer`. */
  private judge(v: string, trainer: string, fake: boolean): { pass: boolean; conclusive?: true } {
    const role = this.roleOf.get(v)!;
    // A sleeper verifies honestly until it has a record, then fails every result but its own side's.
    // A turncoat does the same, and fabricates its own results from then on.
    if ((role === 'sleeper' || role === 'turncoat') && this.state.progress.step >= SLEEPERS_WAKE)
      return this.roleOf.get(trainer) === role ? { pass: true } : { pass: false, conclusive: true };
    if (COLLUDING.has(role))
      return COLLUDING.has(this.roleOf.get(trainer)!) ? { pass: true } : { pass: false, conclusive: true };
    return fake ? { pass: false, conclusive: true } : { pass: true };
  }

  private alive = (id: string): boolean => !this.state.ejected.includes(id);

  /** One round: verdicts on the round before, results and witnesses of this one, then the timers run on. */
  round(): void {
    const cur = currentRound(this.state);
    if (cur && (this.state.run_state === 'RoundTrain' || this.state.run_state === 'RoundWitness')) {
      const judged = roundAtHeight(this.state, cur.height - 1);
      if (judged)
        for (const task of verificationTasks(this.state, judged, cur)) {
          const fake = this.fabricated.get(`${judged.step}:${task.slot}`);
          if (fake === undefined) continue;
          for (const v of task.verifiers) {
            if (!this.alive(v)) continue;
            const j = this.judge(v, task.trainer.id, fake);
            this.send({
              type: 'verdict',
              id: v,
              step: judged.step,
              batch: task.trainer.batch,
              ...j,
              ...(j.conclusive ? { evidence: [3000, 100] as [number, number] } : {}),
            });
          }
        }
      roundAssignments(this.state, cur).forEach((a, slot) => {
        const key = `${cur.step}:${slot}`;
        if (this.alive(a.id) && !this.fabricated.has(key)) this.fabricated.set(key, this.fabricates(a.id));
      });
      for (const e of honestWitnessEvents(this.state, this.alive)) this.send(e);
    }
    const height = cur?.height ?? -1;
    for (let i = 0; i < 60; i++) {
      this.now += 1;
      this.ok({ type: 'tick' });
      if (this.state.run_state === 'Warmup')
        for (const c of this.state.epoch.clients)
          if (c.state === 'Healthy') this.send({ type: 'warmup_witness', id: c.id });
      const next = currentRound(this.state);
      if (this.state.run_state === 'RoundTrain' && next && next.height !== height) break;
    }
    this.count(height - 1);
  }

  private count(height: number): void {
    const round = roundAtHeight(this.state, height);
    const accepted = acceptedSlots(this.state, height);
    if (!round || !accepted) return;
    roundAssignments(this.state, round).forEach((a, slot) => {
      if (!accepted[slot]) return;
      const c = this.applied.get(a.id) ?? { all: 0, fabricated: 0 };
      c.all++;
      if (this.fabricated.get(`${round.step}:${slot}`)) c.fabricated++;
      this.applied.set(a.id, c);
    });
  }

  idsOf(role: Role): string[] {
    return this.members.filter((m) => m.role === role).map((m) => m.id);
  }

  appliedOf(role: Role): { all: number; fabricated: number } {
    let all = 0;
    let fabricated = 0;
    for (const id of this.idsOf(role)) {
      all += this.applied.get(id)?.all ?? 0;
      fabricated += this.applied.get(id)?.fabricated ?? 0;
    }
    return { all, fabricated };
  }
}

function members(spec: [Role, number, string][]): Member[] {
  const out: Member[] = [];
  for (const [role, n, origin] of spec)
    for (let i = 0; i < n; i++) out.push({ id: clientId(out.length), role, origin });
  return out;
}

const ORIGIN = (k: number): string => k.toString(16).padStart(16, '0');

describe('an anchored run with a hostile majority', () => {
  it('16 colluding identities from one origin, 2 honest, 1 trusted verifier: nothing fabricated is applied, no honest client ejected', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['honest', 1, ORIGIN(2)],
        ['honest', 1, ORIGIN(3)],
        ['sybil', 16, ORIGIN(9)],
      ]),
      { verification_percent: 10 },
    );
    for (let k = 0; k < 30; k++) sim.round();
    expect(sim.appliedOf('sybil').fabricated).toBe(0);
    for (const id of [...sim.idsOf('honest'), ...sim.idsOf('trusted')])
      expect(sim.state.ejected).not.toContain(id);
    // Every sybil's first result was verified by the trusted verifier and failed: all of them are out.
    for (const id of sim.idsOf('sybil')) expect(sim.state.ejected).toContain(id);
    // Honest work goes on: applied during probation (bounded), then with a record.
    expect(sim.appliedOf('honest').all).toBeGreaterThan(10);
    for (const id of sim.idsOf('honest')) expect(hasRecord(sim.state, id)).toBe(true);
    expect(trustWarning(sim.state)).toBeNull();
  });

  it('probation: a newcomer is sampled every time and its results are a bounded share of what is applied', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['honest', 6, ORIGIN(2)],
      ]),
      { verification_percent: 10 },
    );
    sim.round();
    sim.round();
    // Round 1 verifies round 0: every honest trainer is on probation, so every result is sampled, and the
    // trusted verifier is the first verifier of each.
    const cur = currentRound(sim.state)!;
    const judged = roundAtHeight(sim.state, cur.height - 1)!;
    const tasks = verificationTasks(sim.state, judged, cur);
    const trusted = sim.idsOf('trusted')[0]!;
    expect(tasks.length).toBe(roundAssignments(sim.state, judged).length - 1);
    for (const t of tasks) if (t.trainer.id !== trusted) expect(t.verifiers[0]).toBe(trusted);
    for (let k = 0; k < 4; k++) sim.round();
    // While all six are on probation, a round applies the trusted verifier's result and one probation result.
    const early = roundAtHeight(sim.state, 2)!;
    const accepted = acceptedSlots(sim.state, 2)!;
    const probation = roundAssignments(sim.state, early).filter(
      (a, slot) => accepted[slot] && a.id !== trusted,
    );
    expect(probation).toHaveLength(1);
  });

  it('3 lying verifiers failing every honest result, every result sampled, 30 rounds: the honest trainer stays, the liars take strikes', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['honest', 1, ORIGIN(2)],
        ['liar', 3, ORIGIN(7)],
      ]),
      { verification_percent: 100 },
    );
    for (let k = 0; k < 30; k++) sim.round();
    const honest = sim.idsOf('honest')[0]!;
    expect(sim.state.ejected).not.toContain(honest);
    expect(sim.state.epoch.clients.find((c) => c.id === honest)?.state).toBe('Healthy');
    let refuted = 0;
    for (const id of sim.idsOf('liar')) refuted += sim.refuted.get(id) ?? 0;
    expect(refuted).toBeGreaterThanOrEqual(MAX_STRIKES);
    // MAX_STRIKES refuted accusations eject a liar.
    for (const id of sim.idsOf('liar'))
      if ((sim.refuted.get(id) ?? 0) >= MAX_STRIKES) expect(sim.state.ejected).toContain(id);
    expect(sim.appliedOf('honest').all).toBeGreaterThan(10);
  });

  it('liars who first earn a verified record eject no honest trainer: their accusations need a confirmer who is not one of them', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['honest', 3, ORIGIN(2)],
        ['sleeper', 1, ORIGIN(5)],
        ['sleeper', 1, ORIGIN(6)],
        ['sleeper', 1, ORIGIN(7)],
      ]),
      { verification_percent: 25 },
    );
    for (let k = 0; k < SLEEPERS_WAKE; k++) sim.round();
    // Honest work while asleep gave every sleeper a record: it verifies as a qualified verifier now.
    for (const id of sim.idsOf('sleeper')) expect(hasRecord(sim.state, id)).toBe(true);
    for (let k = 0; k < 40; k++) sim.round();
    for (const id of sim.idsOf('honest')) {
      expect(sim.state.ejected).not.toContain(id);
      expect(sim.state.epoch.clients.find((c) => c.id === id)?.state).toBe('Healthy');
    }
    // Their accusations were refuted by the trusted verifier, which the accused trainers' results went to.
    let refuted = 0;
    for (const id of sim.idsOf('sleeper')) refuted += sim.refuted.get(id) ?? 0;
    expect(refuted).toBeGreaterThanOrEqual(MAX_STRIKES);
    expect(sim.appliedOf('honest').all).toBeGreaterThan(40);
  });

  it('turncoats with earned records, passing each other’s fabrications and failing honest work, strike no honest verifier', () => {
    const spec: [Role, number, string][] = [
      ['trusted', 1, ORIGIN(1)],
      ['honest', 1, ORIGIN(2)],
      ['honest', 1, ORIGIN(3)],
    ];
    for (let i = 0; i < 6; i++) spec.push(['turncoat', 1, ORIGIN(20 + i)]);
    const sim = new Sim(members(spec), { verification_percent: 50 });
    for (let k = 0; k < SLEEPERS_WAKE; k++) sim.round();
    for (const id of sim.idsOf('turncoat')) expect(hasRecord(sim.state, id)).toBe(true);
    for (let k = 0; k < 40; k++) sim.round();
    // Their failures cost honest trainers their records, so an honest accusation of a fabrication can stand
    // against a turncoat's qualified pass. Such a pass keeps the result out and strikes no one: only a
    // trusted verifier's word refutes an accuser.
    for (const id of sim.idsOf('honest')) {
      expect(sim.refuted.get(id) ?? 0).toBe(0);
      expect(sim.state.strikes[id] ?? 0).toBe(0);
      expect(sim.state.ejected).not.toContain(id);
      expect(sim.state.epoch.clients.find((c) => c.id === id)?.state).toBe('Healthy');
    }
    // Each turncoat's fabrications reach a trusted verifier once it has lost its record: all are out.
    for (const id of sim.idsOf('turncoat')) expect(sim.state.ejected).toContain(id);
    expect(sim.appliedOf('honest').all).toBeGreaterThan(40);
  });

  it('an every-third-result cheater is ejected within 40 of its results, with at most 5 fabricated ones applied', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['honest', 4, ORIGIN(2)],
        ['third', 1, ORIGIN(3)],
      ]),
      { verification_percent: 10 },
    );
    const cheater = sim.idsOf('third')[0]!;
    for (let k = 0; k < 60 && !sim.state.ejected.includes(cheater); k++) sim.round();
    expect(sim.state.ejected).toContain(cheater);
    expect(sim.ejectedAfter.get(cheater)).toBeLessThanOrEqual(40);
    expect(sim.applied.get(cheater)?.fabricated ?? 0).toBeLessThanOrEqual(5);
    for (const id of sim.idsOf('honest')) expect(sim.state.ejected).not.toContain(id);
  });

  it('a two-client run whose other client is the trusted verifier: an every-round cheater gets nothing applied', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['cheat', 1, ORIGIN(2)],
      ]),
      { verification_percent: 10 },
    );
    const cheater = sim.idsOf('cheat')[0]!;
    for (let k = 0; k < 10; k++) sim.round();
    expect(sim.state.ejected).toContain(cheater);
    expect(sim.applied.get(cheater)?.fabricated ?? 0).toBe(0);
  });
});

describe('a verify-only trusted verifier', () => {
  it('is in no roster and no quorum, verifies every probation result, and lets honest work through', () => {
    const sim = new Sim(
      members([
        ['verifier', 1, ORIGIN(1)],
        ['honest', 2, ORIGIN(2)],
        ['sybil', 4, ORIGIN(9)],
      ]),
      { verification_percent: 10 },
    );
    const verifier = sim.idsOf('verifier')[0]!;
    const vi = sim.state.members.findIndex((m) => m.id === verifier);
    expect(sim.state.members[vi]?.verifier_only).toBe(true);
    let checked = 0;
    for (let k = 0; k < 20; k++) {
      sim.round();
      const cur = currentRound(sim.state);
      if (!cur) continue;
      const ci = sim.state.epoch.clients.findIndex((c) => c.id === verifier);
      expect(cur.roster).not.toContain(ci);
      expect(roundAssignments(sim.state, cur).map((a) => a.id)).not.toContain(verifier);
      const judged = roundAtHeight(sim.state, cur.height - 1);
      if (judged && cur.verifiers?.includes(ci))
        for (const t of verificationTasks(sim.state, judged, cur))
          if (t.trainer.id !== verifier) {
            // Everyone is on probation at first, and verified first by the trusted verifier.
            if (judged.qualified && !judged.qualified.includes(t.trainer.client_index)) {
              expect(t.verifiers[0]).toBe(verifier);
              checked++;
            }
          }
    }
    expect(checked).toBeGreaterThan(0);
    expect(sim.appliedOf('sybil').fabricated).toBe(0);
    for (const id of sim.idsOf('sybil')) expect(sim.state.ejected).toContain(id);
    for (const id of sim.idsOf('honest')) expect(sim.state.ejected).not.toContain(id);
    expect(sim.appliedOf('honest').all).toBeGreaterThan(10);
  });
});

describe('a run without anchor', () => {
  it('warns that it may be attacker-controlled, and two accusers of one origin eject nobody', () => {
    const sim = new Sim(
      members([
        ['honest', 1, ORIGIN(2)],
        ['liar', 2, ORIGIN(7)],
      ]),
      { verification_percent: 100 },
    );
    expect(trustWarning(sim.state)).toMatch(/no trusted verifier/);
    for (let k = 0; k < 12; k++) sim.round();
    // Both verifiers of every honest result are liars from one origin: their failures keep the results out
    // (one failing verdict does) but confirm no cheat.
    const honest = sim.idsOf('honest')[0]!;
    expect(sim.state.ejected).not.toContain(honest);
  });

  it('30 % lying verifiers from three origins eject no honest trainer: two agreeing accusers are one strike', () => {
    for (const seed of ['ab', 'cd', 'ef']) {
      const spec: [Role, number, string][] = [];
      for (let i = 0; i < 7; i++) spec.push(['honest', 1, ORIGIN(2 + i)]);
      for (let i = 0; i < 3; i++) spec.push(['liar', 1, ORIGIN(30 + i)]);
      const sim = new Sim(members(spec), { verification_percent: 10 }, seed.repeat(32));
      for (let k = 0; k < 60; k++) sim.round();
      for (const id of sim.idsOf('honest')) expect(sim.state.ejected).not.toContain(id);
      expect(sim.appliedOf('honest').all).toBeGreaterThan(200);
    }
  });

  it('a cheater is still ejected, once three verifier pairs have each failed one of its results', () => {
    for (const seed of ['ab', 'cd', 'ef']) {
      const spec: [Role, number, string][] = [['cheat', 1, ORIGIN(30)]];
      for (let i = 0; i < 4; i++) spec.push(['honest', 1, ORIGIN(2 + i)]);
      const sim = new Sim(members(spec), { verification_percent: 25 }, seed.repeat(32));
      const cheater = sim.idsOf('cheat')[0]!;
      for (let k = 0; k < 80 && !sim.state.ejected.includes(cheater); k++) sim.round();
      expect(sim.state.ejected).toContain(cheater);
      // Three sampled results at 25 %: about a dozen results (7, 10 and 18 with these seeds).
      expect(sim.ejectedAfter.get(cheater)).toBeLessThanOrEqual(30);
      for (const id of sim.idsOf('honest')) expect(sim.state.ejected).not.toContain(id);
    }
  });

  it('a trusted verifier checks results of its own origin; others never do', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(2)],
        ['honest', 3, ORIGIN(2)],
      ]),
      { verification_percent: 100 },
    );
    const trusted = sim.idsOf('trusted')[0]!;
    for (let k = 0; k < 3; k++) sim.round();
    const cur = currentRound(sim.state)!;
    const tasks = verificationTasks(sim.state, roundAtHeight(sim.state, cur.height - 1)!, cur);
    expect(tasks.length).toBeGreaterThan(0);
    for (const t of tasks) {
      expect(t.trainer.id).not.toBe(trusted);
      expect(t.verifiers).toEqual([trusted]);
    }
  });

  it('never lets an identity verify one of its own origin', () => {
    const sim = new Sim(
      members([
        ['honest', 3, ORIGIN(2)],
        ['honest', 3, ORIGIN(3)],
      ]),
      { verification_percent: 100 },
    );
    for (let k = 0; k < 4; k++) {
      sim.round();
      const cur = currentRound(sim.state)!;
      const judged = roundAtHeight(sim.state, cur.height - 1);
      if (!judged) continue;
      const originOf = (id: string) => sim.members.find((m) => m.id === id)!.origin;
      for (const t of verificationTasks(sim.state, judged, cur))
        for (const v of t.verifiers) expect(originOf(v)).not.toBe(originOf(t.trainer.id));
    }
  });
});

describe('verdicts', () => {
  it('are refused from a client that is no longer a member', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['honest', 4, ORIGIN(2)],
      ]),
      { verification_percent: 100 },
    );
    sim.round();
    sim.round();
    const cur = currentRound(sim.state)!;
    const judged = roundAtHeight(sim.state, cur.height - 1)!;
    const task = verificationTasks(sim.state, judged, cur).find((t) => t.verifiers.length === 2)!;
    const leaver = task.verifiers[1]!;
    const left = tick(sim.state, { type: 'leave', id: leaver }, sim.now).state;
    const r = tick(
      left,
      { type: 'verdict', id: leaver, step: judged.step, batch: task.trainer.batch, pass: false },
      sim.now,
    );
    expect(r.error?.code).toBe('NotHealthy');
  });

  it('evidence comes only with a conclusive failure, within range', () => {
    const sim = new Sim(
      members([
        ['trusted', 1, ORIGIN(1)],
        ['honest', 4, ORIGIN(2)],
      ]),
      { verification_percent: 100 },
    );
    sim.round();
    sim.round();
    const cur = currentRound(sim.state)!;
    const judged = roundAtHeight(sim.state, cur.height - 1)!;
    const task = verificationTasks(sim.state, judged, cur)[0]!;
    const base = {
      type: 'verdict',
      id: task.verifiers[0]!,
      step: judged.step,
      batch: task.trainer.batch,
    } as const;
    expect(tick(sim.state, { ...base, pass: true, evidence: [1, 1] }, sim.now).error?.code).toBe('BadEvent');
    expect(
      tick(sim.state, { ...base, pass: false, conclusive: true, evidence: [20_000, 0] }, sim.now).error?.code,
    ).toBe('BadEvent');
  });
});

describe('origin tags', () => {
  it('name the IPv4 /24 or IPv6 /64, salted, never the address', () => {
    const salt = new Uint8Array(16).fill(7);
    expect(originNetwork('203.0.113.7')).toBe('v4:203.0.113');
    expect(originNetwork('::ffff:203.0.113.200')).toBe('v4:203.0.113');
    expect(originNetwork('2001:db8:1:2:aaaa::1')).toBe('v6:2001:db8:1:2');
    expect(originNetwork('[2001:db8:1:2::9]')).toBe('v6:2001:db8:1:2');
    expect(originNetwork('2001:0db8:0001:0002:0:0:0:1')).toBe('v6:2001:db8:1:2');
    expect(originNetwork('not an address')).toBeNull();
    expect(originNetwork('300.1.1.1')).toBeNull();
    const a = originTag('203.0.113.7', salt)!;
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(originTag('203.0.113.250', salt)).toBe(a);
    expect(originTag('203.0.114.7', salt)).not.toBe(a);
    expect(originTag('203.0.113.7', new Uint8Array(16))).not.toBe(a);
    expect(originTag(undefined, salt)).toBeUndefined();
    // Loopback: processes on the relay's own machine carry no tag.
    expect(originTag('127.0.0.1', salt)).toBeUndefined();
    expect(originTag('::1', salt)).toBeUndefined();
  });

  it('travel in the join event and its wire form; a malformed one is refused', () => {
    const key = clientId(1);
    const e: CoordinatorEvent = { type: 'join', id: key, p2p_id: key, origin: '0123456789abcdef' };
    const s0 = createCoordinator({
      run_id: 'o',
      run_seed: 'ab'.repeat(32),
      config: { ...baseConfig, trusted_verifiers: [clientId(2)], verification_percent: 10 },
      now: 1,
    });
    const w = decodeWireEvent(encodeWireEvent(compactEvent(s0, e)));
    expect(expandEvent(s0, w)).toEqual(e);
    expect(tick(s0, e, 1).state.members).toEqual([{ id: key, p2p_id: key, origin: '0123456789abcdef' }]);
    expect(tick(s0, { ...e, origin: 'XYZ' }, 1).error?.code).toBe('BadEvent');
  });

  it('trusted_verifiers must be distinct keys, and need verification on', () => {
    const k = clientId(1);
    expect(
      checkCoordinatorConfig({ ...baseConfig, verification_percent: 10, trusted_verifiers: [k] }),
    ).toEqual([]);
    expect(
      checkCoordinatorConfig({ ...baseConfig, verification_percent: 10, trusted_verifiers: [k, k] }),
    ).toHaveLength(1);
    expect(
      checkCoordinatorConfig({ ...baseConfig, verification_percent: 10, trusted_verifiers: ['ab'] }),
    ).toHaveLength(1);
    expect(
      checkCoordinatorConfig({ ...baseConfig, verification_percent: 0, trusted_verifiers: [k] }),
    ).toHaveLength(1);
  });
});
