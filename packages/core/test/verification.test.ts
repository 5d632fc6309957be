// Verification of work in core: which results are sampled and who verifies them, the verdict event (one fail
// excludes a result; without anchor, CONFIRMING_STRIKES results failed by both verifiers among the last
// STRIKE_WINDOW confirm a cheat; no accuser or pair of accusers ejects at once), the exclusions every replica
// derives, the fingerprint positions and agreement, and the Verdict frame.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  acceptedCommitments,
  bytesToHex,
  conclusiveFailure,
  CONFIRMING_STRIKES,
  createCoordinator,
  currentRound,
  decodeFrame,
  decodeWireEvent,
  encodeVerdict,
  encodeWireEvent,
  excludedClients,
  speculativeCommitments,
  fingerprintAgreement,
  fingerprintOf,
  fingerprintPositions,
  FINGERPRINT_BITS,
  hexToBytes,
  replayExclusions,
  roundAdmitted,
  roundAssignments,
  roundAtHeight,
  STRIKE_WINDOW,
  tick,
  verdictEvent,
  verificationPasses,
  verificationTasks,
  VERIFIERS_PER_RESULT,
  WireError,
  type CoordinatorEvent,
  type CoordinatorState,
  type Verdict,
  type WireEvent,
} from '../src/index.ts';
import { clientId, honestWitnessEvents } from '../../../bench/lib/honest-client.ts';
import { baseConfig } from './fixtures/coordinator.ts';

class Run {
  state: CoordinatorState;
  now = 1000;
  constructor(clients: number, verification_percent: number) {
    this.state = createCoordinator({
      run_id: 'v',
      run_seed: 'cd'.repeat(32),
      config: {
        ...baseConfig,
        verification_percent,
        witness_nodes: 0,
        min_clients: 2,
        init_min_clients: clients,
        global_batch_size_start: 2 * clients,
        global_batch_size_end: 2 * clients,
      },
      now: this.now,
    });
    for (let i = 0; i < clients; i++) this.ok({ type: 'join', id: clientId(i), p2p_id: `p${i}` });
    this.now += 3;
    this.ok({ type: 'tick' });
    for (const c of this.state.epoch.clients)
      if (this.state.run_state === 'Warmup') this.ok({ type: 'warmup_witness', id: c.id });
  }
  send(e: CoordinatorEvent) {
    const r = tick(this.state, e, this.now);
    this.state = r.state;
    return r;
  }
  ok(e: CoordinatorEvent) {
    const r = this.send(e);
    expect(r.error, r.error?.message).toBeUndefined();
    return r;
  }
  /** Every honest admission and witness of the open round, then the round ends. */
  round(): void {
    for (const e of honestWitnessEvents(this.state)) this.ok(e);
    this.now += 1;
    this.ok({ type: 'tick' });
  }
}

describe('verification tasks', () => {
  it('sample about verification_percent of the results, with two distinct verifiers that are not the trainer', () => {
    let sampled = 0;
    let total = 0;
    const r = new Run(12, 25);
    for (let k = 0; k < 30; k++) {
      r.round();
      const cur = currentRound(r.state)!;
      const judged = roundAtHeight(r.state, cur.height - 1)!;
      const tasks = verificationTasks(r.state, judged, cur);
      // Every peer and the coordinator derive the same tasks: a deep copy of the state gives the same answer.
      const copy = JSON.parse(JSON.stringify(r.state)) as CoordinatorState;
      expect(verificationTasks(copy, roundAtHeight(copy, judged.height)!, currentRound(copy)!)).toEqual(
        tasks,
      );
      total += roundAssignments(r.state, judged).length;
      sampled += tasks.length;
      for (const t of tasks) {
        expect(t.verifiers).toHaveLength(VERIFIERS_PER_RESULT);
        expect(new Set(t.verifiers).size).toBe(VERIFIERS_PER_RESULT);
        expect(t.verifiers).not.toContain(t.trainer.id);
        for (const v of t.verifiers)
          expect(cur.roster.map((ci) => r.state.epoch.clients[ci]!.id)).toContain(v);
      }
    }
    expect(sampled / total).toBeGreaterThan(0.15);
    expect(sampled / total).toBeLessThan(0.35);
  });

  it('sample nothing when verification is off', () => {
    const r = new Run(6, 0);
    r.round();
    const cur = currentRound(r.state)!;
    expect(verificationTasks(r.state, roundAtHeight(r.state, cur.height - 1)!, cur)).toEqual([]);
  });
});

describe('verdicts', () => {
  /** A run at the open round h+1 with a task on round h (verification on every result). */
  function withTask() {
    const r = new Run(6, 100);
    r.round(); // round 0 done: round 1 open, round 0 results admitted... during round 1
    for (const e of honestWitnessEvents(r.state)) r.ok(e); // admits round 0 results, witnesses attest them
    const cur = currentRound(r.state)!;
    const judged = roundAtHeight(r.state, cur.height - 1)!;
    const task = verificationTasks(r.state, judged, cur)[0]!;
    const v = (id: string, pass: boolean, conclusive = false): CoordinatorEvent => ({
      type: 'verdict',
      id,
      step: judged.step,
      batch: task.trainer.batch,
      pass,
      ...(conclusive ? { conclusive } : {}),
    });
    return { r, judged, task, v };
  }

  /**
   * Rounds after `withTask`'s: each round's result of `trainer` gets one verdict per verifier from `outcomes`
   * (pass, fail, or conclusive fail), then the next round opens with the results of this one admitted.
   */
  function judgeRounds(r: Run, trainer: string, rounds: ('pass' | 'fail' | 'conclusive' | 'split')[]) {
    const confirmed: boolean[] = [];
    for (const outcome of rounds) {
      const cur = currentRound(r.state)!;
      const judged = roundAtHeight(r.state, cur.height - 1)!;
      const task = verificationTasks(r.state, judged, cur).find((t) => t.trainer.id === trainer)!;
      expect(task.verifiers).toHaveLength(VERIFIERS_PER_RESULT);
      let res;
      for (const [k, id] of task.verifiers.entries()) {
        const pass = outcome === 'pass' || (outcome === 'split' && k === 0);
        res = r.ok({
          type: 'verdict',
          id,
          step: judged.step,
          batch: task.trainer.batch,
          pass,
          ...(outcome === 'conclusive' ? { conclusive: true } : {}),
        });
      }
      confirmed.push(res!.effects.some((e) => e.type === 'CheatConfirmed'));
      if (r.state.ejected.includes(trainer)) break;
      r.now += 1;
      r.ok({ type: 'tick' });
      for (const e of honestWitnessEvents(r.state)) r.ok(e);
    }
    return confirmed;
  }

  /**
   * `withTask`'s result failed by both verifiers (conclusively or not): checks that this is one strike and no
   * ejection, then opens the next round with this one's results admitted.
   */
  function firstStrike(conclusive: boolean) {
    const { r, task, v } = withTask();
    r.ok(v(task.verifiers[0]!, false, conclusive));
    const first = r.ok(v(task.verifiers[1]!, false, conclusive));
    expect(first.effects.some((e) => e.type === 'CheatConfirmed')).toBe(false);
    expect(r.state.ejected).toEqual([]);
    expect(acceptedCommitments(r.state, 0)![task.slot]!.commitment).toBeNull();
    expect(r.state.verified?.[task.trainer.id]).toEqual([1]);
    r.now += 1;
    r.ok({ type: 'tick' });
    for (const e of honestWitnessEvents(r.state)) r.ok(e);
    return { r, task };
  }

  it('refuses verdicts from others than the task verifiers, twice from one, or for a closed round', () => {
    const { r, task, v, judged } = withTask();
    const outsider = r.state.epoch.clients.find((c) => !task.verifiers.includes(c.id))!.id;
    expect(r.send(v(outsider, false)).error?.code).toBe('NotAVerifier');
    r.ok(v(task.verifiers[0]!, true));
    expect(r.send(v(task.verifiers[0]!, false)).error?.code).toBe('DuplicateVerdict');
    expect(
      r.send({ ...(v(task.verifiers[1]!, true) as object), step: judged.step + 9 } as CoordinatorEvent).error
        ?.code,
    ).toBe('StaleRound');
  });

  it('one failing verdict keeps the result from being applied (its batch is retried) but ejects nobody', () => {
    const { r, task, v } = withTask();
    r.ok(v(task.verifiers[0]!, false));
    r.ok(v(task.verifiers[1]!, true));
    expect(r.state.ejected).toEqual([]);
    const accepted = acceptedCommitments(r.state, 0)!;
    expect(accepted[task.slot]!.commitment).toBeNull();
    expect(accepted.filter((a, i) => i !== task.slot).every((a) => a.commitment !== null)).toBe(true);
    // SparseLoCo replicas applied every admitted result of round 0 at once, the failed one included; the
    // accepted set is what they keep (docs/protocol.md "Speculative apply (SparseLoCo)").
    const speculative = speculativeCommitments(r.state, 0)!;
    expect(speculative.every((a) => a.commitment !== null)).toBe(true);
    expect(speculative.map((a) => a.client_index)).toEqual(accepted.map((a) => a.client_index));
    r.now += 20;
    r.ok({ type: 'tick' });
    r.ok({ type: 'tick' });
    expect(currentRound(r.state)!.retries).toContainEqual(task.trainer.batch);
  });

  it('two conclusive failing verdicts are one strike without anchor; the CONFIRMING_STRIKES-th ejects, excludes and replays', () => {
    // Two accusers who agree could be colluders, and nothing outranks them: the result stays out, no ejection.
    const { r, task } = firstStrike(true);
    expect(judgeRounds(r, task.trainer.id, ['conclusive', 'conclusive'])).toEqual([false, true]);
    const heightAtConfirm = currentRound(r.state)!.height;
    expect(r.state.ejected).toContain(task.trainer.id);
    expect(r.state.epoch.cheats).toEqual([
      { client_index: task.trainer.client_index, height: heightAtConfirm },
    ]);
    // The judged round and the open one are excluded; the round before them was applied already, so replicas
    // are told to replay it without the cheat.
    expect(excludedClients(r.state, heightAtConfirm - 1).has(task.trainer.client_index)).toBe(true);
    expect(replayExclusions(r.state, heightAtConfirm - 1)).toEqual(new Set([task.trainer.client_index]));
    expect(replayExclusions(r.state, heightAtConfirm)).toBeNull();
    expect(excludedClients(r.state, heightAtConfirm - 2).size).toBe(0);
    // Applied at once, a round leaves out only cheats confirmed by its own end: this trainer's result of the
    // round before the confirmation was applied (and is rebuilt out once that round settles).
    const judged = speculativeCommitments(r.state, heightAtConfirm - 1)!;
    expect(judged.find((a) => a.client_index === task.trainer.client_index)?.commitment).not.toBeNull();
  });

  it('a result failed inconclusively by both verifiers is a strike: the CONFIRMING_STRIKES-th confirms', () => {
    const { r, task } = firstStrike(false);
    // Passed results in between count in the window but are not strikes.
    const confirmed = judgeRounds(r, task.trainer.id, ['pass', 'fail', 'pass', 'fail']);
    expect(confirmed).toEqual([false, false, false, true]);
    expect(CONFIRMING_STRIKES).toBe(3);
    expect(r.state.ejected).toEqual([task.trainer.id]);
    expect(r.state.epoch.cheats?.map((c) => c.client_index)).toEqual([task.trainer.client_index]);
    // The ejected trainer's record is gone: the table holds only trainers that may still be judged.
    expect(r.state.verified && Object.hasOwn(r.state.verified, task.trainer.id)).toBe(false);
  });

  it('strikes older than the last STRIKE_WINDOW verified results are forgotten', () => {
    const { r, task, v } = withTask();
    r.ok(v(task.verifiers[0]!, false));
    r.ok(v(task.verifiers[1]!, false));
    r.now += 1;
    r.ok({ type: 'tick' });
    for (const e of honestWitnessEvents(r.state)) r.ok(e);
    const passes = Array.from({ length: STRIKE_WINDOW - 1 }, () => 'pass' as const);
    // A strike, STRIKE_WINDOW − 2 passes and a strike (the first still in the window: 2 strikes); two passes
    // push the first out, so the third strike finds only two in the window, and the fourth confirms.
    const confirmed = judgeRounds(r, task.trainer.id, [...passes.slice(1), 'fail', 'pass', 'pass', 'fail']);
    expect(confirmed.every((c) => !c)).toBe(true);
    expect(r.state.ejected).toEqual([]);
    expect(r.state.verified?.[task.trainer.id]).toHaveLength(STRIKE_WINDOW);
    expect(r.state.verified?.[task.trainer.id]!.reduce((a, b) => a + b, 0)).toBe(2);
    expect(judgeRounds(r, task.trainer.id, ['fail'])).toEqual([true]);
  });

  it('a split verdict (one verifier fails, one passes) is no strike; one conclusive fail is not enough', () => {
    const { r, task, v } = withTask();
    r.ok(v(task.verifiers[0]!, false, true));
    r.ok(v(task.verifiers[1]!, true));
    expect(r.state.verified?.[task.trainer.id]).toEqual([0]);
    r.now += 1;
    r.ok({ type: 'tick' });
    for (const e of honestWitnessEvents(r.state)) r.ok(e);
    const confirmed = judgeRounds(
      r,
      task.trainer.id,
      Array.from({ length: 2 * STRIKE_WINDOW }, () => 'split'),
    );
    expect(confirmed.every((c) => !c)).toBe(true);
    expect(r.state.ejected).toEqual([]);
    expect(r.state.verified?.[task.trainer.id]).toEqual(Array.from({ length: STRIKE_WINDOW }, () => 0));
  });

  it('every verifier must report before a result counts; the record is bounded by max_clients ids', () => {
    const { r, task, v } = withTask();
    r.ok(v(task.verifiers[0]!, false));
    expect(r.state.verified).toBeUndefined();
    r.ok(v(task.verifiers[1]!, false));
    expect(Object.keys(r.state.verified!)).toEqual([task.trainer.id]);
    // max_clients 1: judging another trainer forgets the least recently judged one.
    r.state = { ...r.state, config: { ...r.state.config, max_clients: 1 } };
    const cur = currentRound(r.state)!;
    const judged = roundAtHeight(r.state, cur.height - 1)!;
    const other = verificationTasks(r.state, judged, cur).find((t) => t.trainer.id !== task.trainer.id)!;
    for (const id of other.verifiers)
      r.ok({ type: 'verdict', id, step: judged.step, batch: other.trainer.batch, pass: true });
    expect(r.state.verified).toEqual({ [other.trainer.id]: [0] });
  });

  it('conclusive failures: a fingerprint that does not match, or an update that opposes the gradient', () => {
    expect(conclusiveFailure({ fingerprintAgreement: 0.5, updateAgreement: 0.9 })).toBe(true);
    expect(conclusiveFailure({ fingerprintAgreement: 1, updateAgreement: -1 })).toBe(true);
    expect(conclusiveFailure({ fingerprintAgreement: 1, updateAgreement: -0.5 })).toBe(true);
    // Random signs (about 0) and the lowest honest results measured (about −0.25) are not.
    expect(conclusiveFailure({ fingerprintAgreement: 1, updateAgreement: -0.25 })).toBe(false);
    expect(conclusiveFailure({ fingerprintAgreement: 0.95, updateAgreement: 0 })).toBe(false);
  });

  it('a verdict travels with its outcome: fail, pass, or conclusive fail (outcome byte 0, 1, 2)', () => {
    const base = { type: 'verdictSlot', who: { client: 3 }, slot: 2 } as const;
    for (const e of [
      { ...base, pass: true },
      { ...base, pass: false },
      { ...base, pass: false, conclusive: true },
    ] as WireEvent[]) {
      const bytes = encodeWireEvent(e);
      expect(decodeWireEvent(bytes)).toEqual(e);
    }
    const fail = encodeWireEvent({ ...base, pass: false } as WireEvent);
    const conclusive = encodeWireEvent({ ...base, pass: false, conclusive: true } as WireEvent);
    expect([fail.at(-1), conclusive.at(-1)]).toEqual([0, 2]);
    expect(() => decodeWireEvent(Uint8Array.from([...fail.slice(0, -1), 3]))).toThrow(WireError);
    expect(() => encodeWireEvent({ ...base, pass: true, conclusive: true } as WireEvent)).toThrow(WireError);
  });

  it('verdictEvent takes only the admitted commitment of the batch', () => {
    const { r, task, judged } = withTask();
    const admitted = roundAdmitted(judged)[task.slot]!;
    const verdict: Verdict = {
      runId: 'v',
      step: judged.step,
      batch: task.trainer.batch,
      commitment: hexToBytes(admitted),
      pass: false,
      fingerprintAgreement: 0.5,
      updateAgreement: 0.01,
    };
    expect(verdictEvent(r.state, task.verifiers[0]!, verdict)).toEqual({
      type: 'verdict',
      id: task.verifiers[0],
      step: judged.step,
      batch: task.trainer.batch,
      pass: false,
      conclusive: true,
      // The measurements travel as evidence, ×10 000.
      evidence: [5000, 100],
    });
    // Conclusive only when failing and the measurements say so.
    const inconclusive = { ...verdict, fingerprintAgreement: 1 };
    expect(verdictEvent(r.state, task.verifiers[0]!, inconclusive)).not.toHaveProperty('conclusive');
    const passing = { ...verdict, pass: true };
    expect(verdictEvent(r.state, task.verifiers[0]!, passing)).not.toHaveProperty('conclusive');
    const other = { ...verdict, commitment: new Uint8Array(32).fill(1) };
    expect((verdictEvent(r.state, task.verifiers[0]!, other) as { code?: string }).code).toBe('stale');
    expect(
      (verdictEvent(r.state, task.verifiers[0]!, { ...verdict, runId: 'x' }) as { code?: string }).code,
    ).toBe('wrong_run');
  });
});

describe('fingerprints', () => {
  it('positions are deterministic, in range, and differ between slots and seeds', () => {
    const a = fingerprintPositions('0102030405060708', 3, 1_081_344);
    expect(a).toHaveLength(FINGERPRINT_BITS);
    expect(fingerprintPositions('0102030405060708', 3, 1_081_344)).toEqual(a);
    expect(a.every((p) => Number.isInteger(p) && p >= 0 && p < 1_081_344)).toBe(true);
    expect(fingerprintPositions('0102030405060708', 4, 1_081_344)).not.toEqual(a);
    expect(fingerprintPositions('0102030405060709', 3, 1_081_344)).not.toEqual(a);
  });

  it('agreement is 1 for the same gradient, about ½ for an unrelated one, and counts only large entries', () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ noNaN: true, noDefaultInfinity: true, min: -10, max: 10 }), {
          minLength: 64,
          maxLength: 64,
        }),
        (g) => {
          const fp = fingerprintOf(g);
          const nonzero = g.filter((x) => x !== 0).length;
          if (nonzero === g.length) expect(fingerprintAgreement(fp, g)).toBe(1);
        },
      ),
    );
    let s = 1;
    const rand = () => ((s = (s * 48271) % 2147483647) / 2147483647) * 2 - 1;
    const g = Float32Array.from({ length: FINGERPRINT_BITS }, rand);
    const h = Float32Array.from({ length: FINGERPRINT_BITS }, rand);
    const unrelated = fingerprintAgreement(fingerprintOf(h), g);
    expect(unrelated).toBeGreaterThan(0.4);
    expect(unrelated).toBeLessThan(0.6);
    // Flipping the sign of every small entry of g changes nothing: only the largest half is compared.
    const byMagnitude = Array.from(g, (x, i) => [Math.abs(x), i] as const).sort((p, q) => p[0] - q[0]);
    const flipped = Float32Array.from(g);
    for (const [, i] of byMagnitude.slice(0, FINGERPRINT_BITS / 2)) flipped[i] = -flipped[i]!;
    expect(fingerprintAgreement(fingerprintOf(flipped), g)).toBe(1);
  });

  it('passes only when both measurements clear their thresholds', () => {
    expect(verificationPasses({ fingerprintAgreement: 1, updateAgreement: 0.9 })).toBe(true);
    expect(verificationPasses({ fingerprintAgreement: 0.8, updateAgreement: 0.9 })).toBe(false);
    expect(verificationPasses({ fingerprintAgreement: 1, updateAgreement: 0 })).toBe(false);
  });
});

describe('Verdict frame', () => {
  const v: Verdict = {
    runId: 'run',
    step: 12,
    batch: { start: 40, end: 47 },
    commitment: new Uint8Array(32).fill(3),
    pass: true,
    fingerprintAgreement: 0.984375,
    updateAgreement: -0.5,
  };
  it('round-trips and refuses out-of-range measurements', () => {
    const back = decodeFrame(encodeVerdict(v));
    expect(back).toEqual({ kind: 'verdict', message: v });
    expect(() => encodeVerdict({ ...v, fingerprintAgreement: 1.5 })).toThrow(WireError);
    const frame = encodeVerdict(v);
    // updateAgreement is the last f32: make it 2.0 (0x40000000).
    frame.set([0, 0, 0, 0x40], frame.length - 4);
    expect(() => decodeFrame(frame)).toThrow(WireError);
    expect(bytesToHex(back.kind === 'verdict' ? back.message.commitment : new Uint8Array())).toBe(
      '03'.repeat(32),
    );
  });
});
