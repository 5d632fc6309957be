// One JSON error shape for every HTTP route: {"error": {"code", "message", "issues"?}}.
import type { Context } from 'hono';
import type { ApiErrorBody } from '@meshtrain/client/relay-api';
import { RelayError } from '../relay.ts';

export function errorBody(code: string, message: string, issues?: unknown): ApiErrorBody {
  return { error: issues === undefined ? { code, message } : { code, message, issues } };
}

/** Hono onError handler: RelayError → its status and code; anything else is a relay bug → 500. */
export function onRouteError(err: Error, c: Context): Response {
  if (err instanceof RelayError) return c.json(errorBody(err.code, err.message, err.issues), err.status);
  console.error(`meshtrain-relay: ${c.req.method} ${c.req.path}: ${err.stack ?? err.message}`);
  return c.json(errorBody('internal', 'the relay failed to handle this request'), 500);
}
