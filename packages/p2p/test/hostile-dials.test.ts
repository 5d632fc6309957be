// The other way round from hostile-listeners.test.ts: a Node peer dials servers that answer WebSocket
// handshakes wrongly (a relay address from a relay's API is input too). Every failure must come back as a
// typed error from the call that dialled, never as an unhandled rejection: on Node 22+ a failed WebSocket dial
// rejects with a non-Error ErrorEvent, and an un-awaited one once ended the process.
import { createHash } from 'node:crypto';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { multiaddr } from '@multiformats/multiaddr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DialError,
  FetchFailedError,
  RelayUnreachableError,
  blobAddress,
  createNodePeer,
  createRelayNode,
} from '../src/index.ts';
import type { NodePeer, RelayNode } from '../src/index.ts';
import { clientFrame } from './helpers/raw-input.ts';

type Answer = (socket: Socket, request: string) => void;

function accept(key: string): string {
  return createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC11807`).digest('base64');
}

/** Server frames are not masked: strip the mask bit and the 4 mask bytes clientFrame adds. */
function serverFrame(opts: Parameters<typeof clientFrame>[0]): Buffer {
  const f = clientFrame(opts);
  const lenByte = f[1]! & 0x7f;
  const headLen = 2 + (lenByte === 126 ? 2 : lenByte === 127 ? 8 : 0);
  const out = Buffer.concat([f.subarray(0, headLen), f.subarray(headLen + 4)]);
  out[1] = out[1]! & 0x7f;
  // clientFrame masked the payload; unmask it again (mask bytes 0x11 0x22 0x33 0x44).
  const mask = f.subarray(headLen, headLen + 4);
  for (let i = headLen; i < out.length; i++) out[i] = out[i]! ^ mask[(i - headLen) % 4]!;
  return out;
}

const answers: Record<string, Answer> = {
  'closes at once': (s) => s.destroy(),
  'answers 400': (s) => s.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'),
  'answers garbage': (s) => s.end(Buffer.from([0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3])),
  'upgrades with a wrong accept key': (s) =>
    s.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Accept: d3Jvbmc=\r\n\r\n',
    ),
  'upgrades, then sends an RSV2/RSV3 frame': (s, req) => {
    const key = /Sec-WebSocket-Key: (\S+)/i.exec(req)?.[1] ?? '';
    s.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept(key)}\r\n\r\n`,
    );
    s.write(serverFrame({ rsv: 0b011, payload: Uint8Array.of(1, 2, 3) }));
  },
  'upgrades, then declares a 2^62-byte frame': (s, req) => {
    const key = /Sec-WebSocket-Key: (\S+)/i.exec(req)?.[1] ?? '';
    s.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept(key)}\r\n\r\n`,
    );
    s.write(serverFrame({ length: 2 ** 62 }));
  },
};

const servers: Server[] = [];
const ports = new Map<string, number>();
let relay: RelayNode;
let peer: NodePeer;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => {
  unhandled.push(reason);
};

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  for (const [name, answer] of Object.entries(answers)) {
    const server = createServer((socket) => {
      socket.on('error', () => {});
      let req = '';
      socket.on('data', (d: Buffer) => {
        const had = req.includes('\r\n\r\n');
        req += d.toString('latin1');
        if (!had && req.includes('\r\n\r\n')) answer(socket, req);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const addr = server.address();
    if (addr === null || typeof addr === 'string') throw new Error('no port');
    ports.set(name, addr.port);
  }
  relay = await createRelayNode({ host: '127.0.0.1', webrtcDirect: false });
  peer = await createNodePeer({
    relayAddrs: relay.multiaddrs(),
    host: '127.0.0.1',
    tcp: false,
    webrtc: false,
  });
});

afterAll(async () => {
  await Promise.allSettled([peer?.stop(), relay?.stop()]);
  for (const s of servers) s.close();
  process.off('unhandledRejection', onUnhandled);
});

/** Some valid PeerId nobody here has (with an id we are connected to, libp2p reuses that connection). */
const STRANGER = '12D3KooWNM1hZbYCqVsP7tzQjTfAHdwrKvMkJgzBTFa4JaXPEuZD';

/** A `/ws` multiaddr for the server `name`. */
function wsAddr(name: string): string {
  return `/ip4/127.0.0.1/tcp/${ports.get(name)}/ws/p2p/${STRANGER}`;
}

describe('dialling hostile WebSocket servers', () => {
  for (const name of Object.keys(answers)) {
    it(`a server that ${name}: a typed error from each dialling call, nothing unhandled`, async () => {
      await expect(peer.dial(wsAddr(name), { attemptTimeoutMs: 3000 })).rejects.toBeInstanceOf(DialError);
      await expect(peer.connectRelays([wsAddr(name)], 3000)).rejects.toBeInstanceOf(RelayUnreachableError);
      const failed: unknown = await peer
        .fetchBlob(blobAddress(Uint8Array.of(1)), [multiaddr(wsAddr(name))], { timeoutMs: 3000 })
        .catch((err: unknown) => err);
      expect(failed).toBeInstanceOf(FetchFailedError);
      expect((failed as FetchFailedError).failures[0]?.error).toBeInstanceOf(DialError);
      await expect(
        createNodePeer({ relayAddrs: [wsAddr(name)], host: '127.0.0.1', tcp: false, webrtc: false }),
      ).rejects.toBeInstanceOf(RelayUnreachableError);
    });
  }

  it('left no unhandled rejection behind, and the peer still works', async () => {
    await new Promise((r) => setTimeout(r, 500));
    expect(unhandled).toEqual([]);
    expect((await peer.circuitAddress(10_000)).toString()).toContain('/p2p-circuit');
  });
});
