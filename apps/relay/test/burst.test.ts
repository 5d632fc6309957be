// Many clients acting at once: broadcasts are throttled per run, so 150 joins cost a bounded number of
// full-state snapshots per client instead of one per join (which grows quadratically with the clients).
import { afterAll, describe, expect, it } from 'vitest';
import { encodeParamHash } from '@meshtrain/core';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import { fastRunToml, hexKey, identity, TestClient } from './helpers/relay-fixtures.ts';

let relay: RunningRelay | undefined;
const clients: TestClient[] = [];

afterAll(async () => {
  for (const c of clients) c.close();
  await relay?.close();
});

describe('join burst', () => {
  it('150 concurrent joins all land, each client gets few snapshots, and the latest state', async () => {
    const n = 150;
    relay = await startRelayServer({ dataDir: ':memory:', tickMs: 500 });
    relay.relay.createRun({
      toml: fastRunToml('burst', { init_min_clients: n + 1 }),
      mainAuthority: hexKey(identity(1)),
    });
    let bytes = 0;
    relay.relay.hooks.bytesOut = (b) => (bytes += b);
    clients.push(
      ...(await Promise.all(
        Array.from({ length: n }, (_, i) => TestClient.joined(relay!.url, 'burst', identity(2000 + i))),
      )),
    );
    await Promise.all(
      clients.map((c) => c.until(() => c.state!.members.length === n, 30_000, 'all members')),
    );
    const perClient = clients.reduce((a, c) => a + c.snapshots(), 0) / n;
    // One per join would average n/2 = 75; throttled it is a handful (how many depends on timing).
    expect(perClient).toBeLessThan(30);
    expect(bytes).toBeLessThan(n * 30 * 40_000);
  });

  it('a connection flooding frames is rate limited and closed; the others are served', async () => {
    const r = await startRelayServer({ dataDir: ':memory:', tickMs: 500, maxFramesPerSecond: 20 });
    try {
      r.relay.createRun({
        toml: fastRunToml('flood', { init_min_clients: 50 }),
        mainAuthority: hexKey(identity(1)),
      });
      const watcher = await TestClient.joined(r.url, 'flood', identity(3000));
      const flooder = await TestClient.joined(r.url, 'flood', identity(3001));
      clients.push(watcher, flooder);
      for (let i = 0; i < 200; i++)
        flooder.send(
          encodeParamHash({ runId: 'flood', epoch: 5, step: 1, hash: new Uint8Array(32).fill(i) }),
        );
      await flooder.until(() => flooder.closed !== undefined, 10_000, 'the flooder to be closed');
      expect(flooder.closed!.code).toBe(4000);
      expect(flooder.errors().filter((e) => e.code === 'rate_limited')).toHaveLength(3);
      const before = watcher.snapshots();
      clients.push(await TestClient.joined(r.url, 'flood', identity(3002)));
      await watcher.until(() => watcher.snapshots() > before, 5000, 'a snapshot for the watcher');
    } finally {
      await r.close();
    }
  });
});
