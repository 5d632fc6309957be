// One public port for Hono and libp2p (docs/architecture.md "Runtime notes"). @libp2p/websockets always runs
// its own HTTP server and answers plain HTTP with 400, so it cannot share Hono's server directly. Instead
// libp2p listens on a loopback port, and the public server's 'upgrade' event is dispatched by path:
//
//   GET / + Upgrade: websocket   → bridged to libp2p's port, message by message (see `bridge`)
//   any other upgrade (/ws/…)    → Hono's own upgrade handling (node-server's `websocket` option)
//
// The bridge terminates the peer's WebSocket here, with our own `ws` server, instead of splicing raw TCP
// bytes through: libp2p's listener attaches no 'error' handler to its WebSockets, so one malformed frame
// (RSV bits set, a bad opcode, an oversized length) that reached it would end the whole relay process, and
// it accepts messages of up to ws's default 100 MiB. Here every frame is parsed by a socket that has error
// handlers and a message size limit; libp2p only ever sees well-formed frames from our loopback client.
//
// Hono's node-server rejects an upgrade it has no route for only when it is the server's sole 'upgrade'
// listener (it checks listenerCount), so the dispatcher takes its listeners over instead of sitting next to
// them. Caveat: libp2p sees every peer as 127.0.0.1, so per-IP limits inside libp2p do not work; in
// production a TLS proxy (wss) sits in front anyway.
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { DEFAULT_MAX_BRIDGED } from '../defaults.ts';

export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * Largest WebSocket message a libp2p peer may send through the bridge. libp2p's WebSockets connection sends
 * one message per chunk of its encrypted stream, and a Noise frame is at most 64 KiB, so 1 MiB leaves a wide
 * margin while keeping what one unauthenticated connection can make the relay buffer small.
 */
export const LIBP2P_MAX_MESSAGE_BYTES = 1024 * 1024;
/**
 * Bytes queued toward one side before the other side's reads are paused (backpressure), as libp2p's own
 * WebSockets transport does at 4 MiB.
 */
const HIGH_WATER_BYTES = 4 * 1024 * 1024;
export { DEFAULT_MAX_BRIDGED } from '../defaults.ts';

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
  /** Bridged connections open at once; more are answered 503 (default DEFAULT_MAX_BRIDGED). */
  maxConnections?: number;
  /** Called when a bridged connection fails (malformed frame, oversized message, socket error). */
  onError?: (err: Error) => void;
}

export interface UpgradeDispatcher {
  /** Upgrades handed to libp2p so far (for tests and metrics). */
  readonly spliced: number;
  /** Bridged connections open now. */
  readonly open: number;
  /** Restores the server's previous 'upgrade' listeners and closes the bridged connections. */
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

/** A close code one side reported that may be sent on to the other (1005/1006/1015 are never sent). */
function forwardableCode(code: number): number {
  return code === 1000 ||
    (code >= 1001 && code <= 1003) ||
    (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999)
    ? code
    : 1000;
}

/** Forwards messages both ways with backpressure; either side closing or failing closes the other. */
function pipeMessages(a: WebSocket, b: WebSocket, onError: (err: Error) => void): void {
  const forward = (from: WebSocket, to: WebSocket): void => {
    from.on('message', (data, isBinary) => {
      if (to.readyState !== WebSocket.OPEN) return;
      to.send(data, { binary: isBinary }, () => {
        if (from.isPaused && to.bufferedAmount < HIGH_WATER_BYTES) from.resume();
      });
      if (to.bufferedAmount >= HIGH_WATER_BYTES) from.pause();
    });
    from.on('close', (code) => {
      if (to.readyState === WebSocket.OPEN) to.close(forwardableCode(code));
      else to.terminate();
    });
    from.on('error', (err) => {
      onError(err);
      from.terminate();
      to.terminate();
    });
  };
  forward(a, b);
  forward(b, a);
}

/**
 * Connects to libp2p first and completes the peer's handshake only once that worked, so an unreachable
 * libp2p is a 502 rather than a WebSocket that opens and drops.
 */
function bridge(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  wss: WebSocketServer,
  target: string,
  onError: (err: Error) => void,
  track: (upstream: WebSocket) => void,
): void {
  const upstream = new WebSocket(target, {
    perMessageDeflate: false,
    maxPayload: LIBP2P_MAX_MESSAGE_BYTES,
  });
  track(upstream);
  let settled = false;
  const abandon = (): void => {
    if (!settled) upstream.terminate();
  };
  socket.once('close', abandon);
  upstream.once('error', (err) => {
    if (settled) return;
    settled = true;
    socket.off('close', abandon);
    onError(err);
    reject(socket, 502, 'Bad Gateway');
  });
  upstream.once('open', () => {
    if (settled) return;
    settled = true;
    socket.off('close', abandon);
    if (socket.destroyed) {
      upstream.terminate();
      return;
    }
    // ws answers a handshake it refuses (400) and destroys the socket without calling back: then the
    // libp2p side is dropped too.
    let paired = false;
    socket.once('close', () => {
      if (!paired) upstream.terminate();
    });
    wss.handleUpgrade(req, socket, head, (peer) => {
      paired = true;
      pipeMessages(peer, upstream, onError);
    });
  });
}

/** A handshake ws would refuse anyway (RFC 6455 §4.2.1): not worth a connection to libp2p. */
function malformedHandshake(req: IncomingMessage): boolean {
  const key = req.headers['sec-websocket-key'];
  return (
    req.method !== 'GET' ||
    req.headers.upgrade?.toLowerCase() !== 'websocket' ||
    typeof key !== 'string' ||
    !/^[+/0-9A-Za-z]{22}==$/.test(key) ||
    req.headers['sec-websocket-version'] !== '13'
  );
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
  const target = `ws://${host.includes(':') ? `[${host}]` : host}:${options.libp2pPort}`;
  const isLibp2p = options.isLibp2p ?? defaultIsLibp2p;
  const maxConnections = options.maxConnections ?? DEFAULT_MAX_BRIDGED;
  const onError = options.onError ?? (() => {});
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: LIBP2P_MAX_MESSAGE_BYTES,
    perMessageDeflate: false,
  });
  // One upstream socket per bridged connection, from the dial until it closes (the peer's side follows it).
  const live = new Set<WebSocket>();
  const track = (upstream: WebSocket): void => {
    live.add(upstream);
    upstream.once('close', () => live.delete(upstream));
  };
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
    if (!isLibp2p(req)) return fallback(req, socket, head);
    if (malformedHandshake(req)) return reject(socket, 400, 'Bad Request');
    if (live.size >= maxConnections) return reject(socket, 503, 'Service Unavailable');
    spliced += 1;
    bridge(req, socket, head, wss, `${target}${req.url ?? '/'}`, onError, track);
  };
  server.removeAllListeners('upgrade');
  server.on('upgrade', dispatch);
  return {
    get spliced() {
      return spliced;
    },
    get open() {
      return live.size;
    },
    detach() {
      server.off('upgrade', dispatch);
      for (const l of previous) server.on('upgrade', l);
      for (const ws of live) ws.terminate();
    },
  };
}
