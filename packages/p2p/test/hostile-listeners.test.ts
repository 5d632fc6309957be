// Unauthenticated input against every listener a Node libp2p node of ours opens: a node-trainer peer as
// node-trainer starts it (0.0.0.0, TCP, /p2p-circuit, /webrtc), a peer with the opt-in listeners too
// (WebSockets, WebRTC-direct) and the relay node (WebSockets, WebRTC-direct). Each runs in a process of its
// own (test/fixtures/hostile-target.ts) so that a crash is that process exiting. The attacks are raw bytes on
// TCP and UDP sockets to each of its loopback addresses (tests send traffic to loopback only), then garbage on
// every stream protocol it speaks, from a peer that connected to it; afterwards each must still be running and
// an honest peer must still fetch a blob from it over every transport. Until packages/p2p guarded its
// WebSockets listener (src/websockets-guard.ts), the first RSV2 frame below ended the process.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { peerIdFromString } from '@libp2p/peer-id';
import type { Connection, Stream } from '@libp2p/interface';
import { multiaddr } from '@multiformats/multiaddr';
import { Circuit, WebRTC, WebSockets } from '@multiformats/multiaddr-matcher';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MAX_WS_MESSAGE_BYTES,
  WS_HANDSHAKE_TIMEOUT_MS,
  blobAddress,
  createNodePeer,
  sameBytes,
} from '../src/index.ts';
import type { NodePeer } from '../src/index.ts';
import { writeAll } from '../src/stream-io.ts';
import {
  clientFrame,
  httpStatus,
  mss,
  noise,
  rawConnect,
  sendDatagrams,
  stunMessage,
  upgradeRequest,
  varint,
  wsCloseCode,
} from './helpers/raw-input.ts';
import type { RawConnection } from './helpers/raw-input.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/hostile-target.ts', import.meta.url));
const MiB = 1024 * 1024;
/** How long the far end may take to drop a connection it refused (it is usually milliseconds). */
const CLOSE_MS = 5_000;

interface Target {
  name: string;
  child: ChildProcess;
  peerId: string;
  multiaddrs: string[];
  blob?: string;
  out(): string;
  alive(): boolean;
  rss(): number;
  stop(): Promise<void>;
}

async function spawnTarget(name: string, role: string, args: Record<string, unknown>): Promise<Target> {
  const child = spawn(process.execPath, [FIXTURE, role, JSON.stringify(args)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const ready = await new Promise<{ peerId: string; multiaddrs: string[]; blob?: string }>(
    (resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${out}`)), 60_000);
      let buf = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        buf += d.toString();
        const line = buf.split('\n').find((l) => l.startsWith('{'));
        if (line === undefined) return;
        clearTimeout(timer);
        resolve(JSON.parse(line) as { peerId: string; multiaddrs: string[]; blob?: string });
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${out}`));
      });
    },
  );
  return {
    name,
    child,
    ...ready,
    out: () => out,
    alive: () => child.exitCode === null && child.signalCode === null,
    rss: () => {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      return Number(m?.[1] ?? 0) * 1024;
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Its listeners on 127.0.0.1 (a 0.0.0.0 listener shows once per interface; only loopback is attacked). */
function loopbackListeners(t: Target): { kind: 'tcp' | 'ws' | 'webrtc-direct'; port: number }[] {
  const out: { kind: 'tcp' | 'ws' | 'webrtc-direct'; port: number }[] = [];
  for (const a of t.multiaddrs) {
    const m = /^\/ip4\/127\.0\.0\.1\/(tcp|udp)\/(\d+)(\/[^/]+)?/.exec(a);
    if (m === null || a.includes('/p2p-circuit')) continue;
    const rest = m[3] ?? '';
    const kind = m[1] === 'udp' ? 'webrtc-direct' : rest === '/ws' ? 'ws' : 'tcp';
    if (kind === 'webrtc-direct' && rest !== '/webrtc-direct') continue;
    out.push({ kind, port: Number(m[2]) });
  }
  return out;
}

function assertAlive(t: Target): void {
  if (!t.alive()) throw new Error(`${t.name} died; its output:\n${t.out()}`);
}

async function waitFor(pred: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * libp2p accepts 5 inbound connections per second from one host (the relay raises that), and refuses the
 * rest right after the WebSocket upgrade, before ws would parse the frame under test; so the attacks open
 * their connections at most 4 per second.
 */
let lastConnect = 0;
async function connectPaced(port: number): Promise<RawConnection> {
  const wait = lastConnect + 250 - Date.now();
  lastConnect = Math.max(Date.now(), lastConnect + 250);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  return await rawConnect(port);
}

/** A WebSocket upgrade on a raw socket; resolves once the response head has arrived. */
async function upgraded(port: number): Promise<RawConnection> {
  const c = await connectPaced(port);
  c.socket.write(upgradeRequest(port));
  await waitFor(() => c.received().includes('\r\n\r\n') || c.closed(), CLOSE_MS, 'upgrade answer');
  expect(httpStatus(c.received())).toBe(101);
  return c;
}

/** Sends `bytes` after a completed upgrade; the server must close with `code` and drop the socket. */
async function frameIsRefused(port: number, bytes: Buffer, code: number, what: string): Promise<void> {
  const c = await upgraded(port);
  c.socket.write(bytes);
  await c.untilClosed(CLOSE_MS, what);
  expect(wsCloseCode(c.received()), what).toBe(code);
}

/** Raw bytes on a fresh connection; the server must close it (we never end our side). */
async function bytesAreDropped(port: number, bytes: Buffer | string, what: string, ms = CLOSE_MS) {
  const c = await connectPaced(port);
  c.socket.write(bytes);
  await c.untilClosed(ms, what);
  return c.received();
}

async function attackWebSockets(port: number): Promise<void> {
  // Opened first, checked last: a socket that never finishes its handshake is dropped by the guard's deadline.
  const stalled = await connectPaced(port);
  stalled.socket.write(upgradeRequest(port).slice(0, 40));
  const idle = await connectPaced(port);

  for (const rsv of [0b010, 0b001, 0b011])
    await frameIsRefused(port, clientFrame({ rsv, payload: Uint8Array.of(0x55) }), 1002, `RSV ${rsv}`);
  // The bad frame in the same TCP segment as the handshake: ws parses it right after the upgrade.
  const together = await bytesAreDropped(
    port,
    Buffer.concat([Buffer.from(upgradeRequest(port)), clientFrame({ rsv: 0b011, length: 1 })]),
    'upgrade + RSV frame in one write',
  );
  expect(httpStatus(together)).toBe(101);
  expect(wsCloseCode(together)).toBe(1002);
  await frameIsRefused(port, clientFrame({ opcode: 0x3, payload: Uint8Array.of(0) }), 1002, 'opcode 3');
  await frameIsRefused(
    port,
    clientFrame({ opcode: 0x1, payload: Uint8Array.of(0xff, 0xfe) }),
    1007,
    'bad UTF-8',
  );
  const badClose = Buffer.alloc(2);
  badClose.writeUInt16BE(999);
  await frameIsRefused(port, clientFrame({ opcode: 0x8, payload: badClose }), 1002, 'close code 999');
  // Oversized: refused from the header, before any of the 512 MiB (or just past the limit) is buffered.
  await frameIsRefused(port, clientFrame({ length: 512 * MiB }), 1009, '512 MiB frame header');
  await frameIsRefused(port, clientFrame({ length: MAX_WS_MESSAGE_BYTES + 1 }), 1009, 'limit + 1 header');
  await frameIsRefused(port, clientFrame({ length: 2 ** 63 }), 1009, '2^63 frame header');

  // Not HTTP at all: dropped (binary) or answered 400 (text), never upgraded.
  expect(httpStatus(await bytesAreDropped(port, noise(512), 'binary garbage'))).not.toBe(101);
  expect(httpStatus(await bytesAreDropped(port, 'GARBAGE \x00\x01 nonsense\r\n\r\n', 'text garbage'))).toBe(
    400,
  );
  const badKey = upgradeRequest(port).replace('dGhlIHNhbXBsZSBub25jZQ==', 'not-a-key');
  expect(httpStatus(await bytesAreDropped(port, badKey, 'bad Sec-WebSocket-Key'))).toBe(400);
  const hugeHeader = `GET / HTTP/1.1\r\nHost: x\r\nX-Fill: ${'a'.repeat(64 * 1024)}\r\n\r\n`;
  expect(httpStatus(await bytesAreDropped(port, hugeHeader, '64 KiB header'))).toBe(431);

  // Truncated: a frame that promises 100 bytes and delivers 10, then our end of the socket closes.
  const cut = await upgraded(port);
  cut.socket.end(clientFrame({ length: 100, payload: noise(10) }));
  await cut.untilClosed(CLOSE_MS, 'truncated frame');

  await stalled.untilClosed(WS_HANDSHAKE_TIMEOUT_MS + CLOSE_MS, 'half a handshake, left open');
  await idle.untilClosed(CLOSE_MS, 'a socket that sent nothing');
  expect(httpStatus(stalled.received())).toBeUndefined();
}

async function attackTcp(port: number): Promise<void> {
  // Refused by multistream-select or Noise at once, or (when the bytes only promise more to come) by libp2p's
  // 10 s inbound upgrade timeout; so they run side by side.
  const limit = 10_000 + CLOSE_MS;
  const truncatedHeader = mss('/multistream/1.0.0').subarray(0, 6);
  const hugePrefix = Buffer.concat([varint(2n ** 62n), noise(64)]);
  // Noise negotiated, then a handshake message whose length says 65535, followed by 100 bytes of garbage.
  const noiseLie = Buffer.concat([
    mss('/multistream/1.0.0'),
    mss('/noise'),
    Buffer.from([0xff, 0xff]),
    noise(100, 3),
  ]);
  // What the WebSockets crash needed, sent to the TCP listener instead.
  const wsOnTcp = Buffer.concat([Buffer.from(upgradeRequest(port)), clientFrame({ rsv: 0b011, length: 1 })]);
  await Promise.all([
    bytesAreDropped(port, noise(4096, 7), 'garbage', limit),
    bytesAreDropped(port, truncatedHeader, 'truncated multistream header', limit),
    bytesAreDropped(port, hugePrefix, 'huge length prefix', limit),
    bytesAreDropped(port, noiseLie, 'lying Noise handshake', limit),
    bytesAreDropped(port, wsOnTcp, 'WebSocket upgrade on TCP', limit),
  ]);
}

async function attackWebRtcDirect(port: number): Promise<void> {
  const USERNAME = 0x0006;
  const binding = 0x0001;
  const ufrag = `libp2p+webrtc+v1/${'a1B2'.repeat(8)}`;
  await sendDatagrams(port, [
    new Uint8Array(0),
    noise(1200, 11),
    stunMessage(binding, [], 0xfffc), // length beyond the datagram
    stunMessage(binding, [[USERNAME, Buffer.from('x')]], 0x0010),
    Buffer.concat([stunMessage(binding, []), Buffer.from([0x00, 0x06, 0xff, 0xff, 1, 2, 3, 4])]),
    stunMessage(binding, [[USERNAME, Buffer.from('a\u0000b:c d')]]),
    stunMessage(binding, [[USERNAME, Buffer.from(`${'z'.repeat(300)}:${'z'.repeat(300)}`)]]),
    stunMessage(binding, [[USERNAME, Buffer.from(`${ufrag}:${ufrag}`)]]), // valid: starts an ICE session
    stunMessage(0x0111, [[USERNAME, noise(40, 5)]]), // an error response nobody asked for
  ]);
  // Datagrams get no answer; give the node time to process them before the liveness checks.
  await new Promise((r) => setTimeout(r, 1000));
}

let relay: Target;
let relayAddr: string;
let trainer: Target;
let full: Target;
const locals: NodePeer[] = [];

beforeAll(async () => {
  relay = await spawnTarget('relay', 'relay', {});
  const ws = relay.multiaddrs.find((a) => WebSockets.matches(multiaddr(a)));
  if (ws === undefined) throw new Error(`relay has no WebSockets address: ${relay.multiaddrs.join(' ')}`);
  relayAddr = ws;
  [trainer, full] = await Promise.all([
    spawnTarget('node-trainer peer', 'peer', { relay: relayAddr, host: '0.0.0.0' }),
    spawnTarget('peer with every listener', 'peer', {
      relay: relayAddr,
      host: '127.0.0.1',
      options: { ws: true, webrtcDirect: true },
    }),
  ]);
});

afterAll(async () => {
  await Promise.allSettled(locals.map((p) => p.stop()));
  await Promise.allSettled([trainer, full, relay].filter(Boolean).map((t) => t.stop()));
});

async function localPeer(): Promise<NodePeer> {
  const p = await createNodePeer({ relayAddrs: [relayAddr], host: '127.0.0.1', webrtc: false });
  locals.push(p);
  return p;
}

describe('what a Node peer listens on', () => {
  it("node-trainer's peer: TCP, /p2p-circuit and /webrtc; no WebSockets, no WebRTC-direct", () => {
    const kinds = new Set(loopbackListeners(trainer).map((l) => l.kind));
    expect([...kinds]).toEqual(['tcp']);
    const all = trainer.multiaddrs.map((a) => multiaddr(a));
    const own = all.filter((m) => !m.toString().includes('/p2p-circuit'));
    expect(own.some((m) => WebSockets.matches(m))).toBe(false);
    expect(all.some((m) => Circuit.matches(m) && !WebRTC.matches(m))).toBe(true);
    expect(all.some((m) => WebRTC.matches(m))).toBe(true);
  });

  it('the other targets open the opt-in listeners the attacks below need', () => {
    expect(new Set(loopbackListeners(full).map((l) => l.kind))).toEqual(
      new Set(['tcp', 'ws', 'webrtc-direct']),
    );
    expect(new Set(loopbackListeners(relay).map((l) => l.kind))).toEqual(new Set(['ws', 'webrtc-direct']));
  });
});

describe('raw malformed input on every loopback address', () => {
  for (const which of ['node-trainer peer', 'peer with every listener', 'relay'] as const) {
    it(`${which}: each bad connection is dropped, the process lives`, async () => {
      const t = which === 'relay' ? relay : which === 'node-trainer peer' ? trainer : full;
      const rssBefore = t.rss();
      const listeners = loopbackListeners(t);
      expect(listeners.length).toBeGreaterThan(0);
      try {
        // Side by side: connectPaced keeps the connection rate under libp2p's limit across all of them.
        await Promise.all(
          listeners.map(async (l) => {
            if (l.kind === 'ws') await attackWebSockets(l.port);
            else if (l.kind === 'tcp') await attackTcp(l.port);
            else await attackWebRtcDirect(l.port);
          }),
        );
      } catch (err) {
        assertAlive(t); // a dead target explains a refused connection better than the refusal does
        throw err;
      }
      assertAlive(t);
      // The oversized frames were refused from their headers, not buffered.
      expect(t.rss() - rssBefore).toBeLessThan(64 * MiB);
    });
  }
});

/** Protocols `peerId` said it speaks (identify, once connected). */
async function protocolsOf(p: NodePeer, peerId: string): Promise<string[]> {
  const id = peerIdFromString(peerId);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const known = await p.libp2p.peerStore.get(id).catch(() => undefined);
    if (known !== undefined && known.protocols.length > 0) return known.protocols;
    if (Date.now() > deadline) throw new Error(`no identify from ${peerId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Opens a stream for `protocol` on `conn`, writes `bytes`, half-closes, and gives up on it shortly after. */
async function sendOnStream(conn: Connection, protocol: string, bytes: Uint8Array): Promise<void> {
  let stream: Stream;
  try {
    stream = await conn.newStream(protocol, {
      runOnLimitedConnection: true,
      signal: AbortSignal.timeout(5000),
    });
  } catch {
    return; // refused (e.g. not on a limited connection): nothing reached the handler
  }
  try {
    if (bytes.length > 0) await writeAll(stream, bytes, { signal: AbortSignal.timeout(2000) });
    await stream.close({ signal: AbortSignal.timeout(1000) });
  } catch {
    // a reset from the far end is one of the expected answers
  } finally {
    stream.abort(new Error('done'));
  }
}

/** Protobuf of the WebRTC signalling Message {type = 1 (enum), data = 2 (string)}, length-prefixed. */
function signal(type: number, data: string): Buffer {
  const d = Buffer.from(data);
  const pb = Buffer.concat([Buffer.from([0x08, type, 0x12]), varint(d.length), d]);
  return Buffer.concat([varint(pb.length), pb]);
}

const GARBAGE: readonly Uint8Array[] = [
  new Uint8Array(0),
  noise(1024, 21),
  Buffer.concat([varint(2n ** 40n), noise(32, 22)]), // a length prefix no one should allocate
  signal(0, 'v=0\r\no=- garbage\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=candidate:x\r\n'),
  signal(0, ''),
  signal(2, '{"candidate":"candidate:0 1 UDP 1 not-an-ip 1 typ host","sdpMid":"0"}'),
  signal(7, 'x'),
];

describe('garbage on every stream protocol, from a peer that connected', () => {
  for (const which of ['node-trainer peer', 'peer with every listener', 'relay'] as const) {
    it(`${which}: over a direct connection and over the relay's circuit`, async () => {
      const t = which === 'relay' ? relay : which === 'node-trainer peer' ? trainer : full;
      const attacker = await localPeer();
      const conns: Connection[] = [];
      const tcp = loopbackListeners(t).find((l) => l.kind === 'tcp');
      const ws = loopbackListeners(t).find((l) => l.kind === 'ws');
      const direct = tcp
        ? `/ip4/127.0.0.1/tcp/${tcp.port}/p2p/${t.peerId}`
        : `/ip4/127.0.0.1/tcp/${ws!.port}/ws/p2p/${t.peerId}`;
      conns.push(await attacker.dial(direct));
      if (t !== relay) conns.push(await attacker.dial(attacker.viaRelays(t.peerId, { webrtc: false })[0]!));
      const protocols = await protocolsOf(attacker, t.peerId);
      expect(protocols).toContain('/ipfs/id/1.0.0');
      for (const conn of conns)
        for (const protocol of protocols)
          await Promise.all(GARBAGE.map((bytes) => sendOnStream(conn, protocol, bytes)));
      await new Promise((r) => setTimeout(r, 500));
      assertAlive(t);
    });
  }
});

describe('after all that, every target still serves', () => {
  it('an honest peer fetches the blob from each peer over TCP, WebSockets and the circuit', async () => {
    const honest = await localPeer();
    for (const t of [trainer, full]) {
      const address = Uint8Array.from(Buffer.from(t.blob!, 'hex'));
      const targets = loopbackListeners(t)
        .filter((l) => l.kind !== 'webrtc-direct')
        .map((l) => `/ip4/127.0.0.1/tcp/${l.port}${l.kind === 'ws' ? '/ws' : ''}/p2p/${t.peerId}`)
        .concat(honest.viaRelays(t.peerId, { webrtc: false }).map(String));
      expect(targets.length).toBeGreaterThanOrEqual(t === full ? 3 : 2);
      for (const target of targets) {
        // A fresh connection per transport: close what an earlier fetch opened.
        await honest.libp2p.hangUp(peerIdFromString(t.peerId));
        const got = await honest.fetchBlob(address, [multiaddr(target)], { store: false });
        expect(sameBytes(blobAddress(got.bytes), address), `${t.name} over ${target}`).toBe(true);
        // It came over the transport asked for (the address minus the far end's /p2p/ id).
        expect(got.remoteAddr).toContain(target.slice(0, target.lastIndexOf('/p2p/')));
      }
      assertAlive(t);
    }
    assertAlive(relay);
  });
});
