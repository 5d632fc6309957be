// The relay's Hono app: small route modules composed with app.route(). Extra modules (data provider,
// checkpoints, metrics) are passed in by the server so this file stays a plain composition.
import { Hono } from 'hono';
import type { Relay } from './relay.ts';
import { adminRoutes } from './routes/admin.ts';
import { errorBody, onRouteError } from './routes/errors.ts';
import { runsRoutes } from './routes/runs.ts';
import { statusRoutes } from './routes/status.ts';
import { wsRoutes } from './routes/ws.ts';

export interface MountedRoutes {
  /** Mount point, e.g. '/' or '/api/runs'. */
  path: string;
  app: Hono;
}

export function createRelayApp(relay: Relay, extra: readonly MountedRoutes[] = []): Hono {
  const app = new Hono();
  app.onError(onRouteError);
  // Extra modules first: their paths (…/data, …/checkpoint) are more specific than /api/runs/:id, and the
  // web app's routes (web/static.ts) must come before the plain status page at `/`.
  for (const m of extra) app.route(m.path, m.app);
  app.route('/', statusRoutes(relay));
  app.route('/', wsRoutes(relay));
  app.route('/api/runs', runsRoutes(relay));
  app.route('/api/runs', adminRoutes(relay));
  app.notFound((c) => c.json(errorBody('not_found', `no route ${c.req.method} ${c.req.path}`), 404));
  return app;
}
