// The coordinator WebSocket endpoint, GET /ws/runs/:runId: adapts @hono/node-server's WebSocket helper to a
// CoordinatorSession (session.ts holds the protocol handling).
import { upgradeWebSocket } from '@hono/node-server';
import { Hono } from 'hono';
import type { Relay } from '../relay.ts';
import { CoordinatorSession } from '../session.ts';

/** A client that lets this much pile up unsent is not reading: drop it rather than buffer without bound. */
const MAX_BUFFERED_BYTES = 256 * 1024 * 1024;

export function wsRoutes(relay: Relay): Hono {
  const app = new Hono();
  app.get(
    '/ws/runs/:runId',
    upgradeWebSocket((c) => {
      const runId = c.req.param('runId') ?? '';
      let session: CoordinatorSession | undefined;
      return {
        onOpen(_evt, ws) {
          const raw = ws.raw as { bufferedAmount?: number } | undefined;
          session = new CoordinatorSession(relay, runId, {
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
          });
          session.open();
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
