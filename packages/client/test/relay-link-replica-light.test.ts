// The light replica of the relay link (relay-link-replica.ts with `light`): every state it applies is handed
// on — also when two frames arrive in one task — and a closed round's state waits for its admitted list,
// which is fetched by its address, checked, and put back into the round; a list that does not hash to the
// address is refused and asked for again. Lists travel between replicas as blobs by their address: a full replica
// serves every closed round's list, a light one fetches from peers first and serves what it fetched. The host
// and the peers around it are stand-ins (the peers a map by SHA-256); the frames are core's real LightDelta
// transitions of a real coordinator run.
import { describe, expect, it } from 'vitest';
import {
  admittedListOf,
  listAddresses,
  roundListAddress,
  bytesToHex,
  sha256,
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
import { StateReplica, type ReplicaStats, type StateReplicaOptions } from '../src/relay-link-replica.ts';
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

/** Peers as one content-addressed store: what every replica of the test shares, by SHA-256. */
class FakePeers {
  readonly blobs = new Map<string, Uint8Array>();
  fetched = 0;
  asks = 0;
  shareBlob(bytes: Uint8Array): Promise<void> {
    this.blobs.set(bytesToHex(sha256(bytes)), bytes);
    return Promise.resolve();
  }
  fetchBlob(address: Uint8Array): Promise<Uint8Array | null> {
    this.asks++;
    const got = this.blobs.get(bytesToHex(address)) ?? null;
    if (got) this.fetched++;
    return Promise.resolve(got);
  }
}

function replica(
  lists: (address: string) => Uint8Array | null,
  o: StateReplicaOptions & { peers?: FakePeers } = {},
) {
  const emitted: CoordinatorState[] = [];
  const asked: string[] = [];
  const stats: ReplicaStats = {
    snapshots: 0,
    deltas: 0,
    hashChecks: 0,
    hashMismatches: 0,
    resyncs: 0,
    listsFromPeers: 0,
    listsFromRelay: 0,
    listBytesFromRelay: 0,
  };
  const r = new StateReplica(
    {
      runId: 'replay',
      stats,
      log: () => {},
      emit: (s) => emitted.push(s),
      request: () => Promise.resolve(),
      closed: () => false,
      admittedList: (address) => {
        asked.push(address);
        return Promise.resolve(lists(address));
      },
      peers: () => o.peers ?? null,
    },
    {
      light: o.light ?? true,
      ...(o.listSeeds !== undefined ? { listSeeds: o.listSeeds } : {}),
      ...(o.listPeerWindowMs !== undefined ? { listPeerWindowMs: o.listPeerWindowMs } : {}),
      ...(o.now ? { now: o.now } : {}),
      ...(o.random ? { random: o.random } : {}),
    },
  );
  return { r, emitted, asked, stats };
}

describe('a light relay-link replica', () => {
  const [actions] = fc.sample(fc.array(actionArb, { minLength: 250, maxLength: 250 }), {
    seed: 21,
    numRuns: 1,
  });
  const host = drive(actions!, 4_000_000);
  const log = lightLog(host.history, host.applied);
  const end = host.applied.length;
  const closedAt = host.history.findIndex((s) => listAddresses(s).size > 0);

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

  it("holds a closed round back until its checked list is in, and refuses a list that is not the round's", async () => {
    expect(closedAt).toBeGreaterThan(0);
    let honest = false;
    const { r, emitted, asked } = replica((address) => {
      const s = host.history[closedAt]!;
      const round = s.epoch.rounds.find((x) => roundListAddress(s.run_id, x) === address)!;
      const list = admittedListOf(s, round.height)!;
      // First a list with one entry too many: it hashes neither to the address nor to the root.
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
    for (const round of last.epoch.rounds.filter((x) => x?.admitted_list !== undefined)) {
      const want = full.epoch.rounds.find((x) => x?.height === round.height)!;
      expect(roundAdmitted(round).filter((c) => c !== null)).toEqual(
        roundAdmitted(want).filter((c) => c !== null),
      );
    }
    expect(end).toBeGreaterThan(closedAt);
  });

  /** Every closed round's list at `at`, by address, from the host's full state (what the relay serves). */
  const relayLists = (at: number) => (address: string) => {
    const s = host.history[at]!;
    const round = s.epoch.rounds.find((x) => roundListAddress(s.run_id, x) === address);
    return round ? encodeAdmittedList(admittedListOf(s, round.height)!) : null;
  };
  const toClosed = (r: StateReplica, replay: CoordinatorState) => {
    r.onSnapshot({ runId: 'replay', seq: 0, serverTime: 0, state: replay });
    r.onLightDelta({
      runId: 'replay',
      fromSeq: 0,
      toSeq: closedAt,
      transitions: log.filter((t) => t.seq <= closedAt),
    });
  };
  const closedLists = () => [...listAddresses(host.history[closedAt]!)];

  it('a full replica serves the admitted list of every closed round it holds, by its address', () => {
    const peers = new FakePeers();
    const { r } = replica(() => null, { light: false, peers });
    r.onSnapshot({ runId: 'replay', seq: closedAt, serverTime: 0, state: host.history[closedAt]! });
    expect([...peers.blobs.keys()].sort()).toEqual(closedLists().sort());
  });

  it('a light replica takes lists from peers and never asks the relay', async () => {
    const peers = new FakePeers();
    const full = replica(() => null, { light: false, peers });
    full.r.onSnapshot({ runId: 'replay', seq: closedAt, serverTime: 0, state: host.history[closedAt]! });
    // Never one of the run's seeds: every list must come from the peers.
    const { r, emitted, asked, stats } = replica(relayLists(closedAt), { peers, listSeeds: 0 });
    toClosed(r, summarizeState(host.history[0]!));
    await new Promise((res) => setTimeout(res, 100));
    expect(asked).toEqual([]);
    expect(stats.listsFromPeers).toBe(closedLists().length);
    expect(stats.listsFromRelay).toBe(0);
    const last = emitted.at(-1)!;
    for (const round of last.epoch.rounds.filter((x) => x?.admitted_list !== undefined)) {
      const want = host.history[closedAt]!.epoch.rounds.find((x) => x?.height === round.height)!;
      expect(roundAdmitted(round).filter((c) => c !== null)).toEqual(
        roundAdmitted(want).filter((c) => c !== null),
      );
    }
  });

  it('a light replica falls back to the relay when no peer has the list, and seeds its peers', async () => {
    const peers = new FakePeers();
    const { r, emitted, asked, stats } = replica(relayLists(closedAt), {
      peers,
      listSeeds: 0,
      listPeerWindowMs: 300,
    });
    toClosed(r, summarizeState(host.history[0]!));
    await new Promise((res) => setTimeout(res, 1200));
    expect(asked.length).toBe(closedLists().length);
    expect(stats.listsFromRelay).toBe(closedLists().length);
    expect(stats.listBytesFromRelay).toBeGreaterThan(0);
    expect(emitted.length).toBeGreaterThan(0);
    // What it fetched it now serves, under the addresses the rounds name.
    expect([...peers.blobs.keys()].sort()).toEqual(closedLists().sort());
  });

  it('a seed goes to the relay at once, without asking peers', async () => {
    const peers = new FakePeers();
    const { r, asked, stats } = replica(relayLists(closedAt), { peers, listSeeds: 1e9 });
    toClosed(r, summarizeState(host.history[0]!));
    await new Promise((res) => setTimeout(res, 100));
    expect(asked.length).toBe(closedLists().length);
    expect(peers.fetched).toBe(0);
    expect(stats.listsFromPeers).toBe(0);
  });

  it('draws whether it seeds, and times the peer window, with the randomness and clock it is given', async () => {
    // A draw below listSeeds / clients makes a seed: straight to the relay.
    const seedPeers = new FakePeers();
    const seed = replica(relayLists(closedAt), { peers: seedPeers, listSeeds: 1, random: () => 0 });
    toClosed(seed.r, summarizeState(host.history[0]!));
    await new Promise((res) => setTimeout(res, 100));
    expect(seed.asked.length).toBe(closedLists().length);
    expect(seedPeers.asks).toBe(0);
    // A draw above it asks peers until the window closes, on the given clock: one that leaps past the
    // window at once sends it to the relay after one ask per list, long before the default 2 s.
    const peers = new FakePeers();
    let t = 0;
    const other = replica(relayLists(closedAt), {
      peers,
      listSeeds: 1,
      random: () => 0.999_999,
      now: () => (t += 10_000),
    });
    toClosed(other.r, summarizeState(host.history[0]!));
    await new Promise((res) => setTimeout(res, 100));
    expect(peers.asks).toBe(closedLists().length);
    expect(other.asked.length).toBe(closedLists().length);
    expect(other.stats.listsFromRelay).toBe(closedLists().length);
  });
});
