import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { createAdaptorServer, upgradeWebSocket, type WebSocketServerLike } from '@hono/node-server';
import { createNodePeer, type NodePeer } from '@meshtrain/p2p';
import {
  attachUpgradeDispatcher,
  loadOrCreateNodeKey,
  startRelayP2P,
  type RelayP2P,
  type UpgradeDispatcher,
} from '../src/p2p/index.ts';

// `ws` ships no types and @types/ws is not installed: load its server class through require with the one
// shape node-server needs.
const { WebSocketServer } = createRequire(import.meta.url)('ws') as {
  WebSocketServer: new (options: { noServer: true }) => WebSocketServerLike;
};

let server: Server;
let port: number;
let p2p: RelayP2P;
let dispatcher: UpgradeDispatcher;
let keyDir: string;
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get(
    '/ws/echo',
    upgradeWebSocket(() => ({
      onMessage: (evt, ws) => ws.send(`echo:${String(evt.data)}`),
    })),
  );
  server = createAdaptorServer({
    fetch: app.fetch,
    websocket: { server: new WebSocketServer({ noServer: true }) },
  }) as Server;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  stops.push(() => new Promise((resolve) => server.close(resolve)));
  keyDir = await mkdtemp(join(tmpdir(), 'relay-p2p-'));
  p2p = await startRelayP2P({ host: '127.0.0.1', publicPort: port, keyFile: join(keyDir, 'libp2p.key') });
  stops.unshift(() => p2p.stop());
  dispatcher = attachUpgradeDispatcher(server, { libp2pPort: p2p.internalPort });
});

afterAll(async () => {
  server.closeAllConnections();
  for (const stop of stops) await stop().catch(() => undefined);
  await rm(keyDir, { recursive: true, force: true });
});

describe('one public port for HTTP, Hono WebSockets and libp2p', () => {
  it('announces the public port, not the internal one', () => {
    expect(p2p.publicMultiaddrs).toEqual([`/ip4/127.0.0.1/tcp/${port}/ws/p2p/${p2p.peerId}`]);
    expect(p2p.internalPort).not.toBe(port);
  });

  it('refuses WebRTC-direct in shared-port mode (it would bind loopback)', async () => {
    await expect(startRelayP2P({ publicPort: port, webrtcDirect: true })).rejects.toThrow(/standalone/);
  });

  it('lets a Node peer reserve a circuit-relay slot through the shared port', async () => {
    let peer: NodePeer | undefined;
    try {
      peer = await createNodePeer({
        relayAddrs: p2p.publicMultiaddrs,
        host: '127.0.0.1',
        tcp: false,
        ws: false,
      });
      const circuit = await peer.circuitAddress(10_000);
      // The relayed address is built from the relay's announced (public) address.
      expect(circuit.toString()).toBe(
        `/ip4/127.0.0.1/tcp/${port}/ws/p2p/${p2p.peerId}/p2p-circuit/p2p/${peer.peerId}`,
      );
      expect(dispatcher.spliced).toBeGreaterThanOrEqual(1);
      // The relay sees the peer (over the bridged loopback connection).
      expect(p2p.node.libp2p.getConnections().some((c) => c.remotePeer.toString() === peer!.peerId)).toBe(
        true,
      );

      // Meanwhile HTTP and Hono's own WebSocket routes keep working on the same port.
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(await health.json()).toEqual({ ok: true });
      const echoed = await new Promise<string>((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/ws/echo`);
        ws.onopen = () => ws.send('hi');
        ws.onmessage = (e) => {
          resolve(String(e.data));
          ws.close();
        };
        ws.onerror = () => reject(new Error('echo WebSocket failed'));
      });
      expect(echoed).toBe('echo:hi');
    } finally {
      await peer?.stop();
    }
  });

  it('keeps its PeerId in the key file across restarts', async () => {
    const path = join(keyDir, 'libp2p.key');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await loadOrCreateNodeKey(path)).toEqual(await loadOrCreateNodeKey(path));
    const again = await startRelayP2P({ host: '127.0.0.1', publicPort: port, keyFile: path });
    try {
      expect(again.peerId).toBe(p2p.peerId);
    } finally {
      await again.stop();
    }
  });

  it('standalone mode (no publicPort): libp2p on its own port, key from the data dir', async () => {
    const dataDir = join(keyDir, 'standalone');
    const alone = await startRelayP2P({ dataDir });
    let peer: NodePeer | undefined;
    try {
      expect((await stat(join(dataDir, 'libp2p.key'))).size).toBe(32);
      expect(alone.publicMultiaddrs.length).toBeGreaterThan(0);
      expect(alone.publicMultiaddrs.every((a) => a.startsWith('/ip4/127.0.0.1/'))).toBe(true);
      peer = await createNodePeer({
        relayAddrs: alone.publicMultiaddrs,
        host: '127.0.0.1',
        tcp: false,
        ws: false,
      });
      expect((await peer.circuitAddress(10_000)).toString()).toContain(`/p2p/${alone.peerId}/p2p-circuit/`);
    } finally {
      await peer?.stop();
      await alone.stop();
    }
  });

  it('answers 502 when libp2p is not listening, and keeps serving', async () => {
    const plain = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    attachUpgradeDispatcher(plain, { libp2pPort: deadPort });
    const plainPort = (plain.address() as AddressInfo).port;
    try {
      const outcome = await new Promise<string>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${plainPort}/`);
        ws.onopen = () => resolve('open');
        ws.onerror = () => resolve('error');
      });
      expect(outcome).toBe('error');
      expect(await (await fetch(`http://127.0.0.1:${plainPort}/x`)).text()).toBe('ok');
    } finally {
      plain.closeAllConnections();
      await new Promise((resolve) => plain.close(resolve));
    }
  });

  it('refuses a malformed handshake on / (400) without dialing libp2p, and holds no bridged connection', async () => {
    const spliced = dispatcher.spliced;
    const head = await new Promise<string>((resolve, reject) => {
      const sock = connect(port, '127.0.0.1', () =>
        sock.write(
          'GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            'Sec-WebSocket-Key: not-a-key\r\nSec-WebSocket-Version: 13\r\n\r\n',
        ),
      );
      let got = '';
      sock.on('data', (d: Buffer) => (got += d.toString('latin1')));
      sock.on('close', () => resolve(got));
      sock.on('error', reject);
    });
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(dispatcher.spliced).toBe(spliced);
    expect(dispatcher.open).toBe(0);
  });

  it('rejects upgrades to unknown paths without disturbing the server', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/ws/nope`);
      ws.onopen = () => resolve('open');
      ws.onerror = () => resolve('error');
    });
    expect(outcome).toBe('error');
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
  });
});
