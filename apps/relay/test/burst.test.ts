// Many clients acting at once: each joiner gets the state once, then deltas coalesced per 100 ms, so 150
// joins cost each client one snapshot and ~100 bytes per later join, instead of the full state per change
// (which grows quadratically with the clients).
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
  it('150 concurrent joins all land, each client gets one snapshot, and replays to the relay state', async () => {
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
    for (const c of clients) expect(c.snapshots()).toBe(1);
    // The last joiner's snapshot holds 150 members (~22 KB); later joins reach each client as ~100 B deltas.
    expect(bytes).toBeLessThan(n * 60_000);
    const host = relay.relay.run('burst')!;
    for (const c of clients) {
      expect(c.gaps).toBe(0);
      expect(c.seq).toBe(host.seq);
      expect(JSON.stringify(c.state)).toBe(JSON.stringify(host.state));
    }
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
      const before = watcher.updates();
      clients.push(await TestClient.joined(r.url, 'flood', identity(3002)));
      await watcher.until(() => watcher.updates() > before, 5000, 'a state update for the watcher');
    } finally {
      await r.close();
    }
  });
});
