// The WebSockets listener guard (src/websockets-guard.ts) beyond what hostile-listeners.test.ts throws at it
// from outside: a connection libp2p resets on the listening side is really closed, and a listener whose
// internals moved is refused instead of left unguarded.
import { afterAll, describe, expect, it } from 'vitest';
import { Circuit, WebSockets } from '@multiformats/multiaddr-matcher';
import type { Listener, Logger } from '@libp2p/interface';
import { UnguardableListenerError, createNodePeer, guardWebSocketListener } from '../src/index.ts';
import type { NodePeer } from '../src/index.ts';

const started: NodePeer[] = [];
afterAll(async () => {
  await Promise.allSettled(started.map((p) => p.stop()));
});

async function peer(ws: boolean): Promise<NodePeer> {
  const p = await createNodePeer({ relayAddrs: [], host: '127.0.0.1', tcp: false, webrtc: false, ws });
  started.push(p);
  return p;
}

describe('guarded WebSockets listener', () => {
  it('a connection libp2p resets on the listening side is closed for the dialer too', async () => {
    const [server, client] = await Promise.all([peer(true), peer(false)]);
    const addr = server.multiaddrs().find((m) => WebSockets.matches(m) && !Circuit.matches(m));
    expect(addr).toBeDefined();
    const outbound = await client.dial(addr!);
    const deadline = Date.now() + 5000;
    let inbound = server.libp2p.getConnections(client.libp2p.peerId)[0];
    while (inbound === undefined && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      inbound = server.libp2p.getConnections(client.libp2p.peerId)[0];
    }
    expect(inbound?.status).toBe('open');
    // libp2p resets with WebSocket close code 1006, which ws refuses to send; unguarded, the socket stayed
    // open and the dialer's connection with it.
    inbound!.abort(new Error('reset by the test'));
    while (outbound.status === 'open' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(outbound.status).not.toBe('open');
  });

  it('refuses to guard a listener whose servers are not where it expects them', () => {
    const log = Object.assign(() => {}, {
      error: () => {},
      trace: () => {},
      enabled: false,
    }) as unknown as Logger;
    const moved = {} as unknown as Listener;
    expect(() => guardWebSocketListener(moved, log)).toThrow(UnguardableListenerError);
  });
});
