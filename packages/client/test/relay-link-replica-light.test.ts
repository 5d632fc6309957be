// The light replica of the relay link (relay-link-replica.ts with `light`): every state it applies is handed
// on — also when two frames arrive in one task — and a closed round's state waits for its admitted list,
// which is fetched by root, checked, and put back into the round; a list that does not hash to the root is
// refused and asked for again. The host around it is a stand-in; the frames are core's real LightDelta
// transitions of a real coordinator run.
import { describe, expect, it } from 'vitest';
import {
  admittedListOf,
  encodeAdmittedList,
  lightTransitionOf,
  roundAdmitted,
  summarizeState,
  tick,
  type CoordinatorEvent,
  type CoordinatorState,
  type LightDelta,
  type LightTransition,
} from '@meshtrain/core';
import { StateReplica, type ReplicaStats } from '../src/relay-link-replica.ts';
import { actionArb, drive } from '../../core/test/fixtures/random-run.ts';
import fc from 'fast-check';

function lightLog(
  history: CoordinatorState[],
  applied: { now: number; entropy?: string; event: CoordinatorEvent }[],
) {
  const out: LightTransition[] = [];
  applied.forEach((t, i) => {
    const prev = history[i]!;
    const base =
      t.entropy === undefined ? prev : tick(prev, { type: 'entropy', entropy: t.entropy }, t.now).state;
    const lt = lightTransitionOf(prev, t, tick(base, t.event, t.now), i + 1);
    if (lt) out.push(lt);
  });
  return out;
}

function replica(lists: (root: string) => Uint8Array | null) {
  const emitted: CoordinatorState[] = [];
  const asked: string[] = [];
  const stats: ReplicaStats = { snapshots: 0, deltas: 0, hashChecks: 0, hashMismatches: 0, resyncs: 0 };
  const r = new StateReplica(
    {
      runId: 'replay',
      stats,
      log: () => {},
      emit: (s) => emitted.push(s),
      request: () => Promise.resolve(),
      closed: () => false,
      admittedList: (root) => {
        asked.push(root);
        return Promise.resolve(lists(root));
      },
    },
    { light: true },
  );
  return { r, emitted, asked };
}

describe('a light relay-link replica', () => {
  const [actions] = fc.sample(fc.array(actionArb, { minLength: 250, maxLength: 250 }), {
    seed: 21,
    numRuns: 1,
  });
  const host = drive(actions!, 4_000_000);
  const log = lightLog(host.history, host.applied);
  const end = host.applied.length;
  const closedAt = host.history.findIndex((s) => s.epoch.rounds.some((x) => x?.admitted_root !== undefined));

  it('hands on every state, also two frames delivered in one task', () => {
    const { r, emitted } = replica(() => null);
    const k = Math.max(1, closedAt - 6);
    r.onSnapshot({ runId: 'replay', seq: 0, serverTime: 0, state: summarizeState(host.history[0]!) });
    const frame = (from: number, to: number): LightDelta => ({
      runId: 'replay',
      fromSeq: from,
      toSeq: to,
      transitions: log.filter((t) => t.seq > from && t.seq <= to),
    });
    // No round has closed before k: nothing to fetch, so each state goes out as it is applied.
    r.onLightDelta(frame(0, k - 1));
    r.onLightDelta(frame(k - 1, k));
    expect(JSON.stringify(emitted.at(-1))).toBe(JSON.stringify(summarizeState(host.history[k]!)));
  });

  it('holds a closed round back until its checked list is in, and refuses a list for another root', async () => {
    expect(closedAt).toBeGreaterThan(0);
    let honest = false;
    const { r, emitted, asked } = replica((root) => {
      const s = host.history[closedAt]!;
      const round = s.epoch.rounds.find((x) => x?.admitted_root === root)!;
      const list = admittedListOf(s, round.height)!;
      // First a list with one commitment changed (or one entry too many): it does not hash to the root.
      if (!honest) {
        honest = true;
        return encodeAdmittedList({
          ...list,
          entries: [...list.entries, { slot: 999, commitment: new Uint8Array(32) }],
        });
      }
      return encodeAdmittedList(list);
    });
    r.onSnapshot({ runId: 'replay', seq: 0, serverTime: 0, state: summarizeState(host.history[0]!) });
    r.onLightDelta({
      runId: 'replay',
      fromSeq: 0,
      toSeq: closedAt,
      transitions: log.filter((t) => t.seq <= closedAt),
    });
    const before = emitted.length;
    // The refused list is asked for again after ADMITTED_RETRY_MS.
    await new Promise((res) => setTimeout(res, 1500));
    expect(asked.length).toBeGreaterThanOrEqual(2);
    expect(emitted.length).toBeGreaterThan(before - 1);
    const last = emitted.at(-1)!;
    const full = host.history[closedAt]!;
    for (const round of last.epoch.rounds.filter((x) => x?.admitted_root !== undefined)) {
      const want = full.epoch.rounds.find((x) => x?.height === round.height)!;
      expect(roundAdmitted(round).filter((c) => c !== null)).toEqual(
        roundAdmitted(want).filter((c) => c !== null),
      );
    }
    expect(end).toBeGreaterThan(closedAt);
  });
});
