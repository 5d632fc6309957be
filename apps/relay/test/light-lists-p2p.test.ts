// Admitted lists travel between light replicas over real libp2p: honest clients drive a run on a real relay,
// two of them light RelayLinks, each with a MeshNetwork on a real libp2p peer behind a real circuit relay.
// One is drawn as a seed for every round (it takes each list from the relay and serves it on); the other is
// never a seed, so every list it holds came from its peer — checked against the round's address and root —
// and it asked the relay for none, while it witnesses from those lists and its view names the relay's
// commitments.
import { afterAll, describe, expect, it } from 'vitest';
import { MeshNetwork } from '@meshtrain/client';
import { roundAdmitted, roundAtHeight } from '@meshtrain/core';
import { createNodePeer, createRelayNode } from '@meshtrain/p2p';
import type { NodePeer, RelayNode } from '@meshtrain/p2p';
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

const stops: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
});

describe('admitted lists between light replicas', () => {
  it('a replica that is never a seed gets every list from its peer, none from the relay', async () => {
    const r: RunningRelay = await startRelayServer({ dataDir: ':memory:', tickMs: 100 });
    stops.push(() => r.close());
    r.relay.createRun({
      toml: fastRunToml('lists', { min_clients: 2, init_min_clients: 3, max_round_train_time: 10 }),
      mainAuthority: hexKey(identity(1)),
    });
    const host = r.relay.run('lists')!;
    const circuit: RelayNode = await createRelayNode({ host: '127.0.0.1', webrtcDirect: false });
    stops.push(() => circuit.stop());
    const relayAddrs = circuit.multiaddrs().map((m) => m.toString());
    // Loopback, no WebRTC: the circuit relay carries the peers' streams.
    const peer = async (n: number): Promise<NodePeer> => {
      const p = await createNodePeer({
        relayAddrs,
        host: '127.0.0.1',
        tcp: false,
        webrtc: false,
        privateKeySeed: identity(n).secretKey,
      });
      stops.push(() => p.stop());
      await p.circuitAddress(10_000);
      return p;
    };
    const follower = async (n: number, listSeeds: number) => {
      const node = await peer(n);
      const mesh = new MeshNetwork(node);
      const f = new LinkParticipant(r.url, 'lists', identity(n), {
        replica: 'light',
        p2pPeerId: node.peerId,
        listSeeds,
      });
      f.link.onState((s) => mesh.setState(s));
      f.link.usePeers(mesh);
      stops.push(() => f.close());
      await f.link.connect();
      return new HonestClient(f);
    };
    const seed = await follower(901, 1e9);
    const leech = await follower(902, 0);
    const honest: HonestClient[] = [];
    for (const n of [911, 912, 913]) {
      const c = await TestClient.joined(r.url, 'lists', identity(n), 'cpu');
      stops.push(() => c.close());
      honest.push(new HonestClient(c));
    }
    const all = [seed, leech, ...honest];
    const loops = all.map((h) => h.run());
    const w = honest[0]!.c;
    await w.until(() => (w.state?.progress.step ?? 0) >= 5, 60_000, 'step 5');
    for (const h of all) h.stop();
    await Promise.all(loops);
    for (const h of all) expect(h.log).toEqual([]);
    await w.until(
      () => leech.c.state?.progress.step === host.state.progress.step,
      10_000,
      'the peer-fed replica caught up',
    );

    expect(seed.c.link.stats.listsFromRelay).toBeGreaterThan(2);
    expect(seed.c.link.stats.listsFromPeers).toBe(0);
    expect(leech.c.link.stats.listsFromRelay).toBe(0);
    expect(leech.c.link.stats.listsFromPeers).toBeGreaterThan(2);
    expect(leech.c.link.stats.hashMismatches).toBe(0);
    // Its view holds each closed round's commitments exactly as the relay's state does.
    const closed = leech.c.state!.epoch.rounds.filter((x) => x?.admitted_list !== undefined);
    expect(closed.length).toBeGreaterThan(1);
    for (const round of closed)
      expect(roundAdmitted(round!).filter((x) => x !== null)).toEqual(
        roundAdmitted(roundAtHeight(host.state, round!.height)!).filter((x) => x !== null),
      );
    expect(closed.some((round) => roundAdmitted(round!).some((x) => x !== null))).toBe(true);
  });
});
