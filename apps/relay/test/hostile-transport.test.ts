// Unauthenticated input against the relay's sockets: malformed WebSocket frames on both WebSocket paths (the
// libp2p bridge at `/` and the coordinator at `/ws/runs/:id`), oversized messages, and what a connection
// may cost before its Join. The process-level cases run against the real bin (with its libp2p node), as an
// attacker would reach it; nothing but raw TCP on the attacking side.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodePeer } from '@meshtrain/p2p';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import { fastRunToml, hexKey, identity, TestClient } from './helpers/relay-fixtures.ts';
import { frameHead, rawUpgrade, spawnRelay } from './helpers/relay-process.ts';
import type { RawUpgrade, RelayProcess } from './helpers/relay-process.ts';

const RUN = 'hostile';
const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-hostile-'));
let relay: RelayProcess;

beforeAll(async () => {
  writeFileSync(join(dir, 'run.toml'), fastRunToml(RUN));
  relay = await spawnRelay(['--config', join(dir, 'run.toml'), '--data-dir', join(dir, 'data')]);
});

afterAll(async () => {
  await relay?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function healthy(url: string): Promise<boolean> {
  const res = await fetch(`${url}/healthz`);
  return res.status === 200 && ((await res.json()) as { ok?: boolean }).ok === true;
}

/** Sends `bytes` after the upgrade and waits until the relay closes the connection. */
async function sendAndWaitClose(u: RawUpgrade, bytes: Buffer): Promise<void> {
  u.socket.write(bytes);
  await u.closed;
}

describe('malformed frames end one connection, never the relay process', () => {
  for (const path of ['/', `/ws/runs/${RUN}`]) {
    it(`RSV2/RSV3 bits on ${path}: that socket is closed with 1002 and the relay keeps serving`, async () => {
      // RSV2 alone, RSV3 alone, both: each is a protocol error without a negotiated extension.
      for (const rsv of [0b010, 0b001, 0b011]) {
        const u = await rawUpgrade(relay.port, path);
        expect(u.status).toBe(101);
        await sendAndWaitClose(u, Buffer.concat([frameHead({ rsv, length: 1 }), Buffer.from([0x55])]));
        expect(u.closeCode()).toBe(1002);
      }
      expect(relay.alive()).toBe(true);
      expect(await healthy(relay.url)).toBe(true);
    });
  }

  it('an unknown opcode on the libp2p path is a protocol error too', async () => {
    const u = await rawUpgrade(relay.port, '/');
    await sendAndWaitClose(u, Buffer.concat([frameHead({ opcode: 0x3, length: 1 }), Buffer.from([0])]));
    expect(u.closeCode()).toBe(1002);
    expect(relay.alive()).toBe(true);
  });

  it('a message declared beyond the libp2p limit is refused from its header (1009)', async () => {
    const u = await rawUpgrade(relay.port, '/');
    await sendAndWaitClose(u, frameHead({ length: 512 * MiB }));
    expect(u.closeCode()).toBe(1009);
    expect(relay.alive()).toBe(true);
  });

  it('a malformed HTTP request is answered 400 and closed', async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const s = connect(relay.port, '127.0.0.1', () => s.write('GARBAGE \x00\x01 nonsense\r\n\r\n'));
      let got = '';
      s.on('data', (d: Buffer) => (got += d.toString('latin1')));
      s.on('close', () => resolve(got));
      s.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(relay.alive()).toBe(true);
  });

  it('libp2p peers still reach the relay through the same port afterwards', async () => {
    const addr = /libp2p (\/ip4\/\S+)/.exec(relay.out())?.[1];
    expect(addr).toBeDefined();
    const peer = await createNodePeer({ relayAddrs: [addr!], host: '127.0.0.1', tcp: false, ws: false });
    try {
      expect((await peer.circuitAddress(20_000)).toString()).toContain('/p2p-circuit/');
    } finally {
      await peer.stop();
    }
  });
});

describe('before its Join a connection costs a few KiB', () => {
  it('20 sockets declaring 128 MiB frames are cut (1009) without the relay buffering them', async () => {
    const before = relay.rss();
    const sockets = await Promise.all(
      Array.from({ length: 20 }, () => rawUpgrade(relay.port, `/ws/runs/${RUN}`)),
    );
    expect(sockets.every((u) => u.status === 101)).toBe(true);
    // Each sends the head of a 128 MiB frame and 8 MiB of it: 160 MiB the relay would hold if it buffered.
    const payload = Buffer.alloc(8 * MiB, 0x42);
    await Promise.all(
      sockets.map((u) => sendAndWaitClose(u, Buffer.concat([frameHead({ length: 128 * MiB }), payload]))),
    );
    for (const u of sockets) expect(u.closeCode()).toBe(1009);
    expect(relay.alive()).toBe(true);
    expect(relay.rss() - before).toBeLessThan(64 * MiB);
    expect(await healthy(relay.url)).toBe(true);
  });
});

describe('connections waiting to join are bounded', () => {
  let r: RunningRelay;
  beforeAll(async () => {
    r = await startRelayServer({
      dataDir: ':memory:',
      maxUnjoined: 3,
      maxUnjoinedPerAddress: 2,
      joinTimeoutMs: 60_000,
    });
    r.relay.createRun({ toml: fastRunToml('cap'), mainAuthority: hexKey(identity(1)) });
  });
  afterAll(async () => {
    await r.close();
  });

  /** Upgrades from `localAddress` until the answer is `status` (a released slot is freed on the server's close event). */
  async function until(status: number, localAddress: string): Promise<RawUpgrade> {
    for (let i = 0; ; i++) {
      const u = await rawUpgrade(r.port, '/ws/runs/cap', { localAddress });
      if (u.status === status || i === 50) return u;
      u.socket.destroy();
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  it('per address and overall; a slot comes back when its socket closes or its client joins', async () => {
    const a1 = await rawUpgrade(r.port, '/ws/runs/cap', { localAddress: '127.0.0.1' });
    const a2 = await rawUpgrade(r.port, '/ws/runs/cap', { localAddress: '127.0.0.1' });
    expect([a1.status, a2.status]).toEqual([101, 101]);
    const a3 = await rawUpgrade(r.port, '/ws/runs/cap', { localAddress: '127.0.0.1' });
    expect(a3.status).toBe(503);
    const b1 = await rawUpgrade(r.port, '/ws/runs/cap', { localAddress: '127.0.0.2' });
    expect(b1.status).toBe(101);
    const c1 = await rawUpgrade(r.port, '/ws/runs/cap', { localAddress: '127.0.0.3' });
    expect(c1.status).toBe(503);

    // A closed socket gives its slot back: a client from that address joins, and joining gives it back too.
    a1.socket.destroy();
    await until(101, '127.0.0.1').then((u) => u.socket.destroy());
    const joined = await TestClient.joined(r.url, 'cap', identity(2));
    const again = await until(101, '127.0.0.3');
    expect(again.status).toBe(101);
    for (const u of [a2, a3, b1, c1, again]) u.socket.destroy();
    joined.close();
  });
});
