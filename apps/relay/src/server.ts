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
import type { RelayOptions } from './relay.ts';
import { DEFAULT_HOST } from './defaults.ts';
import { CLOSE } from './session.ts';
import { RelayStore } from './store.ts';
import { relayServices } from './wiring.ts';

/** The Relay's own options (relay.ts RelayOptions), plus where to listen and what to mount. */
export interface RelayServerOptions extends Omit<RelayOptions, 'store' | 'limits'> {
  /** Directory of relay.db (created if missing), or ':memory:' for a throwaway relay. */
  dataDir: string;
  /** Default DEFAULT_HOST (loopback): exposing the relay is an explicit choice (--host 0.0.0.0). */
  host?: string;
  /** Default 0: any free port (the chosen one is in the result). */
  port?: number;
  limits?: Partial<WireLimits>;
  /**
   * Mount the relay's services beside its own routes (wiring.ts: data provider, checkpoint store, /metrics,
   * web app), kept under `dataDir` (which must then be a directory).
   */
  services?: boolean;
  /** Route modules to mount beside the relay's own (and its services), built once the Relay exists. */
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
  // The store's warnings come from its checkpoint thread, so never before `relay` below exists.
  const store = new RelayStore(opts.dataDir === ':memory:' ? ':memory:' : opts.dataDir, {
    warn: (m) => relay.log.warn(`store: ${m}`),
  });
  const {
    dataDir: _dir,
    host: _host,
    port: _port,
    limits: _limits,
    extraRoutes: _extra,
    services: _services,
    ...relayOptions
  } = opts;
  let relay: Relay;
  try {
    relay = new Relay({ ...relayOptions, store, limits });
  } catch (e) {
    // Also ends the checkpoint thread, whose warnings would have no relay to go to.
    await store.close();
    throw e;
  }

  const extra = [
    ...(opts.services ? relayServices(relay, opts.dataDir) : []),
    ...(opts.extraRoutes ? await opts.extraRoutes(relay) : []),
  ];
  const app = createRelayApp(relay, extra);
  // Frames between maxFrameBytes and twice that reach the codec and get a typed `wire_oversized` reply;
  // only beyond that does ws cut the connection (close 1009) without reading the message into memory.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 2 * limits.maxFrameBytes });
  const host = opts.host ?? DEFAULT_HOST;
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
        await store.close();
      })();
      return closing;
    },
  };
}
