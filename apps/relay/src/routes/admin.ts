// Admin routes (PROTOCOL.md "Admin"), mounted under /api/runs. Every route runs the signature middleware
// first; the role check is per route: creating a run (anyone, or the --run-creators, within quotas), pause/resume/config
// (the run's main authority), grants (its join authority), delegates (the grantee).
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Context } from 'hono';
import type { DelegatesRequest, GrantReply, GrantRequest, RunReply } from '@meshtrain/client/relay-api';
import { adminAuth } from '../middleware/admin-auth.ts';
import type { AdminEnv } from '../middleware/admin-auth.ts';
import type { Relay } from '../relay.ts';
import { RelayError } from '../relay.ts';
import type { RunHost } from '../run-host.ts';
import { errorBody, onRouteError } from './errors.ts';
import { runSummary } from './runs.ts';
import { MAX_GRANTS } from '../store.ts';
import { isHex32 } from '@meshtrain/core';

/** TOML and JSON bodies of admin requests are small; refuse anything bigger before reading it. */
const MAX_ADMIN_BODY = 1024 * 1024;
const MAX_DELEGATES = 1000;

function forbidden(what: string): RelayError {
  return new RelayError(403, 'forbidden', `only ${what} may do this`);
}

function jsonBody(c: Context<AdminEnv>): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(c.get('body'));
  } catch {
    throw new RelayError(400, 'bad_request', 'the body must be JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new RelayError(400, 'bad_request', 'the body must be a JSON object');
  return v as Record<string, unknown>;
}

export function adminRoutes(relay: Relay): Hono<AdminEnv> {
  const app = new Hono<AdminEnv>();
  app.onError(onRouteError);
  const limit = bodyLimit({
    maxSize: MAX_ADMIN_BODY,
    onError: (c) =>
      c.json(errorBody('bad_request', `admin bodies are limited to ${MAX_ADMIN_BODY} bytes`), 413),
  });
  const auth = adminAuth(relay.store.adminSignatures, relay.clock);

  const mainAuthority = (c: Context<AdminEnv>): RunHost => {
    const host = relay.mustRun(c.req.param('id') ?? '');
    if (c.get('signer') !== host.row.main_authority) throw forbidden("the run's main authority");
    return host;
  };

  app.post('/', limit, auth, (c) => {
    const signer = c.get('signer');
    relay.assertMayCreateRun(signer);
    const joinAuthority = c.req.query('join_authority');
    const host = relay.createRun({
      toml: c.get('body'),
      mainAuthority: signer,
      ...(joinAuthority === undefined ? {} : { joinAuthority }),
      paused: c.req.query('paused') === '1',
      permissioned: c.req.query('permissioned') === '1',
    });
    return c.json({ run: runSummary(relay, host) } satisfies RunReply, 201);
  });

  app.post('/:id/pause', limit, auth, (c) => {
    const host = mainAuthority(c);
    relay.adminEvent(host, { type: 'pause' });
    return c.json({ run: runSummary(relay, host) } satisfies RunReply);
  });

  app.post('/:id/resume', limit, auth, (c) => {
    const host = mainAuthority(c);
    relay.adminEvent(host, { type: 'resume' });
    return c.json({ run: runSummary(relay, host) } satisfies RunReply);
  });

  app.put('/:id/config', limit, auth, (c) => {
    const host = mainAuthority(c);
    relay.updateConfig(host, c.get('body'));
    return c.json({ run: runSummary(relay, host) } satisfies RunReply);
  });

  app.post('/:id/grants', limit, auth, (c) => c.json(setGrant(relay, c)));
  app.post('/:id/grants/:grantee/delegates', limit, auth, (c) => c.json(setDelegates(relay, c)));

  return app;
}

/** POST /:id/grants by the run's join authority: grants (or revokes) `grantee` the right to join. */
function setGrant(relay: Relay, c: Context<AdminEnv>): GrantReply {
  const host = relay.mustRun(c.req.param('id') ?? '');
  if (c.get('signer') !== host.row.join_authority) throw forbidden("the run's join authority");
  // Fields named as the API's request body, each checked here before use.
  const { grantee, active }: { [K in keyof GrantRequest]?: unknown } = jsonBody(c);
  if (!isHex32(grantee))
    throw new RelayError(
      400,
      'bad_request',
      'grantee must be a public key as 64 lowercase hex digits (all zeros = anyone)',
    );
  if (typeof active !== 'boolean') throw new RelayError(400, 'bad_request', 'active must be true or false');
  if (
    !relay.store.sessions.grant(host.runId, grantee) &&
    relay.store.sessions.grantCount(host.runId) >= MAX_GRANTS
  )
    throw new RelayError(
      409,
      'too_many_grants',
      `a run has at most ${MAX_GRANTS} grants; deactivate or reuse one`,
    );
  relay.store.sessions.upsertGrant(host.runId, grantee, host.row.join_authority, active, relay.clock());
  return { grant: relay.store.sessions.grant(host.runId, grantee) ?? null };
}

/** POST /:id/grants/:grantee/delegates by the grantee: the keys that may join on its grant. */
function setDelegates(relay: Relay, c: Context<AdminEnv>): GrantReply {
  const host = relay.mustRun(c.req.param('id') ?? '');
  const grantee = c.req.param('grantee') ?? '';
  const grant = relay.store.sessions.grant(host.runId, grantee);
  if (!grant) throw new RelayError(404, 'unknown_grant', `no grant to ${grantee.slice(0, 16)}… in this run`);
  if (c.get('signer') !== grantee) throw forbidden('the grantee');
  const { delegates }: { [K in keyof DelegatesRequest]?: unknown } = jsonBody(c);
  if (!Array.isArray(delegates) || delegates.length > MAX_DELEGATES || !delegates.every(isHex32))
    throw new RelayError(
      400,
      'bad_request',
      `delegates must be a list of at most ${MAX_DELEGATES} public keys (64 lowercase hex digits)`,
    );
  relay.store.sessions.setDelegates(host.runId, grantee, delegates);
  return { grant: relay.store.sessions.grant(host.runId, grantee) ?? null };
}
