import { Server as NetServer } from 'node:net';
import type { Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { webSockets } from '@libp2p/websockets';
import type { WebSocketsComponents, WebSocketsInit } from '@libp2p/websockets';
import type { Listener, Logger, Transport } from '@libp2p/interface';

/**
 * `@libp2p/websockets` for Node listeners, with its listener made safe against unauthenticated input.
 *
 * The library's listener (10.1) builds its own `net.Server` → `http.Server` → `ws` WebSocketServer and
 * attaches no 'error' listener to the WebSockets it accepts. `ws` refuses a malformed frame (RSV2/RSV3 set,
 * an unknown opcode, a bad close code, invalid UTF-8) by emitting 'error' on that WebSocket, so ONE such frame
 * after an upgrade was an uncaught exception that ended the whole process (relay or node-trainer). The library
 * also keeps `ws`'s default 100 MiB message limit, and keeps a socket that never finishes its HTTP handshake
 * forever (its HTTP server never listens itself, so Node's header/request timeouts never run).
 *
 * The listener exposes no hook for any of this, so `guardedWebSockets` reaches into the two servers it built
 * (`server`, `wsServer`: private in its types, plain fields at runtime) right after creating it, before it
 * listens, and fails loudly at creation if they are not there (a library update that moved them must not
 * silently bring the crash back; test/hostile-listeners.test.ts would fail too):
 *
 * - every accepted WebSocket gets an 'error' listener: `ws` has already answered the bad frame with a close
 *   (1002 protocol error, 1009 too big) and drops the socket; we only log it (libp2p's logger, like libp2p's
 *   own dropped connections: nothing printed by default, so a flood of bad frames cannot flood a log);
 * - messages are limited to MAX_WS_MESSAGE_BYTES, refused from the frame header (1009) before any payload is
 *   buffered;
 * - a socket must complete its WebSocket upgrade within WS_HANDSHAKE_TIMEOUT_MS of connecting, or it is
 *   destroyed (after the upgrade, libp2p's own inbound upgrade timeout bounds the Noise handshake);
 * - a connection libp2p resets is really closed: it resets with `close(1006)`, which `ws` refuses to send
 *   (it throws), so without the guard the socket stayed open until the peer went away.
 *
 * Dialling is the library's, with one fix: the dialled socket (Node's WHATWG WebSocket) refuses close(1006)
 * too, so a connection libp2p resets on the dialling side was left open at the far end; a reset now closes it
 * (`_connect`, the library's dialling method, is wrapped; if it moved, dialling is left as it is: a leaked
 * socket is not a crash). Browsers never listen, and browser.ts keeps the plain transport.
 */

/**
 * Largest WebSocket message accepted from a peer. libp2p's WebSockets connection sends one message per chunk
 * of its encrypted stream and a Noise frame is at most 64 KiB, so 1 MiB is a wide margin.
 */
export const MAX_WS_MESSAGE_BYTES = 1024 * 1024;

/** Time from TCP connect to a completed WebSocket upgrade (an honest peer needs one round trip). */
export const WS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface WebSocketsGuardOptions {
  maxMessageBytes?: number;
  handshakeTimeoutMs?: number;
}

/** What we use of an accepted `ws` WebSocket. */
interface WsSocketLike extends EventEmitter {
  close(code?: number, reason?: string | Buffer): void;
  terminate(): void;
}

type UpgradeCallback = (ws: WsSocketLike, req: IncomingMessage) => void;

/** What we rely on of the `ws` WebSocketServer inside the library's listener. */
interface WsServerLike {
  options: { maxPayload?: number };
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, cb: UpgradeCallback): void;
}

function isWsServer(x: unknown): x is WsServerLike {
  if (typeof x !== 'object' || x === null) return false;
  const s = x as Partial<WsServerLike>;
  return typeof s.handleUpgrade === 'function' && typeof s.options === 'object' && s.options !== null;
}

/** Thrown at listener creation when the library's internals are not where the guard expects them. */
export class UnguardableListenerError extends Error {
  constructor(what: string) {
    super(
      `@libp2p/websockets' listener has no ${what} to guard; refusing to listen unguarded ` +
        '(see packages/p2p/src/websockets-guard.ts)',
    );
    this.name = 'UnguardableListenerError';
  }
}

/** Applies the guard to a listener `@libp2p/websockets` just created (before it listens). */
export function guardWebSocketListener(
  listener: Listener,
  log: Logger,
  options: WebSocketsGuardOptions = {},
): Listener {
  const internals = listener as unknown as { server?: unknown; wsServer?: unknown };
  const server = internals.server;
  const wsServer = internals.wsServer;
  if (!(server instanceof NetServer)) throw new UnguardableListenerError('net.Server (`server`)');
  if (!isWsServer(wsServer)) throw new UnguardableListenerError('ws WebSocketServer (`wsServer`)');
  const handshakeTimeoutMs = options.handshakeTimeoutMs ?? WS_HANDSHAKE_TIMEOUT_MS;

  // Read by ws for every upgrade it completes from now on (WebSocketServer.completeUpgrade).
  wsServer.options.maxPayload = options.maxMessageBytes ?? MAX_WS_MESSAGE_BYTES;

  const deadlines = new WeakMap<Duplex, ReturnType<typeof setTimeout>>();
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => {
      log(
        'no WebSocket upgrade from %s:%s within %d ms, dropping it',
        socket.remoteAddress,
        socket.remotePort,
        handshakeTimeoutMs,
      );
      socket.destroy();
    }, handshakeTimeoutMs);
    deadlines.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });

  // The library calls `wsServer.handleUpgrade(req, socket, head, cb)` (it never sees ws's 'connection' event,
  // which only servers that own their HTTP server emit), so the callback is where a new WebSocket can be
  // reached. ws has attached the socket but reads from it only from the next tick on, so the 'error'
  // listener is in place before the first frame is parsed.
  const handleUpgrade = wsServer.handleUpgrade.bind(wsServer);
  wsServer.handleUpgrade = (req, socket, head, cb) => {
    handleUpgrade(req, socket, head, (ws, request) => {
      const timer = deadlines.get(socket);
      if (timer !== undefined) clearTimeout(timer);
      const from = `${req.socket.remoteAddress}:${req.socket.remotePort}`;
      ws.on('error', (err: Error) => {
        // ws has already answered with a close frame (1002, 1009, …) and drops the socket; libp2p sees the
        // connection end as a remote reset. Nothing is left to do but say so.
        log.error('dropped the WebSocket connection from %s: %s', from, err.message);
      });
      // libp2p resets a connection it gives up on (a failed upgrade, a muxer error, a peer it refuses) with
      // close(1006), a code ws may not send: it throws, libp2p swallows that, and the socket stayed open
      // until the peer closed it. What 1006 means (gone, no closing handshake) is terminate().
      const close = ws.close.bind(ws);
      ws.close = (code?: number, reason?: string | Buffer) => {
        if (code === 1006) ws.terminate();
        else close(code, reason);
      };
      cb(ws, request);
    });
  };
  return listener;
}

/** `webSockets(init)` whose listeners are guarded (see the module comment). */
export function guardedWebSockets(
  init: WebSocketsInit = {},
  options: WebSocketsGuardOptions = {},
): (components: WebSocketsComponents) => Transport {
  const factory = webSockets(init);
  return (components) => {
    const transport = factory(components);
    const log = components.logger.forComponent('meshtrain:websockets-guard');
    const createListener = transport.createListener.bind(transport);
    transport.createListener = (listenerOptions) =>
      guardWebSocketListener(createListener(listenerOptions), log, options);
    closeDialledSocketsOnReset(transport);
    return transport;
  };
}

/** What the library's dialler hands back (Node's WHATWG WebSocket): only close() matters here. */
interface DialledWebSocket {
  close(code?: number, reason?: string): void;
}

/** close(1006), libp2p's reset, throws on a WHATWG WebSocket; make it a plain close instead. */
function closeDialledSocketsOnReset(transport: Transport): void {
  const t = transport as unknown as { _connect?: (...args: unknown[]) => Promise<DialledWebSocket> };
  if (typeof t._connect !== 'function') return;
  const connect = t._connect.bind(transport);
  t._connect = async (...args) => {
    const ws = await connect(...args);
    const close = ws.close.bind(ws);
    ws.close = (code, reason) => {
      if (code === 1006) close();
      else close(code, reason);
    };
    return ws;
  };
}
