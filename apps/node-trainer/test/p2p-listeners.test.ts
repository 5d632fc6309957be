// What node-trainer's libp2p peer listens on, as `train` starts it (startNodeMesh): TCP, the relay circuit and
// WebRTC, and no WebSockets: one malformed WebSocket frame used to end the trainer, and no peer ever dialled
// that listener. packages/p2p test/hostile-listeners.test.ts throws malformed input at a peer configured the same.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRelayNode } from '@meshtrain/p2p';
import type { RelayNode } from '@meshtrain/p2p';
import { startNodeMesh } from '../src/net/p2p.ts';
import type { MeshNetwork } from '../src/net/p2p.ts';

let relay: RelayNode;
const networks: MeshNetwork[] = [];

beforeAll(async () => {
  relay = await createRelayNode({ host: '127.0.0.1', webrtcDirect: false });
});

afterAll(async () => {
  await Promise.allSettled(networks.map((n) => n.stop()));
  await relay?.stop();
});

async function start(host?: string): Promise<MeshNetwork> {
  const network = await startNodeMesh({
    relayMultiaddrs: relay.multiaddrs().map(String),
    seed: crypto.getRandomValues(new Uint8Array(32)),
    ...(host === undefined ? {} : { host }),
  });
  if (network === null) throw new Error('no network');
  networks.push(network);
  await network.node.circuitAddress(10_000);
  return network;
}

/** Its own listen addresses (not the ones through the relay), as protocol stacks after the IP. */
function ownListeners(network: MeshNetwork): string[] {
  return network.node
    .multiaddrs()
    .map(String)
    .filter((a) => !a.includes('/p2p-circuit'))
    .map((a) =>
      a
        .replace(/^\/ip[46]\/[^/]+/, '')
        .replace(/\/\d+/g, '/N')
        .replace(/\/p2p\/.*$/, ''),
    );
}

describe("node-trainer's libp2p peer", () => {
  it('by default (0.0.0.0): TCP on every interface, the circuit and WebRTC; no WebSockets', async () => {
    const network = await start();
    expect(new Set(ownListeners(network))).toEqual(new Set(['/tcp/N']));
    expect(network.node.webrtc).toBe(true);
    expect((await network.node.webrtcAddress(10_000)).toString()).toContain('/p2p-circuit/webrtc');
  });

  it('on loopback (local-testnet): TCP on 127.0.0.1 and the circuit; no WebSockets, no WebRTC', async () => {
    const network = await start('127.0.0.1');
    expect(ownListeners(network)).toEqual(['/tcp/N']);
    expect(network.node.webrtc).toBe(false);
  });
});
