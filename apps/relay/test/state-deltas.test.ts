// Clients follow the run from one snapshot by replaying deltas: what a change costs each of them is one small
// event whatever the size of the run; a gap is filled from the relay's ring of recent frames (or a
// snapshot); a replica that replays to another hash reports it, the relay counts it and sends a snapshot,
// and the training client's RelayLink recovers by itself.
import { afterAll, describe, expect, it } from 'vitest';
import { encodeResyncRequest, stateHash } from '@meshtrain/core';
import type { CoordinatorState } from '@meshtrain/core';
import { RESYNC_SNAPSHOT_INTERVAL_MS } from '../src/relay.ts';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import {
  fastRunToml,
  hexKey,
  HonestClient,
  identity,
  LinkParticipant,
  TestClient,
} from './helpers/relay-fixtures.ts';

const relays: RunningRelay[] = [];
const clients: TestClient[] = [];
afterAll(async () => {
  for (const c of clients) c.close();
  for (const r of relays) await r.close();
});

async function relayWith(
  runId: string,
  overrides: Record<string, number> = {},
  opts = {},
): Promise<RunningRelay> {
  const r = await startRelayServer({ dataDir: ':memory:', tickMs: 100, ...opts });
  relays.push(r);
  r.relay.createRun({ toml: fastRunToml(runId, overrides), mainAuthority: hexKey(identity(1)) });
  return r;
}

async function join(r: RunningRelay, runId: string, n: number): Promise<TestClient> {
  const c = await TestClient.joined(r.url, runId, identity(n));
  clients.push(c);
  return c;
}

const idOf = (i: number) => i.toString(16).padStart(64, '0');

describe('state deltas', () => {
  it('one more join costs an existing client the same bytes at 20 members as at 400', async () => {
    const r = await relayWith('cost', { init_min_clients: 1000 });
    const host = r.relay.run('cost')!;
    const watcher = await join(r, 'cost', 500);
    const bytesFor = async (i: number): Promise<number> => {
      await watcher.until(() => watcher.seq === host.seq, 5000, 'settled');
      const before = watcher.received.length;
      host.apply({ type: 'join', id: idOf(i), p2p_id: `12D3KooW${'x'.repeat(44)}` });
      await watcher.until(() => watcher.seq === host.seq, 5000, 'the join');
      const frames = watcher.received.slice(before);
      expect(frames.map((m) => m.kind)).toEqual(['stateDelta']);
      return watcher.sizes.slice(before).reduce((a, b) => a + b, 0);
    };
    for (let i = 1; i < 20; i++) host.apply({ type: 'join', id: idOf(i), p2p_id: `p${i}` });
    const small = await bytesFor(10_000);
    for (let i = 20; i < 400; i++) host.apply({ type: 'join', id: idOf(i), p2p_id: `p${i}` });
    const large = await bytesFor(10_001);
    expect(host.state.members.length).toBeGreaterThan(400);
    expect(small).toBeLessThan(160);
    expect(Math.abs(large - small)).toBeLessThanOrEqual(2);
    expect(JSON.stringify(watcher.state)).toBe(JSON.stringify(host.state));
  });

  it('a gap is filled from the ring, an older one and a mismatch by a snapshot, at most one per interval', async () => {
    const r = await relayWith('gaps', { init_min_clients: 1000 }, { snapshotIntervalMs: 0 });
    const host = r.relay.run('gaps')!;
    let mismatches = 0;
    r.relay.hooks.stateHashMismatch = () => mismatches++;
    for (let i = 1; i <= 300; i++) {
      host.apply({ type: 'join', id: idOf(i), p2p_id: `p${i}` });
      // Each transition is its own broadcast (snapshotIntervalMs 0): 300 frames, more than the ring keeps.
      await new Promise((res) => setImmediate(res));
    }
    const c = await join(r, 'gaps', 600);
    await c.until(() => c.seq === host.seq, 5000, 'settled');
    // A recent gap: the frames after seq - 5 come from the ring, no snapshot.
    const ask = (seq: number, reason: 'gap' | 'mismatch', hash?: Uint8Array) =>
      c.request(encodeResyncRequest({ runId: 'gaps', seq, reason, ...(hash ? { stateHash: hash } : {}) }));
    const n = c.received.length;
    expect((await ask(host.seq - 5, 'gap')).kind).toBe('ack');
    await c.until(() => c.received.slice(n).some((m) => m.kind === 'stateDelta'), 5000, 'ring frames');
    const ring = c.received.slice(n).flatMap((m) => (m.kind === 'stateDelta' ? [m.message] : []));
    expect(ring[0]!.fromSeq).toBeLessThanOrEqual(host.seq - 5);
    expect(c.received.slice(n).some((m) => m.kind === 'stateSnapshot')).toBe(false);
    // A gap older than the ring: a snapshot.
    expect((await ask(1, 'gap')).kind).toBe('ack');
    await c.until(() => c.snapshots() === 2, 5000, 'a snapshot');
    // A second snapshot within the interval is refused (not a bad frame); after it, a mismatch report is
    // counted and answered with a snapshot.
    expect(await ask(host.seq, 'mismatch', new Uint8Array(32).fill(1))).toMatchObject({
      kind: 'error',
      message: { code: 'resync_too_soon' },
    });
    await new Promise((res) => setTimeout(res, RESYNC_SNAPSHOT_INTERVAL_MS));
    expect((await ask(host.seq, 'mismatch', new Uint8Array(32).fill(1))).kind).toBe('ack');
    await c.until(() => c.snapshots() === 3, 5000, 'the mismatch snapshot');
    expect(mismatches).toBe(1);
    expect(JSON.stringify(c.state)).toBe(JSON.stringify(host.state));
    expect(c.closed).toBeUndefined();
  });

  it("a RelayLink replays a scripted run to the relay's exact state, and recovers from a corrupted replica", async () => {
    const r = await relayWith('link', { min_clients: 2, init_min_clients: 3, max_round_train_time: 10 });
    const host = r.relay.run('link')!;
    let mismatches = 0;
    r.relay.hooks.stateHashMismatch = () => mismatches++;
    const honest = [
      new HonestClient(await join(r, 'link', 701)),
      new HonestClient(await join(r, 'link', 702)),
    ];
    const linked = new HonestClient(new LinkParticipant(r.url, 'link', identity(703)));
    const emitted: CoordinatorState[] = [];
    linked.c.link.onState((s) => emitted.push(s));
    await linked.c.link.connect();
    const loops = [...honest, linked].map((h) => h.run());
    const w = honest[0]!.c;
    await w.until(() => (w.state?.progress.step ?? 0) >= 4, 40_000, 'step 4');
    for (const h of [...honest, linked]) h.stop();
    await Promise.all(loops);
    for (const h of [...honest, linked]) expect(h.log).toEqual([]);
    const link = linked.c.link;
    await w.until(
      () => JSON.stringify(linked.c.state) === JSON.stringify(host.state),
      5000,
      'the link caught up',
    );
    expect(link.stats.snapshots).toBe(1);
    expect(link.stats.deltas).toBeGreaterThan(3);
    expect(link.stats.hashChecks).toBeGreaterThan(0);
    expect(link.stats.hashMismatches).toBe(0);
    // Every state it emitted hashes like something the relay held (here: the last one exactly).
    expect(stateHash(emitted.at(-1)!)).toEqual(host.stateHash());

    // Corrupt the link's replica in place (the state it emitted is the one it keeps): the next hashed delta
    // (a phase change always carries the hash) exposes it; the link reports it and takes a snapshot.
    (emitted.at(-1)!.epoch as { start_step: number }).start_step += 1000;
    r.relay.adminEvent(host, { type: 'pause' });
    await w.until(
      () => link.stats.hashMismatches === 1 && link.stats.snapshots === 2,
      20_000,
      'the recovery',
    );
    await w.until(
      () => JSON.stringify(linked.c.state) === JSON.stringify(host.state),
      5000,
      'the same state',
    );
    expect(mismatches).toBe(1);
    linked.c.close();
  });
});
