// Light replicas reach the host's summary. A host drives a coordinator through random runs with every kind of
// event (fixtures/random-run.ts); for each event it applied, lightEventsFor gives the light events, and a light
// replica that started from the summary of a snapshot at a random point applies them with lightTick. After
// every transition the replica's state must print exactly the JSON of the host's state summarised (so the two
// share a hash), and the recorded round outcomes must agree with the evidence they were judged from.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  acceptedCommitments,
  admittedListAddress,
  admittedListOf,
  heldAdmittedLists,
  checkAdmittedList,
  hydrateState,
  missingAdmittedLists,
  roundAssignments,
  decodeAdmittedList,
  encodeAdmittedList,
  applyLightDelta,
  decodeLightDelta,
  encodeLightDelta,
  lightStateHash,
  lightTransitionOf,
  WireError,
  admittedSlots,
  currentRound,
  hexToBytes,
  bytesToHex,
  sha256,
  lightEventsFor,
  lightTick,
  roundAdmitted,
  roundAtHeight,
  roundListAddress,
  listAddresses,
  stateHash,
  summarizeState,
  tick,
} from '../src/index.ts';
import type {
  CoordinatorEvent,
  CoordinatorState,
  LightEvent,
  LightOutcome,
  LightTransition,
  Round,
} from '../src/index.ts';
import { acceptedByEvidence } from '../src/coordinator/queries.ts';
import { acceptedSlots, aliveFromEvidence, aliveSlots } from '../src/coordinator/round-outcome.ts';
import { tickIn } from '../src/coordinator/tick.ts';
import { actionArb, drive, type Host } from './fixtures/random-run.ts';

/** Applies one host event to `full` and its light events to `light`; returns both new states. */
function step(
  full: CoordinatorState,
  light: CoordinatorState,
  event: CoordinatorEvent,
  now: number,
  seen: Set<string>,
): { full: CoordinatorState; light: CoordinatorState } {
  const r = tick(full, event, now);
  let l = light;
  for (const e of lightEventsFor(full, event, r)) {
    seen.add(e.type === 'tick' && e.outcome ? 'tick+outcome' : e.type);
    const out = lightTick(l, e, now);
    expect(out.error, `${e.type} refused: ${out.error?.message}`).toBeUndefined();
    l = out.state;
  }
  return { full: r.state, light: l };
}

function followFrom(host: Host, k: number, seen: Set<string>): void {
  let light = JSON.parse(JSON.stringify(summarizeState(host.history[k]!))) as CoordinatorState;
  for (let i = k; i < host.applied.length; i++) {
    const t = host.applied[i]!;
    let full = host.history[i]!;
    if (t.entropy !== undefined)
      ({ full, light } = step(full, light, { type: 'entropy', entropy: t.entropy }, t.now, seen));
    ({ full, light } = step(full, light, t.event, t.now, seen));
    expect(JSON.stringify(full)).toBe(JSON.stringify(host.history[i + 1]));
    const want = summarizeState(full);
    if (full.epoch.rounds.some((r) => r?.departed !== undefined)) seen.add('departed witnesses');
    expect(JSON.stringify(light)).toBe(JSON.stringify(want));
    expect(stateHash(light)).toEqual(stateHash(want));
  }
}

/** The recorded outcomes of every round the ring holds agree with the evidence still in the host's state. */
function checkOutcomes(s: CoordinatorState): number {
  let checked = 0;
  for (const round of s.epoch.rounds) {
    if (!round) continue;
    const admitted = admittedSlots(s, round.height);
    if (admitted) {
      const record = roundAdmitted(round);
      expect(admitted).toEqual(admitted.map((_, i) => (record[i] ?? null) !== null));
      const entries = admitted.flatMap((a, i) =>
        a ? [{ slot: i, commitment: hexToBytes(record[i]!) }] : [],
      );
      // The coordinator records no address; replicas derive it from the commitments, and a summary carries it.
      expect(round.admitted_list).toBeUndefined();
      const address = admittedListAddress({ runId: s.run_id, step: round.step, entries });
      expect(roundListAddress(s.run_id, round)).toBe(address);
      expect(roundAtHeight(summarizeState(s), round.height)!.admitted_list).toBe(address);
      checked++;
    }
    const accepted = acceptedSlots(s, round.height);
    if (accepted) {
      const fromEvidence = acceptedByEvidence(s, round.height);
      // What peers apply reads the recorded outcome once there is one.
      expect(acceptedCommitments(s, round.height)!.map((a) => a.commitment !== null)).toEqual(accepted);
      // Attestations are pruned from older rounds; where they are still held the two must agree.
      const attesting = roundAtHeight(s, round.height + 1);
      if (fromEvidence && attesting?.witnesses.every((w) => w.attested !== null)) {
        expect(accepted).toEqual(fromEvidence.map((a) => a.commitment !== null));
        const alive = aliveSlots(s, round.height)!;
        expect(alive).toEqual(aliveFromEvidence(s, round, attesting));
        // Whatever is applied got through.
        accepted.forEach((a, i) => expect(!a || alive[i]).toBe(true));
      }
      checked++;
    }
  }
  return checked;
}

describe('light replicas', () => {
  it('reach the summary of the host state after every transition, from any starting point', () => {
    const seen = new Set<string>();
    let outcomes = 0;
    fc.assert(
      fc.property(
        fc.array(actionArb, { minLength: 60, maxLength: 300, size: 'max' }),
        fc.integer({ min: 0, max: 2e9 }),
        fc.nat(),
        (actions, t0, startPick) => {
          const host = drive(actions, t0);
          if (host.applied.length === 0) return;
          followFrom(host, startPick % host.applied.length, seen);
          for (const s of host.history) outcomes += checkOutcomes(s);
        },
      ),
      { numRuns: 100 },
    );
    for (const kind of [
      'tick',
      'tick+outcome',
      'witness_seen',
      'round_filled',
      'retire',
      'join',
      'leave',
      'eject',
      'entropy',
      'departed witnesses',
    ])
      expect(seen, `no ${kind} light event in any run`).toContain(kind);
    expect(outcomes).toBeGreaterThan(100);
  });

  it('a light replica takes no evidence and ends no round without the host outcome', () => {
    const { state: s, now } = roundEnd();
    const light = summarizeState(s);
    expect(light).not.toBe(s);
    // Without the outcome the light replica cannot judge the round: refused, state unchanged.
    const blind = lightTick(light, { type: 'tick' }, now);
    expect(blind.error?.code).toBe('MissingOutcome');
    expect(blind.state).toBe(light);
    // With it, the light replica ends the round exactly as the host did.
    const host = tick(s, { type: 'tick' }, now);
    const [ev] = lightEventsFor(s, { type: 'tick' }, host);
    const ended = lightTick(light, ev!, now);
    expect(ended.error).toBeUndefined();
    expect(JSON.stringify(ended.state)).toBe(JSON.stringify(summarizeState(host.state)));
    // A misshapen outcome is refused: bits for more slots than the round has, an address that is not 32 bytes.
    const good = (ev as { outcome: LightOutcome }).outcome;
    const long = Buffer.concat([Buffer.from(good.admitted_bits, 'base64'), Buffer.from([1])]).toString(
      'base64',
    );
    for (const bad of [
      { ...good, admitted_bits: long },
      { ...good, accepted_bits: long },
      { ...good, alive_bits: null },
      { ...good, admitted_list: 'ab' },
      { ...good, admitted_list: 'AB'.repeat(32) },
    ])
      expect(lightTick(light, { type: 'tick', outcome: bad }, now).error?.code).toBe('BadEvent');
    // An outcome for another round is refused.
    const other = { ...(ev as { outcome: LightOutcome }).outcome };
    other.height += 1;
    expect(lightTick(light, { type: 'tick', outcome: other }, now).error?.code).toBe('MissingOutcome');
    // Evidence events are the host's and full replicas' only.
    const witness = { type: 'witness', id: s.epoch.clients[0]!.id } as unknown as LightEvent;
    expect(lightTick(light, witness, now).error?.code).toBe('BadEvent');
    // A witness_seen for another step, or an index past the roster, is refused.
    const round = currentRound(s)!;
    expect(lightTick(light, { type: 'witness_seen', step: round.step + 1, index: 0 }, now).error?.code).toBe(
      'StaleRound',
    );
    expect(
      lightTick(light, { type: 'witness_seen', step: round.step, index: round.roster.length }, now).error
        ?.code,
    ).toBe('NotAWitness');
    // A retire that names a client the epoch does not have is refused.
    const bad: LightEvent = { type: 'retire', cheats: [], dropped: [s.epoch.clients.length], ejected: [] };
    expect(lightTick(light, bad, now).error?.code).toBe('BadEvent');
  });

  it('a full replica handed the host outcome checks it against its own judgement', () => {
    const { state: s, now } = roundEnd();
    const own = tick(s, { type: 'tick' }, now);
    const [ev] = lightEventsFor(s, { type: 'tick' }, own);
    const outcome = (ev as { outcome: LightOutcome }).outcome;
    expect(outcome.accepted_bits).not.toBeNull();
    const audited = tickIn(s, { type: 'tick' }, now, { outcome });
    expect(audited.error).toBeUndefined();
    expect(JSON.stringify(audited.state)).toBe(JSON.stringify(own.state));
    // Claim the first admitted slot was not admitted: the evidence says otherwise.
    const bits = Buffer.from(outcome.admitted_bits, 'base64');
    bits[0] = bits[0]! ^ 1;
    const forged = { ...outcome, admitted_bits: bits.toString('base64') };
    const refused = tickIn(s, { type: 'tick' }, now, { outcome: forged });
    expect(refused.error?.code).toBe('OutcomeMismatch');
    expect(refused.state).toBe(s);
    // A light replica handed another list address takes it, and its state no longer hashes to the host's
    // summary: the follower's hash check sends it back to a snapshot.
    const light = summarizeState(s);
    const forgedList = lightTick(
      light,
      { type: 'tick', outcome: { ...outcome, admitted_list: '11'.repeat(32) } },
      now,
    );
    expect(forgedList.error).toBeUndefined();
    expect(stateHash(forgedList.state)).not.toEqual(stateHash(summarizeState(own.state)));
    expect(stateHash(lightTick(light, ev!, now).state)).toEqual(stateHash(summarizeState(own.state)));
  });
});

/**
 * A host state in RoundWitness whose round has admitted results and a round before it in the ring, and the
 * time at which a tick ends it: found in deterministic random runs.
 */
function roundEnd(): { state: CoordinatorState; now: number } {
  for (const actions of fc.sample(fc.array(actionArb, { minLength: 200, maxLength: 300 }), {
    seed: 7,
    numRuns: 200,
  })) {
    const host = drive(actions, 1_000_000);
    for (const s of host.history) {
      const round = currentRound(s);
      if (s.run_state !== 'RoundWitness' || !round || !roundAtHeight(s, round.height - 1)) continue;
      if (!roundAdmitted(round).some((c) => c !== null)) continue;
      const now = s.run_state_start + s.config.round_witness_time + 1;
      if (tick(s, { type: 'tick' }, now).effects.some((e) => e.type === 'RoundEnded'))
        return { state: s, now };
    }
  }
  throw new Error('no random run reached a round end with admitted results');
}

describe('LightDelta frames', () => {
  /** The host's light log of a run: one entry per transition that changes the summary. */
  function lightLog(host: Host): LightTransition[] {
    const out: LightTransition[] = [];
    host.applied.forEach((t, i) => {
      const prev = host.history[i]!;
      let base = prev;
      if (t.entropy !== undefined) base = tick(prev, { type: 'entropy', entropy: t.entropy }, t.now).state;
      const r = tick(base, t.event, t.now);
      const lt = lightTransitionOf(prev, t, r, i + 1);
      if (lt) out.push(lt);
    });
    return out;
  }

  it('carry a light replica from any snapshot to the summary of the host state at every frame end', () => {
    let full = 0;
    let light = 0;
    fc.assert(
      fc.property(
        fc.array(actionArb, { minLength: 60, maxLength: 300, size: 'max' }),
        fc.integer({ min: 0, max: 2e9 }),
        fc.nat(),
        fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 32 }),
        (actions, t0, startPick, chunks) => {
          const host = drive(actions, t0);
          const end = host.applied.length;
          if (end === 0) return;
          const log = lightLog(host);
          full += host.log.length;
          light += log.length;
          const k = startPick % end;
          let replica = JSON.parse(JSON.stringify(summarizeState(host.history[k]!))) as CoordinatorState;
          let seq = k;
          let from = Math.max(0, k - 1);
          let c = 0;
          while (from < end) {
            const to = Math.min(end, from + chunks[c++ % chunks.length]!);
            const want = summarizeState(host.history[to]!);
            const frame = encodeLightDelta({
              runId: 'replay',
              fromSeq: from,
              toSeq: to,
              transitions: log.filter((t) => t.seq > from && t.seq <= to),
              stateHash: stateHash(want),
            });
            const delta = decodeLightDelta(frame);
            const out = applyLightDelta(replica, seq, delta);
            expect(out.gap).toBe(false);
            ({ state: replica, seq } = out);
            expect(seq).toBe(to);
            expect(JSON.stringify(replica)).toBe(JSON.stringify(want));
            expect(lightStateHash(replica)).toEqual(delta.stateHash);
            from = to;
          }
        },
      ),
      { numRuns: 80 },
    );
    // Most transitions (results, attestations, verdicts) change nothing a light replica holds.
    expect(light).toBeLessThan(full * 0.8);
  });

  it("round bitmaps cost bytes for their exceptions, not for the run's size, in one spelling", () => {
    const outcomeFrame = (admittedBits: Uint8Array, acceptedBits: Uint8Array | null) =>
      encodeLightDelta({
        runId: 'r',
        fromSeq: 0,
        toSeq: 1,
        transitions: [
          {
            seq: 1,
            now: 1,
            entropy: null,
            events: [
              {
                type: 'outcome',
                outcome: {
                  height: 3,
                  admittedBits,
                  admittedList: new Uint8Array(32).fill(9),
                  acceptedBits,
                  aliveBits: acceptedBits,
                },
              },
            ],
          },
        ],
      });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.option(fc.uint8Array({ maxLength: 200 })), (a, b) => {
        const d = decodeLightDelta(outcomeFrame(a, b));
        const ev = d.transitions[0]!.events[0]!;
        expect(ev.type).toBe('outcome');
        if (ev.type !== 'outcome') return;
        expect(ev.outcome.admittedBits).toEqual(a);
        expect(ev.outcome.acceptedBits).toEqual(b);
      }),
      { numRuns: 300 },
    );
    // 1,000 slots, all set but 3, and none set: a few bytes each, where the raw bitmaps take 125.
    const full = new Uint8Array(125).fill(0xff);
    full[3] = 0xfe;
    full[90] = 0x7f;
    full[124] = 0xef;
    const empty = new Uint8Array(125);
    const small = outcomeFrame(full, empty).length;
    const raw = outcomeFrame(
      new Uint8Array(125).map((_, i) => (i * 37) & 0xff),
      null,
    ).length;
    expect(small).toBeLessThan(raw - 100);
    // The same bitmap spelled raw (longer than its zero list) is refused.
    const frame = outcomeFrame(full, null);
    const d = decodeLightDelta(frame);
    expect(d.transitions[0]!.events[0]).toMatchObject({ type: 'outcome' });
    const at = frame.findIndex((b, i) => b === 1 && frame[i + 1] === 125 && frame[i + 2] === 3);
    expect(at).toBeGreaterThan(0);
    const respelled = new Uint8Array([...frame.slice(0, at), 0, 125, ...full, ...frame.slice(at + 6)]);
    expect(() => decodeLightDelta(respelled)).toThrow(/shortest spelling/);
  });

  it('a frame past the replica is a gap; hostile bytes are refused with a WireError', () => {
    const host = drive(
      fc.sample(fc.array(actionArb, { minLength: 200, maxLength: 200 }), { seed: 11, numRuns: 1 })[0]!,
      5000,
    );
    const log = lightLog(host);
    const end = host.applied.length;
    const frame = encodeLightDelta({ runId: 'r', fromSeq: 0, toSeq: end, transitions: log });
    const start = summarizeState(host.history[0]!);
    expect(applyLightDelta(start, 0, { ...decodeLightDelta(frame), fromSeq: 1 }).gap).toBe(true);
    // Any truncation or byte flip decodes to a WireError or to a delta (never another exception); a delta
    // that decodes may still not fit the state, and that too is a WireError.
    expectOnlyWireErrors(frame, 400, (bad) => applyLightDelta(start, 0, decodeLightDelta(bad)));
    // Evidence events cannot be smuggled in as plain events.
    const smuggled = {
      runId: 'r',
      fromSeq: 0,
      toSeq: 1,
      transitions: [
        {
          seq: 1,
          now: 1,
          entropy: null,
          events: [
            {
              type: 'plain' as const,
              event: { type: 'admitted' as const, slot: 0, commitment: new Uint8Array(32) },
            },
          ],
        },
      ],
    };
    expect(() => encodeLightDelta(smuggled)).toThrow(WireError);
  });
});

describe('AdmittedList', () => {
  it("is checked against its round's admitted_list, and any change to it is caught", () => {
    let checked = 0;
    for (const actions of fc.sample(fc.array(actionArb, { minLength: 150, maxLength: 250 }), {
      seed: 3,
      numRuns: 25,
    })) {
      const host = drive(actions, 2_000_000);
      const s = host.state;
      for (const round of s.epoch.rounds) {
        const address = round ? roundListAddress(s.run_id, round) : undefined;
        if (!round || !address) continue;
        const list = admittedListOf(s, round.height)!;
        const frame = encodeAdmittedList(list);
        const back = decodeAdmittedList(frame);
        expect(back).toEqual(list);
        // The round's address is the SHA-256 of exactly this frame: peers can serve it as a blob.
        expect(admittedListAddress(list)).toBe(address);
        expect(bytesToHex(sha256(frame))).toBe(address);
        const ref = { address, step: round.step };
        expect(checkAdmittedList(frame, s.run_id, ref)).toEqual(list);
        expect(() => checkAdmittedList(frame, s.run_id, { ...ref, step: round.step + 1 })).toThrow(WireError);
        expect(() => checkAdmittedList(frame, 'other', ref)).toThrow(WireError);
        if (list.entries.length > 0) {
          const flipped = back.entries.map((e, i) =>
            i === 0 ? { slot: e.slot, commitment: e.commitment.map((b, j) => (j === 0 ? b ^ 1 : b)) } : e,
          );
          const moved = back.entries.map((e, i) => (i === 0 ? { ...e, slot: e.slot + 1000 } : e));
          for (const entries of [back.entries.slice(1), flipped, moved])
            expect(() => checkAdmittedList(encodeAdmittedList({ ...back, entries }), s.run_id, ref)).toThrow(
              WireError,
            );
        }
        checked++;
      }
      // Two rounds that admitted the same (nothing, say) still have two addresses: the address names one
      // round's list, to peers and to the relay.
      const addresses = s.epoch.rounds.flatMap((r) => (r?.admitted_bits !== undefined ? [r] : []));
      expect(listAddresses(s).size).toBe(addresses.length);
    }
    expect(checked).toBeGreaterThan(20);
  });

  it("put back into a light replica's state, gives its client logic the full replica's commitments", () => {
    let rounds = 0;
    for (const actions of fc.sample(fc.array(actionArb, { minLength: 150, maxLength: 250 }), {
      seed: 5,
      numRuns: 25,
    })) {
      const host = drive(actions, 3_000_000);
      for (const full of host.history.filter((_, i) => i % 7 === 0)) {
        const light = summarizeState(full);
        const missing = missingAdmittedLists(light, new Map());
        const closed = full.epoch.rounds.filter((r) => r?.admitted_bits !== undefined);
        const addressOf = (r: Round) => roundListAddress(full.run_id, r)!;
        expect(missing.map((m) => m.step).sort()).toEqual(closed.map((r) => r.step).sort());
        expect(missing.map((m) => m.address).sort()).toEqual(closed.map(addressOf).sort());
        // A light state serves no list but an empty one (which it knows without fetching); the full one
        // serves every closed round's, by address.
        for (const h of heldAdmittedLists(light)) expect(decodeAdmittedList(h.frame).entries).toEqual([]);
        const held = heldAdmittedLists(full);
        expect(held.map((h) => h.address).sort()).toEqual(closed.map(addressOf).sort());
        for (const h of held) expect(bytesToHex(sha256(h.frame))).toBe(h.address);
        expect(heldAdmittedLists(full, new Set(held.map((h) => h.address)))).toEqual([]);
        const lists = new Map(closed.map((r) => [addressOf(r), admittedListOf(full, r.height)!]));
        const view = hydrateState(light, lists);
        expect(missingAdmittedLists(view, new Map())).toEqual([]);
        // Hydrated, the light replica serves the same lists as the full one.
        expect(heldAdmittedLists(view)).toEqual(held);
        for (const r of closed) {
          // Slot by slot (a full round with nothing admitted may hold no list at all).
          const bySlot = (x: Round) => roundAssignments(view, x).map((_, i) => roundAdmitted(x)[i] ?? null);
          expect(bySlot(roundAtHeight(view, r.height)!)).toEqual(bySlot(r));
          if (r.accepted_bits === undefined) continue;
          const want = acceptedCommitments(full, r.height)!.map((a) => a.commitment);
          expect(acceptedCommitments(view, r.height)!.map((a) => a.commitment)).toEqual(want);
          rounds++;
        }
        // Nothing else changes: summarising the view gives the light state back.
        expect(JSON.stringify(summarizeState(view))).toBe(JSON.stringify(light));
      }
    }
    expect(rounds).toBeGreaterThan(20);
  });

  it('refuses hostile bytes with a WireError', () => {
    const frame = encodeAdmittedList({
      runId: 'r',
      step: 9,
      entries: [0, 3, 4, 70].map((slot) => ({ slot, commitment: new Uint8Array(32).fill(slot) })),
    });
    expectOnlyWireErrors(frame, 300, (bad) => decodeAdmittedList(bad));
    expect(() =>
      encodeAdmittedList({
        runId: 'r',
        step: 1,
        entries: [
          { slot: 2, commitment: new Uint8Array(32) },
          { slot: 2, commitment: new Uint8Array(32) },
        ],
      }),
    ).toThrow(WireError);
  });
});

/** Every truncation or single-byte flip of `frame` either passes `use` or throws a WireError, nothing else. */
function expectOnlyWireErrors(frame: Uint8Array, numRuns: number, use: (bad: Uint8Array) => unknown): void {
  fc.assert(
    fc.property(fc.nat(frame.length - 1), fc.integer({ min: 1, max: 255 }), fc.boolean(), (at, x, cut) => {
      const bad = cut ? frame.slice(0, at) : frame.slice();
      if (!cut) bad[at] = bad[at]! ^ x;
      try {
        use(bad);
      } catch (e) {
        expect(e).toBeInstanceOf(WireError);
      }
    }),
    { numRuns },
  );
}
