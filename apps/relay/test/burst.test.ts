// Many clients acting at once: broadcasts are throttled per run, so 150 joins cost a bounded number of
// full-state snapshots per client instead of one per join (which grows quadratically with the clients).
import { afterAll, describe, expect, it } from 'vitest';
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
});
