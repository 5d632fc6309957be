import { describe, expect, it } from 'vitest';
import {
  CoordinatorError,
  MAX_STRIKES,
  acceptedCommitments,
  createCoordinator,
  currentRound,
  excludedClients,
  retryQueue,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  tick,
  type CoordinatorConfig,
  type CoordinatorEvent,
  type CoordinatorState,
  type TickResult,
} from '../src/coordinator/index.ts';
import { attestationOf } from '../src/witness/index.ts';
import { acceptedByEvidence } from '../src/coordinator/queries.ts';
import { retireClients } from '../src/coordinator/membership.ts';
import { clientId, fakeCommitment, honestWitnessEvents } from '../../../bench/lib/honest-client.ts';
import { baseConfig } from './fixtures/coordinator.ts';

const SEED = 'ab'.repeat(32);

class Driver {
  state: CoordinatorState;
  now = 1000;
  log: TickResult[] = [];
  constructor(config: Partial<CoordinatorConfig> = {}) {
    this.state = createCoordinator({
      run_id: 'test',
      run_seed: SEED,
      config: { ...baseConfig, ...config },
      now: this.now,
    });
  }
  send(event: CoordinatorEvent): TickResult {
    const r = tick(this.state, event, this.now);
    this.state = r.state;
    this.log.push(r);
    return r;
  }
  ok(event: CoordinatorEvent): TickResult {
    const r = this.send(event);
    expect(r.error, r.error?.message).toBeUndefined();
    return r;
  }
  advance(seconds: number): TickResult {
    this.now += seconds;
    return this.ok({ type: 'tick' });
  }
  join(n: number, from = 0): void {
    for (let i = from; i < from + n; i++) this.ok({ type: 'join', id: clientId(i), p2p_id: `peer-${i}` });
  }
  /** Starts an epoch with the members and finishes warmup by warmup witnesses. */
  toFirstRound(): void {
    this.advance(3);
    expect(this.state.run_state).toBe('Warmup');
    for (const c of this.state.epoch.clients) {
      if (this.state.run_state !== 'Warmup') break;
      this.ok({ type: 'warmup_witness', id: c.id });
    }
    expect(this.state.run_state).toBe('RoundTrain');
  }
  witnessAll(alive?: (id: string) => boolean): void {
    for (const e of honestWitnessEvents(this.state, alive)) this.ok(e);
  }
  /** Ends the open round whatever the witnesses did. */
  finishRound(): void {
    if (this.state.run_state === 'RoundTrain') this.advance(this.state.config.max_round_train_time);
    this.advance(1);
  }
  /** One full round with every witness honest: RoundTrain → RoundWitness → next. */
  round(): void {
    this.witnessAll();
    expect(this.state.run_state).toBe('RoundWitness');
    this.advance(1);
  }
}

describe('coordinator lifecycle', () => {
  it('runs an epoch: waiting, warmup, rounds, drain, cooldown, and the next epoch continues the data', () => {
    const d = new Driver();
    d.join(2);
    d.advance(10);
    expect(d.state.run_state).toBe('WaitingForMembers'); // init_min_clients = 3
    d.join(1, 2);
    d.toFirstRound();
    const r0 = currentRound(d.state)!;
    expect(r0).toMatchObject({
      height: 0,
      step: 1,
      data_index: 0,
      batch_size: 8,
      training: true,
      witness_count: 3,
    });
    expect(r0.roster).toEqual([0, 1, 2]);
    const heights: number[] = [];
    while (d.state.run_state === 'RoundTrain') {
      heights.push(currentRound(d.state)!.height);
      d.round();
      // epoch_time passes during the third round, so it is the last one that trains.
      if (heights.length === 2) d.now = d.state.epoch.start_timestamp + 60;
    }
    expect(d.state.run_state).toBe('Cooldown');
    const rounds = heights.map((h) => roundAtHeight(d.state, h)).filter((r) => r !== null);
    // The ring keeps the last 4 rounds: training heights 1, 2, then two drain rounds without data.
    expect(heights).toEqual([0, 1, 2, 3, 4]);
    expect(rounds.map((r) => r.training)).toEqual([true, true, false, false]);
    const drains = rounds.filter((r) => !r.training);
    expect(drains).toHaveLength(2);
    for (const r of drains) expect(r.batch_size).toBe(0);
    const lastTraining = rounds.filter((r) => r.training).at(-1)!;
    d.advance(3);
    expect(d.state.run_state).toBe('WaitingForMembers');
    expect(d.state.progress.epoch).toBe(1);
    expect(d.state.progress.epoch_start_data_index).toBe(lastTraining.data_index + lastTraining.batch_size);
    expect(d.state.progress.epoch_start_data_index).toBe(24);
    expect(d.state.progress.step).toBe(6);
    d.toFirstRound();
    expect(currentRound(d.state)!.data_index).toBe(24);
    expect(JSON.parse(JSON.stringify(d.state))).toEqual(d.state);
  });

  it('moves to RoundWitness as soon as all W witnesses submitted, else at max_round_train_time', () => {
    const d = new Driver();
    d.join(4);
    d.toFirstRound();
    d.advance(9);
    expect(d.state.run_state).toBe('RoundTrain');
    d.advance(1);
    expect(d.state.run_state).toBe('RoundWitness');
  });

  it("accepts a batch result only with a quorum of the next round's witnesses", () => {
    const d = new Driver({ witness_nodes: 3 });
    d.join(5);
    d.toFirstRound();
    d.round(); // round 0
    d.round(); // round 1 witnesses attest round 0
    const accepted = acceptedCommitments(d.state, 0, (batch, ci) => [
      fakeCommitment(1, batch.start, batch.end, d.state.epoch.clients[ci]!.id),
      fakeCommitment(1, batch.start, batch.end, 'forged'),
    ]);
    expect(accepted).not.toBeNull();
    expect(accepted!.length).toBeGreaterThan(0);
    for (const a of accepted!) {
      expect(a.commitment).toEqual(
        fakeCommitment(1, a.batch.start, a.batch.end, d.state.epoch.clients[a.client_index]!.id),
      );
      expect(a.votes).toBe(3);
    }
  });
});

describe('quorum and failures', () => {
  it('a round below quorum ends the epoch, drops silent witnesses, and rewinds data to unapplied rounds', () => {
    const d = new Driver({ witness_nodes: 3, min_clients: 2, init_min_clients: 5 });
    d.join(6);
    d.toFirstRound();
    d.round();
    d.round();
    d.round(); // rounds 0..2 done; round 3 open; round 1 applied at start of round 3
    const r3 = currentRound(d.state)!;
    const r2 = roundAtHeight(d.state, 2)!;
    const witnesses = roundSelection(r3).witnesses();
    // Only one of three witnesses speaks: quorum(3) = 2 is missed.
    const events = honestWitnessEvents(d.state).filter((e) => e.type === 'witness');
    d.ok(events[0]!);
    d.advance(10);
    d.advance(1);
    expect(d.state.run_state).toBe('Cooldown');
    const ended = d.log.at(-1)!.effects.find((e) => e.type === 'RoundEnded');
    expect(ended).toMatchObject({ quorum: 2, witnesses: 1, quorum_reached: false });
    const dropped = d.state.epoch.clients.filter((c) => c.state === 'Dropped');
    expect(dropped).toHaveLength(2);
    for (const c of dropped)
      expect(witnesses.map((i) => d.state.epoch.clients[r3.roster[i]!]!.id)).toContain(c.id);
    expect(d.state.members).toHaveLength(4);
    // Dropped after the round was judged: they count in the quorum it missed, then and later.
    expect(roundAtHeight(d.state, 3)!.departed).toBeUndefined();
    d.advance(3);
    expect(d.state.progress.epoch_start_data_index).toBe(r2.data_index);
  });

  it('witnesses that leave before submitting are neither waited for nor counted in the quorum', () => {
    /** Round 1 (W = 6) attests round 0; two of its witnesses submit, and the other four stay silent or go. */
    function run(go: 'leave' | 'stay') {
      const d = new Driver({ witness_nodes: 6, min_clients: 2, init_min_clients: 8 });
      d.join(8);
      d.toFirstRound();
      d.round();
      const r1 = currentRound(d.state)!;
      const ids = roundSelection(r1)
        .witnesses()
        .map((i) => d.state.epoch.clients[r1.roster[i]!]!.id);
      expect(ids).toHaveLength(6);
      const [a, b, c, e, f, g] = ids as [string, string, string, string, string, string];
      // Every result delivered and seen; only a and b submit.
      for (const ev of honestWitnessEvents(
        d.state,
        (id) => id === a || id === b,
        () => true,
        () => true,
      ))
        d.ok(ev);
      expect(d.state.run_state).toBe('RoundTrain');
      if (go === 'leave') {
        d.ok({ type: 'leave', id: c });
        d.ok({ type: 'eject', id: e, reason: 'test' });
        d.ok({ type: 'leave', id: a }); // it submitted: it still counts
        d.ok({ type: 'eject', id: f, reason: 'test' });
        expect(d.state.run_state).toBe('RoundTrain');
        d.ok({ type: 'leave', id: g });
        expect(currentRound(d.state)!.departed).toHaveLength(4);
      }
      // The next timer tick, long before max_round_train_time (10 s), ends the train phase only when the
      // silent witnesses are gone.
      d.advance(1);
      expect(d.state.run_state).toBe(go === 'leave' ? 'RoundWitness' : 'RoundTrain');
      d.finishRound();
      const ended = d.log.at(-1)!.effects.find((x) => x.type === 'RoundEnded');
      return { d, ended, r1 };
    }
    const stay = run('stay');
    expect(stay.ended).toMatchObject({ witnesses: 2, quorum: 4, quorum_reached: false });
    expect(stay.d.state.run_state).toBe('Cooldown');
    expect(acceptedCommitments(stay.d.state, 0)!.filter((x) => x.commitment !== null)).toHaveLength(0);

    const left = run('leave');
    expect(left.ended).toMatchObject({ witnesses: 2, quorum: 2, quorum_reached: true });
    expect(left.d.state.run_state).toBe('RoundTrain');
    const accepted = acceptedCommitments(left.d.state, 0)!;
    expect(accepted.length).toBeGreaterThan(0);
    // Two witness votes and the host's reach quorum(2).
    for (const x of accepted) {
      expect(x.votes).toBe(2);
      expect(x.commitment).not.toBeNull();
    }
    // What round 1 decided stays decided: a witness of it that leaves now changes nothing recorded on it.
    const r1 = roundAtHeight(left.d.state, 1)!;
    const departed = r1.departed;
    const later = left.r1.roster
      .map((ci) => left.d.state.epoch.clients[ci]!)
      .find((cl) => cl.state === 'Healthy')!;
    left.d.ok({ type: 'leave', id: later.id });
    expect(roundAtHeight(left.d.state, 1)!.departed).toEqual(departed);
    expect(acceptedByEvidence(left.d.state, 0)!.map((x) => x.commitment !== null)).toEqual(
      accepted.map((x) => x.commitment !== null),
    );
  });

  it('records departed witnesses in one order whatever order they leave in', () => {
    // The host drops accused witnesses in accusation order; a light replica retires them in its own.
    const d = new Driver({ witness_nodes: 4 });
    d.join(6);
    d.toFirstRound();
    const round = currentRound(d.state)!;
    const witnesses = roundSelection(round).witnesses();
    const [lo, hi] = [round.roster[witnesses[0]!]!, round.roster[witnesses[2]!]!];
    const a = currentRound(retireClients(d.state, [hi, lo], 'Dropped'))!.departed;
    const b = currentRound(retireClients(d.state, [lo, hi], 'Dropped'))!.departed;
    expect(a).toHaveLength(2);
    expect(a).toEqual(b);
    expect(JSON.stringify(retireClients(d.state, [hi, lo], 'Dropped'))).toBe(
      JSON.stringify(retireClients(retireClients(d.state, [lo], 'Dropped'), [hi], 'Dropped')),
    );
  });

  it('refuses invalid witnesses with typed errors and ejects repeat liars', () => {
    const d = new Driver({ witness_nodes: 2 });
    d.join(6);
    d.toFirstRound();
    const round = currentRound(d.state)!;
    const sel = roundSelection(round);
    const before = d.state;
    const honest = honestWitnessEvents(d.state)[0]! as Extract<CoordinatorEvent, { type: 'witness' }>;
    expect(d.send({ ...honest, step: round.step + 5 }).error?.code).toBe('StaleRound');
    expect(d.state).toBe(before);
    expect(d.send({ ...honest, id: clientId(99) }).error?.code).toBe('UnknownClient');
    const nonWitness = [...Array(round.roster.length).keys()].find((i) => !sel.isWitness(i))!;
    const liarId = d.state.epoch.clients[round.roster[nonWitness]!]!.id;
    const forged = { ...honest, id: liarId, proof: { ...sel.witnessProof(nonWitness), witness: true } };
    for (let k = 1; k <= MAX_STRIKES; k++) {
      const r = d.send(forged);
      expect(r.error).toBeInstanceOf(CoordinatorError);
      expect(r.error?.code).toBe(k < MAX_STRIKES ? 'BadProof' : 'BadProof');
    }
    expect(d.state.epoch.clients.find((c) => c.id === liarId)?.state).toBe('Ejected');
    expect(d.state.ejected).toContain(liarId);
    expect(d.send({ type: 'join', id: liarId, p2p_id: 'again' }).error?.code).toBe('Ejected');
    d.ok(honest);
    expect(d.send(honest).error?.code).toBe('DuplicateWitness');
    // Round 0 has no round before it: its attestations are empty, and anything else is malformed.
    const next = honestWitnessEvents(d.state)[0]! as Extract<CoordinatorEvent, { type: 'witness' }>;
    expect(next.attested).toHaveLength(0);
    const bad = d.send({ ...next, attested: new Uint8Array(1 << 14) });
    expect(bad.error?.code).toBe('BadAttestation');
    expect(d.state.strikes[next.id]).toBe(1);
  });

  it('checks an attestation against the attested round: exactly one bit per result slot, no bits past the end', () => {
    const d = new Driver({ witness_nodes: 3, global_batch_size_start: 6, global_batch_size_end: 6 });
    d.join(6);
    d.toFirstRound();
    d.round();
    const slots = roundAssignments(d.state, roundAtHeight(d.state, 0)!).length;
    expect(slots).toBe(6);
    const w = honestWitnessEvents(d.state)[0]! as Extract<CoordinatorEvent, { type: 'witness' }>;
    expect([...w.attested]).toEqual([0b111111]);
    const refused = (attested: unknown) =>
      d.send({ ...w, attested: attested as Uint8Array }).error?.code ?? 'accepted';
    expect(refused([0b111111])).toBe('BadAttestation'); // not bytes
    expect(refused(new Uint8Array(2))).toBe('BadAttestation');
    expect(refused(Uint8Array.of(0b1000000))).toBe('BadAttestation'); // slot 6 does not exist
    // Malformed attestations are strikes: the third ejects.
    expect(d.state.epoch.clients.find((c) => c.id === w.id)?.state).toBe('Ejected');
    const other = honestWitnessEvents(d.state).find((e) => e.type === 'witness' && e.id !== w.id)!;
    d.ok(other);
    expect(currentRound(d.state)!.witnesses.at(-1)!.attested).toBe('Pw==');
  });

  it('a witness minority claiming every slot keeps no undelivered trainer alive and gets nothing accepted for it', () => {
    /** Round 0's dead trainer reached neither the host nor any honest witness; `liars` of round 1 claim it. */
    function run(liars: number) {
      const d = new Driver({ witness_nodes: 3, global_batch_size_start: 6, global_batch_size_end: 6 });
      d.join(6);
      d.toFirstRound();
      const deadId = clientId(5);
      const alive = (id: string) => id !== deadId;
      for (const e of honestWitnessEvents(
        d.state,
        () => true,
        () => true,
        alive,
      ))
        d.ok(e);
      d.advance(1);
      const slots = roundAssignments(d.state, roundAtHeight(d.state, 0)!).length;
      let lied = 0;
      for (const e of honestWitnessEvents(d.state, alive)) {
        if (e.type === 'witness' && lied < liars) {
          lied++;
          d.ok({ ...e, attested: attestationOf(slots, () => true) });
        } else d.ok(e);
      }
      d.finishRound();
      const cur = currentRound(d.state)!;
      const judged = roundAtHeight(d.state, 0)!;
      const deadSlot = acceptedCommitments(d.state, 0)!.find(
        (a) => d.state.epoch.clients[a.client_index]!.id === deadId,
      )!;
      const witnesses = roundSelection(cur)
        .witnesses()
        .map((i) => d.state.epoch.clients[cur.roster[i]!]!.id)
        .filter(alive);
      const proof = roundSelection(judged).committeeProof(
        judged.roster.indexOf(d.state.epoch.clients.findIndex((c) => c.id === deadId)),
      );
      const accuse = (id: string) => d.send({ type: 'health_check', id, checks: [{ id: deadId, proof }] });
      return { d, deadId, deadSlot, witnesses, accuse };
    }
    // One liar of three (quorum 2): the slot has no admitted result, so nothing is accepted for it, and the
    // honest witnesses still drop the trainer.
    const minority = run(1);
    expect(minority.deadSlot.commitment).toBeNull();
    expect(minority.accuse(minority.witnesses[0]!).error).toBeUndefined();
    expect(minority.accuse(minority.witnesses[1]!).error).toBeUndefined();
    expect(minority.d.state.epoch.clients.find((c) => c.id === minority.deadId)?.state).toBe('Dropped');
    // A quorum of witnesses claiming the trainer's result is what "seen alive" means.
    const quorumOfLiars = run(2);
    expect(quorumOfLiars.deadSlot.commitment).toBeNull();
    expect(quorumOfLiars.accuse(quorumOfLiars.witnesses[0]!).error?.code).toBe('ClientIsHealthy');
  });

  it('drops a client only when a quorum of witnesses accuse it, and never one whose result the host admitted', () => {
    const d = new Driver({ witness_nodes: 3, global_batch_size_start: 6, global_batch_size_end: 6 });
    d.join(6);
    d.toFirstRound();
    const deadId = clientId(5);
    const alive = (id: string) => id !== deadId;
    // Round 0: the dead client's result never reaches the host (nor, in round 1, any witness).
    for (const e of honestWitnessEvents(
      d.state,
      () => true,
      () => true,
      alive,
    ))
      d.ok(e);
    d.advance(1);
    d.witnessAll(alive);
    d.finishRound();
    const cur = currentRound(d.state)!;
    expect(cur.height).toBe(2);
    const judged = roundAtHeight(d.state, 0)!;
    const sel = roundSelection(judged);
    const witnesses = roundSelection(cur)
      .witnesses()
      .map((i) => d.state.epoch.clients[cur.roster[i]!]!.id)
      .filter((id) => id !== deadId);
    const nonWitness = cur.roster
      .map((ci) => d.state.epoch.clients[ci]!.id)
      .find((id) => !witnesses.includes(id) && id !== deadId)!;
    const idx = (id: string) => judged.roster.indexOf(d.state.epoch.clients.findIndex((c) => c.id === id));
    const check = (id: string) => [{ id, proof: sel.committeeProof(idx(id)) }];
    const healthy = d.state.epoch.clients.find((c) => c.id !== deadId)!.id;
    expect(d.send({ type: 'health_check', id: witnesses[0]!, checks: check(healthy) }).error?.code).toBe(
      'ClientIsHealthy',
    );
    expect(d.send({ type: 'health_check', id: nonWitness, checks: check(deadId) }).error?.code).toBe(
      'NotAWitness',
    );
    // quorum(3) = 2: the first accusation is recorded, the second drops the client.
    const first = d.ok({ type: 'health_check', id: witnesses[0]!, checks: check(deadId) });
    expect(first.effects).toEqual([]);
    expect(d.state.epoch.clients.find((c) => c.id === deadId)?.state).toBe('Healthy');
    d.ok({ type: 'health_check', id: witnesses[0]!, checks: check(deadId) }); // the same accuser again
    expect(d.state.epoch.clients.find((c) => c.id === deadId)?.state).toBe('Healthy');
    const r = d.ok({ type: 'health_check', id: witnesses[1]!, checks: check(deadId) });
    expect(r.effects).toContainEqual(expect.objectContaining({ type: 'ClientDropped', id: deadId }));
    expect(d.state.epoch.clients.find((c) => c.id === deadId)?.state).toBe('Dropped');
    d.witnessAll(alive);
    d.finishRound();
    expect(currentRound(d.state)!.roster).toHaveLength(5);
  });

  it('witnesses that leave an admitted result out of their attestations: a minority cannot veto it, nobody can drop its trainer', () => {
    /** Rounds 0 and 1 with every round-0 result admitted; `liars` of round 1's witnesses omit the victim. */
    function run(liars: number) {
      const d = new Driver({ witness_nodes: 3, global_batch_size_start: 6, global_batch_size_end: 6 });
      d.join(6);
      d.toFirstRound();
      const victim = clientId(4);
      d.round();
      let lied = 0;
      for (const e of honestWitnessEvents(d.state)) {
        if (e.type === 'witness' && lied < liars) {
          lied++;
          const omit = honestWitnessEvents(
            d.state,
            () => true,
            (id) => id !== victim,
          );
          d.ok(omit.find((w) => w.type === 'witness' && w.id === e.id)!);
        } else d.ok(e);
      }
      d.finishRound();
      const slot = acceptedCommitments(d.state, 0)!.find(
        (a) => d.state.epoch.clients[a.client_index]!.id === victim,
      )!;
      return { d, victim, slot };
    }
    // quorum(3) = 2: the host's admission is one vote, one honest witness is the other.
    const minority = run(1);
    expect(minority.slot.votes).toBe(2);
    expect(minority.slot.commitment).not.toBeNull();
    // Every witness lying vetoes the result: it is retried, not lost...
    const { d, victim, slot } = run(3);
    expect(slot.votes).toBe(0);
    expect(slot.commitment).toBeNull();
    const cur = currentRound(d.state)!;
    expect(cur.retries).toContainEqual(slot.batch);
    // ...and still nobody can get the victim dropped: the host holds its result.
    const judged = roundAtHeight(d.state, 0)!;
    const accuser = d.state.epoch.clients[cur.roster[roundSelection(cur).witnesses()[0]!]!]!.id;
    const proof = roundSelection(judged).committeeProof(
      judged.roster.indexOf(d.state.epoch.clients.findIndex((c) => c.id === victim)),
    );
    expect(d.send({ type: 'health_check', id: accuser, checks: [{ id: victim, proof }] }).error?.code).toBe(
      'ClientIsHealthy',
    );
  });
});

describe('admitted results', () => {
  function started() {
    const d = new Driver({ witness_nodes: 3 });
    d.join(4);
    d.toFirstRound();
    const r0 = currentRound(d.state)!;
    const a = roundAssignments(d.state, r0)[0]!;
    const hex = (n: number) => n.toString(16).padStart(2, '0').repeat(32);
    const admit = (commitment: string, step = r0.step) => ({
      type: 'result_admitted' as const,
      id: a.id,
      step,
      batch: a.batch,
      commitment,
    });
    return { d, r0, a, hex, admit };
  }

  it('records one commitment per assignment; a second, different one ejects the sender', () => {
    const { d, r0, a, hex, admit } = started();
    const r = d.ok(admit(hex(1)));
    expect(r.effects).toContainEqual(expect.objectContaining({ type: 'ResultAdmitted', id: a.id }));
    expect(d.send(admit(hex(1))).error?.code).toBe('DuplicateResult');
    const eq = d.send(admit(hex(2)));
    expect(eq.error?.code).toBe('Equivocation');
    expect(eq.effects).toContainEqual(expect.objectContaining({ type: 'ClientEjected', id: a.id }));
    expect(d.state.ejected).toContain(a.id);
    // A confirmed cheat: points zeroed by the host, its results of the epoch excluded (the first one too).
    expect(eq.effects).toContainEqual({ type: 'CheatConfirmed', id: a.id, step: r0.step });
    const index = d.state.epoch.clients.findIndex((c) => c.id === a.id);
    const height = currentRound(d.state)!.height;
    expect(height).toBe(r0.height);
    expect(excludedClients(d.state, height).has(index)).toBe(true);
  });

  it('refuses results for closed rounds, other batches and unknown senders', () => {
    const { d, r0, a, hex, admit } = started();
    expect(
      d.send({ ...admit(hex(1)), id: clientId(3) === a.id ? clientId(2) : clientId(3) }).error?.code,
    ).toBe('NotAssignee');
    expect(
      d.send({ ...admit(hex(1)), batch: { start: a.batch.start, end: a.batch.end + 1 } }).error?.code,
    ).toBe('NotAssignee');
    expect(d.send(admit('xyz')).error?.code).toBe('BadEvent');
    d.round();
    d.round(); // round 2 is open: round 0 takes no more results
    expect(currentRound(d.state)!.height).toBe(2);
    expect(d.send(admit(hex(9), r0.step)).error?.code).toBe('RoundClosed');
  });
});

describe('batch retries', () => {
  /** Six clients; client 5 trains round 0, then dies before any witness fetches its result, and leaves. */
  function deadTrainer() {
    const d = new Driver({ witness_nodes: 3, global_batch_size_start: 6, global_batch_size_end: 6 });
    d.join(6);
    d.toFirstRound();
    const deadId = clientId(5);
    const alive = (id: string) => id !== deadId;
    const r0 = currentRound(d.state)!;
    const lost = roundAssignments(d.state, r0).find((a) => a.id === deadId)!.batch;
    d.round(); // round 0: everyone trains
    d.ok({ type: 'leave', id: deadId }); // the relay notices the disconnect during round 1
    d.witnessAll(alive); // round 1's witnesses never got the dead client's round-0 result
    d.finishRound();
    return { d, deadId, alive, r0, lost };
  }

  it('retries a batch no witness attested, whole, by another trainer in the next round', () => {
    const { d, deadId, alive, r0, lost } = deadTrainer();
    const r2 = currentRound(d.state)!;
    expect(r2.height).toBe(2);
    expect(r2.retries).toEqual([lost]);
    const assigned = roundAssignments(d.state, r2);
    const retry = assigned.find((a) => a.batch.start === lost.start && a.batch.end === lost.end);
    expect(retry).toBeDefined();
    expect(retry!.id).not.toBe(deadId);
    // The other trainers split the fresh samples as before; nobody has two intervals.
    expect(new Set(assigned.map((a) => a.id)).size).toBe(assigned.length);
    const fresh = assigned.filter((a) => a !== retry).map((a) => a.batch);
    expect(fresh.reduce((n, b) => n + b.end - b.start + 1, 0)).toBe(r2.batch_size);
    expect(Math.min(...fresh.map((b) => b.start))).toBe(r2.data_index);
    // Only the unattested batch was queued: every attested batch of round 0 is applied, not retried.
    expect(retryQueue(d.state)).toEqual([]);
    const accepted0 = acceptedCommitments(d.state, 0, (batch, ci) => [
      fakeCommitment(r0.step, batch.start, batch.end, d.state.epoch.clients[ci]!.id),
    ])!;
    for (const a of accepted0)
      expect(a.commitment === null, `${a.batch.start}`).toBe(a.batch.start === lost.start);
    // The retry is trained, attested by round 3's witnesses and applied; nothing is queued again.
    d.witnessAll(alive);
    d.finishRound();
    d.witnessAll(alive);
    d.finishRound();
    expect(currentRound(d.state)!.height).toBe(4);
    expect(currentRound(d.state)!.retries).toEqual([]);
    expect(retryQueue(d.state)).toEqual([]);
    const accepted2 = acceptedCommitments(d.state, 2, (batch, ci) => [
      fakeCommitment(r2.step, batch.start, batch.end, d.state.epoch.clients[ci]!.id),
    ])!;
    expect(accepted2.find((a) => a.batch.start === lost.start)?.commitment).not.toBeNull();
    expect(accepted2.every((a) => a.commitment !== null)).toBe(true);
  });

  it('puts retries of the unapplied last rounds back on the queue at epoch end, and keeps them across epochs', () => {
    const { d, alive, lost } = deadTrainer();
    // Round 2 (which took the retry) is the epoch's last: a pause ends the epoch after it.
    d.ok({ type: 'pause' });
    d.witnessAll(alive);
    d.finishRound();
    expect(d.state.run_state).toBe('Cooldown');
    expect(retryQueue(d.state)).toEqual([]);
    d.advance(3);
    expect(d.state.run_state).toBe('Paused');
    // Rounds 1 and 2 are rewound (fresh data) and requeued (retries): nothing lost, nothing twice.
    expect(d.state.progress.epoch_start_data_index).toBe(roundAtHeight(d.state, 1)!.data_index);
    expect(retryQueue(d.state)).toEqual([lost]);
    d.ok({ type: 'resume' });
    d.toFirstRound();
    expect(currentRound(d.state)!.retries).toEqual([lost]);
    expect(retryQueue(d.state)).toEqual([]);
  });

  it('loads states stored before retries existed', () => {
    const d = new Driver();
    d.join(3);
    d.toFirstRound();
    d.round();
    const old = JSON.parse(JSON.stringify(d.state)) as CoordinatorState;
    delete old.progress.retry_batches;
    for (const r of old.epoch.rounds) delete r.retries;
    d.state = old;
    expect(roundAssignments(d.state, currentRound(d.state)!).length).toBe(3);
    d.round();
    d.round();
    expect(retryQueue(d.state)).toEqual([]);
    expect(currentRound(d.state)!.retries).toEqual([]);
  });
});

describe('pause, resume, config', () => {
  it('pauses after the round when active, immediately otherwise; config changes only while paused', () => {
    const d = new Driver();
    d.join(3);
    d.toFirstRound();
    expect(d.send({ type: 'update_config', config: baseConfig }).error?.code).toBe('WrongPhase');
    d.ok({ type: 'pause' });
    expect(d.state.pending_pause).toBe(true);
    expect(d.state.run_state).toBe('RoundTrain');
    d.round();
    expect(d.state.run_state).toBe('Cooldown');
    d.advance(3);
    expect(d.state.run_state).toBe('Paused');
    expect(d.state.epoch.cold_start_epoch).toBe(true);
    expect(d.send({ type: 'update_config', config: { ...baseConfig, min_clients: 0 } }).error?.code).toBe(
      'InvalidConfig',
    );
    d.ok({ type: 'update_config', config: { ...baseConfig, witness_nodes: 2 } });
    expect(d.state.config.witness_nodes).toBe(2);
    d.ok({ type: 'resume' });
    expect(d.state.run_state).toBe('WaitingForMembers');
    expect(d.send({ type: 'resume' }).error?.code).toBe('WrongPhase');
    d.ok({ type: 'pause' });
    expect(d.state.run_state).toBe('Paused');
  });

  it('starts uninitialized or paused when asked', () => {
    const s = createCoordinator({
      run_id: 'x',
      run_seed: SEED,
      config: baseConfig,
      now: 1,
      start: 'uninitialized',
    });
    expect(s.run_state).toBe('Uninitialized');
    const r = tick(s, { type: 'update_config', config: baseConfig }, 2);
    expect(r.state.run_state).toBe('Paused');
    expect(() =>
      createCoordinator({ run_id: 'x', run_seed: SEED, config: { ...baseConfig, warmup_time: 100 }, now: 1 }),
    ).toThrow(/warmup_time/);
  });

  it('derives round seeds from run seed, epoch, step and entropy only', () => {
    const a = new Driver();
    const b = new Driver();
    for (const d of [a, b]) {
      d.join(3);
      d.ok({ type: 'entropy', entropy: 'cafe' });
      d.toFirstRound();
    }
    expect(currentRound(a.state)!.random_seed).toBe(currentRound(b.state)!.random_seed);
    expect(a.send({ type: 'entropy', entropy: 'xyz' }).error?.code).toBe('BadEvent');
  });

  it('never throws on garbage events', () => {
    const d = new Driver();
    const junk: unknown[] = [
      null,
      {},
      { type: 'nope' },
      { type: 'join', id: 5 },
      { type: 'witness' },
      { type: 'health_check', id: clientId(0), checks: 'x' },
    ];
    for (const e of junk)
      expect(tick(d.state, e as CoordinatorEvent, d.now).error).toBeInstanceOf(CoordinatorError);
    expect(tick(d.state, { type: 'tick' }, Number.NaN).error?.code).toBe('BadEvent');
  });
});
