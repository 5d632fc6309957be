// The WebSockets guard (src/websockets-guard.ts) beyond what hostile-listeners.test.ts throws at it from
// outside: a connection libp2p resets, on either side, is really closed, and a listener whose internals moved
// is refused instead of left unguarded.
import { afterAll, describe, expect, it } from 'vitest';
import { Circuit, WebSockets } from '@multiformats/multiaddr-matcher';
import type { Connection, Listener, Logger } from '@libp2p/interface';
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

/** A WebSockets connection from a fresh peer to another, as both ends see it. */
async function wsConnection(): Promise<{ outbound: Connection; inbound: Connection }> {
  const [server, client] = await Promise.all([peer(true), peer(false)]);
  const addr = server.multiaddrs().find((m) => WebSockets.matches(m) && !Circuit.matches(m));
  expect(addr).toBeDefined();
  const outbound = await client.dial(addr!);
  await until(() => server.libp2p.getConnections(client.libp2p.peerId).length > 0);
  const inbound = server.libp2p.getConnections(client.libp2p.peerId)[0]!;
  expect(inbound.status).toBe('open');
  return { outbound, inbound };
}

async function until(pred: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

// libp2p resets a connection with WebSocket close code 1006, which neither ws (listening side) nor Node's
// WHATWG WebSocket (dialling side) will send: both throw, libp2p swallows it, and unguarded the socket stayed
// open, the other end's connection with it.
describe('guarded WebSockets transport', () => {
  it('a connection libp2p resets on the listening side is closed for the dialer too', async () => {
    const { outbound, inbound } = await wsConnection();
    inbound.abort(new Error('reset by the test'));
    await until(() => outbound.status !== 'open');
    expect(outbound.status).not.toBe('open');
  });

  it('a connection libp2p resets on the dialling side is closed for the listener too', async () => {
    const { outbound, inbound } = await wsConnection();
    outbound.abort(new Error('reset by the test'));
    await until(() => inbound.status !== 'open');
    expect(inbound.status).not.toBe('open');
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
