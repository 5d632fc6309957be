// Starting and stopping a relay: database, runs, Hono app on @hono/node-server with WebSockets, the tick
// timer. `meshtrain-relay run` and the tests both use this, so tests exercise the real server.
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { WebSocketServer } from 'ws';
import { wireLimits } from '@meshtrain/core';
import type { WireLimits } from '@meshtrain/core';
import { createRelayApp } from './app.ts';
import type { MountedRoutes } from './app.ts';
import { Relay } from './relay.ts';
import type { RelayLog } from './relay.ts';
import type { Clock } from './run-host.ts';
import { CLOSE } from './session.ts';
import { RelayStore } from './store.ts';

export interface RelayServerOptions {
  /** Directory of relay.db (created if missing), or ':memory:' for a throwaway relay. */
  dataDir: string;
  /** Default 127.0.0.1: exposing the relay is an explicit choice (--host 0.0.0.0). */
  host?: string;
  /** Default 0: any free port (the chosen one is in the result). */
  port?: number;
  tickMs?: number;
  graceMs?: number;
  joinTimeoutMs?: number;
  /** Bytes a connection may send before its Join is acknowledged (default 16 KiB). */
  preJoinMaxBytes?: number;
  /** Connections waiting to join, overall and per source address (defaults 2048 and 256). */
  maxUnjoined?: number;
  maxUnjoinedPerAddress?: number;
  /** Least time between two StateSnapshot broadcasts of one run (default 100 ms). */
  snapshotIntervalMs?: number;
  /** Frames per second one connection may send on average (default 100, bursts of twice that). */
  maxFramesPerSecond?: number;
  limits?: Partial<WireLimits>;
  /** Keys allowed to create runs over the admin API (empty: any signed request). */
  runCreators?: readonly string[];
  /** Largest model a run may have, in parameters. */
  maxModelParams?: number;
  /** Live runs one key may create over the admin API, and all keys together. */
  maxRunsPerCreator?: number;
  maxRuns?: number;
  clock?: Clock;
  log?: RelayLog;
  /** Route modules to mount beside the relay's own, built once the Relay exists. */
  extraRoutes?: (relay: Relay) => readonly MountedRoutes[] | Promise<readonly MountedRoutes[]>;
}

export interface RunningRelay {
  relay: Relay;
  store: RelayStore;
  server: Server;
  host: string;
  port: number;
  /** http://host:port */
  url: string;
  close(): Promise<void>;
}

export async function startRelayServer(opts: RelayServerOptions): Promise<RunningRelay> {
  const limits = wireLimits(opts.limits);
  const store = new RelayStore(opts.dataDir === ':memory:' ? ':memory:' : opts.dataDir);
  const relay = new Relay({
    store,
    limits,
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.tickMs !== undefined ? { tickMs: opts.tickMs } : {}),
    ...(opts.graceMs !== undefined ? { graceMs: opts.graceMs } : {}),
    ...(opts.joinTimeoutMs !== undefined ? { joinTimeoutMs: opts.joinTimeoutMs } : {}),
    ...(opts.preJoinMaxBytes !== undefined ? { preJoinMaxBytes: opts.preJoinMaxBytes } : {}),
    ...(opts.maxUnjoined !== undefined ? { maxUnjoined: opts.maxUnjoined } : {}),
    ...(opts.maxUnjoinedPerAddress !== undefined
      ? { maxUnjoinedPerAddress: opts.maxUnjoinedPerAddress }
      : {}),
    ...(opts.snapshotIntervalMs !== undefined ? { snapshotIntervalMs: opts.snapshotIntervalMs } : {}),
    ...(opts.maxFramesPerSecond !== undefined ? { maxFramesPerSecond: opts.maxFramesPerSecond } : {}),
    ...(opts.runCreators ? { runCreators: opts.runCreators } : {}),
    ...(opts.maxModelParams !== undefined ? { maxModelParams: opts.maxModelParams } : {}),
    ...(opts.maxRunsPerCreator !== undefined ? { maxRunsPerCreator: opts.maxRunsPerCreator } : {}),
    ...(opts.maxRuns !== undefined ? { maxRuns: opts.maxRuns } : {}),
    ...(opts.log ? { log: opts.log } : {}),
  });
  const extra = opts.extraRoutes ? await opts.extraRoutes(relay) : [];
  const app = createRelayApp(relay, extra);
  // Frames between maxFrameBytes and twice that reach the codec and get a typed `wire_oversized` reply;
  // only beyond that does ws cut the connection (close 1009) without reading the message into memory.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 2 * limits.maxFrameBytes });
  const host = opts.host ?? '127.0.0.1';
  let onListenError: (e: Error) => void = () => {};
  const server = await new Promise<Server>((resolve, reject) => {
    onListenError = reject;
    const s = serve(
      { fetch: app.fetch, hostname: host, port: opts.port ?? 0, websocket: { server: wss } },
      () => resolve(s as Server),
    ) as Server;
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  // After listen, a server 'error' (e.g. EMFILE while accepting) with no listener would end the process.
  server.off('error', onListenError);
  server.on('error', (e) => relay.log.warn(`http server: ${e.message}`));
  relay.start();
  let closing: Promise<void> | undefined;
  return {
    relay,
    store,
    server,
    host,
    port,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close() {
      closing ??= (async () => {
        relay.stop();
        relay.closeAll(CLOSE.shutdown, 'relay shutting down');
        // Give close frames a moment to go out, then cut whatever is left.
        if (wss.clients.size > 0) await new Promise((r) => setTimeout(r, 100));
        for (const ws of wss.clients) ws.terminate();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        relay.stop();
        store.close();
      })();
      return closing;
    },
  };
}
