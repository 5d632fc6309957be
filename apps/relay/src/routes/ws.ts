// The coordinator WebSocket endpoint, GET /ws/runs/:runId: adapts @hono/node-server's WebSocket helper to a
// CoordinatorSession (session.ts holds the protocol handling) and bounds what a connection costs before its
// Join is acknowledged (connection-limits.ts): a slot overall and per address, and a few KiB of input.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { upgradeWebSocket } from '@hono/node-server';
import { Hono } from 'hono';
import type { WSContext } from 'hono/ws';
import { UnjoinedSlots } from '../connection-limits.ts';
import type { Relay } from '../relay.ts';
import { CoordinatorSession } from '../session.ts';
import { errorBody } from './errors.ts';

/** A client that lets this much pile up unsent is not reading: drop it rather than buffer without bound. */
const MAX_BUFFERED_BYTES = 256 * 1024 * 1024;
/** WebSocket close code for a message too big (RFC 6455). */
const CLOSE_TOO_BIG = 1009;
/** After the close frame, how long a connection cut for its size may take to go before it is destroyed. */
const CUT_GRACE_MS = 1000;

/** The parts of ws's WebSocket (behind Hono's `ws.raw`) used to cut a connection without reading more. */
interface RawSocket {
  bufferedAmount?: number;
  pause?(): void;
  resume?(): void;
  terminate?(): void;
}

function incomingOf(env: unknown): IncomingMessage | undefined {
  return (env as { incoming?: IncomingMessage } | undefined)?.incoming;
}

/**
 * A CoordinatorSession over `ws`. Until its Join is acknowledged the connection may send at most
 * relay.preJoinMaxBytes; at the Join `releaseSlot` gives its unjoined slot back.
 */
function openSession(
  relay: Relay,
  ws: WSContext,
  conn: { runId: string; light: boolean; socket: Socket | undefined; releaseSlot: () => void },
): CoordinatorSession {
  const { runId, light, socket, releaseSlot } = conn;
  const raw = ws.raw as RawSocket | undefined;
  // Counted on the TCP socket, before ws assembles a message: a frame that declares megabytes is cut
  // after a few KiB instead of being buffered whole.
  let received = 0;
  const countPreJoin = (chunk: Buffer): void => {
    received += chunk.length;
    if (received <= relay.preJoinMaxBytes) return;
    socket?.off('data', countPreJoin);
    raw?.pause?.();
    ws.close(CLOSE_TOO_BIG, `at most ${relay.preJoinMaxBytes} bytes before the Join is acknowledged`);
    setTimeout(() => raw?.terminate?.(), CUT_GRACE_MS).unref();
  };
  socket?.on('data', countPreJoin);
  const session = new CoordinatorSession(
    relay,
    runId,
    {
      send(frame) {
        if (ws.readyState !== 1) return;
        if ((raw?.bufferedAmount ?? 0) > MAX_BUFFERED_BYTES) {
          ws.close(1008, 'client is not reading its messages');
          return;
        }
        ws.send(frame as Uint8Array<ArrayBuffer>);
      },
      close(code, reason) {
        ws.close(code, reason);
      },
      joined() {
        socket?.off('data', countPreJoin);
        releaseSlot();
      },
      address: socket?.remoteAddress ?? '',
      pause: () => raw?.pause?.(),
      resume: () => raw?.resume?.(),
    },
    { light },
  );
  session.open();
  return session;
}

export function wsRoutes(relay: Relay): Hono {
  const app = new Hono();
  const slots = new UnjoinedSlots(relay.maxUnjoined, relay.maxUnjoinedPerAddress);
  /** The unjoined slot of each upgrade request, given back at its Join or when its socket closes. */
  const slotOf = new WeakMap<IncomingMessage, () => void>();

  app.get(
    '/ws/runs/:runId',
    async (c, next) => {
      const incoming = incomingOf(c.env);
      if (c.req.header('upgrade')?.toLowerCase() !== 'websocket' || !incoming) return next();
      const release = slots.take(incoming.socket.remoteAddress ?? '');
      if (!release)
        return c.json(
          errorBody('busy', 'too many connections are waiting to join; retry in a few seconds'),
          503,
          { 'Retry-After': '5' },
        );
      incoming.socket.once('close', release);
      slotOf.set(incoming, release);
      return next();
    },
    upgradeWebSocket((c) => {
      const runId = c.req.param('runId') ?? '';
      // A light replica follows the summary of the state (docs/protocol.md "Round outcomes and light replicas").
      const light = c.req.query('replica') === 'light';
      const incoming = incomingOf(c.env);
      const socket: Socket | undefined = incoming?.socket;
      let session: CoordinatorSession | undefined;
      return {
        onOpen(_evt, ws) {
          session = openSession(relay, ws, {
            runId,
            light,
            socket,
            releaseSlot: () => {
              if (incoming) slotOf.get(incoming)?.();
            },
          });
        },
        onMessage(evt) {
          session?.onMessage(evt.data as string | ArrayBuffer);
        },
        onClose() {
          session?.onClose();
        },
        onError() {
          // ws emits 'close' after 'error'; cleanup happens there.
        },
      };
    }),
  );
  return app;
}
