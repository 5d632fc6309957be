// MeshNetwork (the shared peer path of node-trainer and the web worker) on real Node libp2p peers over a
// loopback relay: parameters shared by one peer are fetched by their hash by another through the relay's
// circuit, and the stats count what came from peers. Browsers run the same class on createBrowserPeer; the
// browser transport itself is covered by packages/p2p/test/browser-peer.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CoordinatorState } from '@meshtrain/core';
import { parameterHash } from '@meshtrain/model';
import { createNodePeer, createRelayNode } from '@meshtrain/p2p';
import type { NodePeer, RelayNode } from '@meshtrain/p2p';
import { MeshNetwork, PARAM_PIECE_BYTES } from '../src/index.ts';

let relay: RelayNode;
let a: NodePeer;
let b: NodePeer;

beforeAll(async () => {
  relay = await createRelayNode({ host: '127.0.0.1', webrtcDirect: false });
  const relayAddrs = relay.multiaddrs().map((m) => m.toString());
  // Circuit only (no WebRTC): this test stays on loopback; WebRTC links are tested in namespaces
  // (packages/p2p/test/browser-webrtc.test.ts).
  [a, b] = await Promise.all([
    createNodePeer({ relayAddrs, host: '127.0.0.1', tcp: false, webrtc: false }),
    createNodePeer({ relayAddrs, host: '127.0.0.1', tcp: false, webrtc: false }),
  ]);
  await Promise.all([a.circuitAddress(10_000), b.circuitAddress(10_000)]);
}, 60_000);

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await relay?.stop();
});

/** Only what MeshNetwork reads of the coordinator state: which PeerId belongs to which client. */
function stateWith(peers: Record<string, string>): CoordinatorState {
  const members = Object.entries(peers).map(([id, p2p_id]) => ({ id, p2p_id }));
  return { members, epoch: { clients: [] } } as unknown as CoordinatorState;
}

describe('MeshNetwork', () => {
  it('fetches shared parameters by their hash from a run peer through the relay circuit', async () => {
    const params = new Map<string, Float32Array>([
      ['w', Float32Array.from({ length: 100_000 }, (_, i) => Math.sin(i))],
      ['b', Float32Array.from({ length: 300 }, (_, i) => i / 7)],
    ]);
    const paramHash = parameterHash(params);
    const sharer = new MeshNetwork(a);
    const lines: string[] = [];
    const joiner = new MeshNetwork(b, (l) => lines.push(l));
    await sharer.shareCheckpoint({ step: 8, epoch: 1, paramHash, params });
    const state = stateWith({ alice: a.peerId, bob: b.peerId });
    sharer.setState(state);
    joiner.setState(state);
    expect(joiner.stats.peersConnected).toBe(0);

    const sizes = new Map([...params].map(([k, v]) => [k, v.length] as const));
    const got = await joiner.fetchParams(paramHash, sizes);
    expect(got).not.toBeNull();
    expect(parameterHash(got as Map<string, Float32Array>)).toEqual(paramHash);
    expect(joiner.stats.paramsFromPeers).toBe(1);
    expect(joiner.stats.lastParamsPeers).toBe(1);
    expect(joiner.stats.paramBytesFromPeers).toBe(4 * 100_300);
    expect(joiner.stats.peersConnected).toBe(1);
    expect(joiner.stats.peersRelayed).toBe(1);
    expect(joiner.stats.peersWebRTC).toBe(0);
    expect(joiner.peerLinks()).toEqual({ [a.peerId]: 'relayed' });
    expect(JSON.parse(JSON.stringify(joiner.stats))).toMatchObject({ peersConnected: 1, paramsFromPeers: 1 });
    expect(lines.some((l) => l.includes(`${Math.ceil((4 * 100_300) / PARAM_PIECE_BYTES)} pieces`))).toBe(
      true,
    );

    // An unknown hash is not available from peers: null (the caller falls back to the relay), not a hang.
    const unknown = new Uint8Array(32).fill(7);
    expect(await joiner.fetchParams(unknown, sizes)).toBeNull();
  });
});
