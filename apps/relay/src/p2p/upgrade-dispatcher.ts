// One public port for Hono and libp2p (docs/architecture.md "Runtime notes"). @libp2p/websockets always runs
// its own HTTP server and answers plain HTTP with 400, so it cannot share Hono's server directly. Instead
// libp2p listens on a loopback port, and the public server's 'upgrade' event is dispatched by path:
//
//   GET / + Upgrade: websocket   → raw TCP splice to libp2p's port (request line, headers and the bytes
//                                  already read are replayed, then both sockets are piped)
//   any other upgrade (/ws/…)    → Hono's own upgrade handling (node-server's `websocket` option)
//
// Hono's node-server rejects an upgrade it has no route for only when it is the server's sole 'upgrade'
// listener (it checks listenerCount), so the dispatcher takes its listeners over instead of sitting next to
// them. Caveat: libp2p sees every peer as 127.0.0.1, so per-IP limits inside libp2p do not work; in
// production a TLS proxy (wss) sits in front anyway.
import type { IncomingMessage, Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';

export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface UpgradeDispatcherOptions {
  /** libp2p's WebSockets listener port on `libp2pHost`. */
  libp2pPort: number;
  libp2pHost?: string;
  /**
   * Handler for every other upgrade. Default: the 'upgrade' listeners the server had when the dispatcher
   * was attached (node-server's, when created with the `websocket` option); with none, 404.
   */
  honoUpgrade?: UpgradeListener;
  /** Which upgrades go to libp2p (default: path `/`, what libp2p's WebSockets dialer requests). */
  isLibp2p?: (req: IncomingMessage) => boolean;
}

export interface UpgradeDispatcher {
  /** Upgrades spliced to libp2p so far (for tests and metrics). */
  readonly spliced: number;
  /** Restores the server's previous 'upgrade' listeners. */
  detach(): void;
}

function defaultIsLibp2p(req: IncomingMessage): boolean {
  const url = req.url ?? '';
  return url === '/' || url.startsWith('/?');
}

function reject(socket: Duplex, status: number, reason: string): void {
  if (socket.writable)
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  socket.destroy();
}

/** Replays the upgrade request to libp2p and pipes the two sockets together. */
function splice(req: IncomingMessage, client: Duplex, head: Buffer, host: string, port: number): void {
  const upstream: Socket = connect({ host, port });
  let connected = false;
  const close = (): void => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  client.on('close', () => upstream.destroy());
  upstream.on('error', () => {
    if (!connected) reject(client, 502, 'Bad Gateway');
    close();
  });
  upstream.on('close', () => client.destroy());
  upstream.on('connect', () => {
    connected = true;
    upstream.setNoDelay(true);
    const lines = [`${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}`];
    // rawHeaders keeps the client's names, order and duplicates: libp2p sees the request as sent.
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
      lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) upstream.write(head);
    client.pipe(upstream);
    upstream.pipe(client);
  });
}

/**
 * Installs the dispatcher on `server` (call it after the Hono server is created, before traffic).
 * Returns a handle whose `detach()` restores the previous listeners.
 */
export function attachUpgradeDispatcher(
  server: Server,
  options: UpgradeDispatcherOptions,
): UpgradeDispatcher {
  const previous = server.listeners('upgrade') as UpgradeListener[];
  const host = options.libp2pHost ?? '127.0.0.1';
  const isLibp2p = options.isLibp2p ?? defaultIsLibp2p;
  const fallback: UpgradeListener =
    options.honoUpgrade ??
    ((req, socket, head) => {
      if (previous.length === 0) return reject(socket, 404, 'Not Found');
      for (const l of previous) l.call(server, req, socket, head);
    });
  let spliced = 0;
  const dispatch: UpgradeListener = (req, socket, head) => {
    // A socket error after we return must not become an uncaught exception that kills the relay.
    socket.on('error', () => socket.destroy());
    if (isLibp2p(req)) {
      spliced += 1;
      splice(req, socket, head, host, options.libp2pPort);
    } else fallback(req, socket, head);
  };
  server.removeAllListeners('upgrade');
  server.on('upgrade', dispatch);
  return {
    get spliced() {
      return spliced;
    },
    detach() {
      server.off('upgrade', dispatch);
      for (const l of previous) server.on('upgrade', l);
    },
  };
}
