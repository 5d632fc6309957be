// The training client's RelayLink against a real relay behind a TCP proxy that drops, then refuses, every
// connection for a while: the link keeps exactly one connection attempt at a time, backs off (so the
// attempts stay few), and re-joins by itself once the relay is reachable again, keeping its slot.
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECONNECT_BASE_MS, RECONNECT_MAX_MS, RelayLink, reconnectDelay } from '@meshtrain/client';
import type { CoordinatorState } from '@meshtrain/core';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import { fastRunToml, hexKey, identity } from './helpers/relay-fixtures.ts';

const RUN = 'reconnect';
let relay: RunningRelay;

/** A TCP proxy to the relay that forwards, drops (accepts and closes at once) or refuses connections. */
class FlakyProxy {
  mode: 'forward' | 'drop' = 'forward';
  accepted = 0;
  open = 0;
  maxOpen = 0;
  port = 0;
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private readonly target: number;

  constructor(target: number) {
    this.target = target;
  }

  async listen(port = 0): Promise<void> {
    const server = createServer((client) => {
      this.accepted++;
      this.open++;
      this.maxOpen = Math.max(this.maxOpen, this.open);
      this.sockets.add(client);
      client.once('close', () => {
        this.open--;
        this.sockets.delete(client);
      });
      client.on('error', () => client.destroy());
      if (this.mode === 'drop') return void client.destroy();
      const upstream = connect(this.target, '127.0.0.1');
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /** Stops listening (new connections are refused) and cuts the open ones. */
  async refuse(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
    this.server = null;
  }

  cut(): void {
    for (const s of this.sockets) s.destroy();
  }
}

let proxy: FlakyProxy;

beforeAll(async () => {
  relay = await startRelayServer({ dataDir: ':memory:', tickMs: 50, graceMs: 60_000 });
  relay.relay.createRun({
    toml: fastRunToml(RUN, { init_min_clients: 5, min_clients: 5 }),
    mainAuthority: hexKey(identity(1)),
  });
  proxy = new FlakyProxy(relay.port);
  await proxy.listen();
});

afterAll(async () => {
  await proxy.refuse().catch(() => undefined);
  await relay.close();
});

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(pred: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('reconnect backoff', () => {
  it('doubles from RECONNECT_BASE_MS to RECONNECT_MAX_MS, jittered within the upper half', () => {
    for (let n = 1; n <= 20; n++) {
      const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** (n - 1));
      expect(reconnectDelay(n, 0)).toBe(ceiling / 2);
      expect(reconnectDelay(n, 0.999999)).toBeLessThanOrEqual(ceiling);
    }
    expect(reconnectDelay(50, 0.5)).toBeLessThanOrEqual(RECONNECT_MAX_MS);
  });
});

describe('RelayLink across an outage', () => {
  it('one attempt at a time, few of them, and it re-joins into its slot when the relay is back', async () => {
    const id = identity(700);
    const link = new RelayLink({
      relayUrl: `http://127.0.0.1:${proxy.port}`,
      runId: RUN,
      secretKey: id.secretKey,
      deviceKind: 'test',
    });
    const states: CoordinatorState[] = [];
    link.onState((s) => states.push(s));
    try {
      await link.connect();
      await until(() => states.length > 0, 5000, 'a state');
      expect(link.stats.connects).toBe(1);
      expect(states.at(-1)!.members.map((m) => m.id)).toContain(hexKey(id));

      // The relay's side drops every connection right after accepting it.
      proxy.mode = 'drop';
      proxy.maxOpen = 0;
      const before = proxy.accepted;
      proxy.cut();
      await sleep(4000);
      const dropped = proxy.accepted - before;
      // Backoff from 250 ms, doubling: a handful of attempts in 4 s (overlapping loops made thousands).
      expect(dropped).toBeGreaterThanOrEqual(2);
      expect(dropped).toBeLessThanOrEqual(8);
      expect(proxy.maxOpen).toBeLessThanOrEqual(1);

      // Then nothing listens at all for a while.
      await proxy.refuse();
      const refusedFrom = link.stats.connects;
      await sleep(3000);
      expect(link.stats.connects - refusedFrom).toBeLessThanOrEqual(4);

      // The relay is reachable again on the same address: the link comes back by itself.
      proxy.mode = 'forward';
      await proxy.listen(proxy.port);
      const seen = states.length;
      await until(() => link.isJoined && states.length > seen, 40_000, 'the link to re-join');
      expect(link.stats.connects).toBeLessThanOrEqual(16);
      // Its slot survived (the grace period outlasted the outage), and it is the run's one live session.
      expect(relay.relay.run(RUN)!.state.members.map((m) => m.id)).toContain(hexKey(id));
      expect(relay.relay.sessionsOf(RUN).map((s) => s.identity)).toEqual([hexKey(id)]);
      // Requests flow again: a parameter hash for an epoch that has not ended is refused, by the relay.
      await expect(link.reportParamHash(99, 1, new Uint8Array(32))).rejects.toThrow(/stale/);
    } finally {
      link.close();
    }
    // Closed: no further attempts.
    const closedAt = link.stats.connects;
    await sleep(1500);
    expect(link.stats.connects).toBe(closedAt);
  });

  it('a first connection that fails is reported to the caller, and nothing retries behind its back', async () => {
    const link = new RelayLink({
      relayUrl: relay.url,
      runId: 'no-such-run',
      secretKey: identity(701).secretKey,
      deviceKind: 'test',
    });
    await expect(link.connect()).rejects.toThrow(/4404|unknown/);
    await sleep(1500);
    expect(link.stats.connects).toBe(1);
    link.close();
  });
});
