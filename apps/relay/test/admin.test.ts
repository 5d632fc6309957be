// Admin HTTP API over the real server: signature middleware (401 unsigned / stale / forged / replayed, 403
// wrong key), run creation from TOML with core's key-path errors, pause/resume/config, 404 for unknown runs,
// and permissioned runs (grant → authorizer → delegates, docs/protocol.md "Run permissions") enforced at
// WebSocket join.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTrustedVerifiers } from '@meshtrain/core';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import { admin, adminHeaders, fastRunToml, hexKey, identity, TestClient } from './helpers/relay-fixtures.ts';

let relay: RunningRelay;
const owner = identity(100);
const stranger = identity(101);
const open: TestClient[] = [];

beforeAll(async () => {
  relay = await startRelayServer({ dataDir: ':memory:', tickMs: 50, graceMs: 200 });
});

afterAll(async () => {
  for (const c of open) c.close();
  await relay.close();
});

type Json = Record<string, unknown>;
const errorCode = (j: Json) => (j.error as { code: string }).code;
const runOf = (j: Json) => j.run as Json;

describe('admin signatures', () => {
  it('create needs a valid, fresh, unreplayed signature', async () => {
    const body = fastRunToml('adm-1');
    const unsigned = await fetch(`${relay.url}/api/runs`, { method: 'POST', body });
    expect(unsigned.status).toBe(401);
    expect(errorCode((await unsigned.json()) as Json)).toBe('unauthenticated');

    const stale = adminHeaders(owner, 'POST', '/api/runs', body, Date.now() - 6 * 60 * 1000);
    const r1 = await fetch(`${relay.url}/api/runs`, { method: 'POST', headers: stale, body });
    expect(r1.status).toBe(401);

    // Signed over another body: the signature covers sha256(body).
    const other = adminHeaders(owner, 'POST', '/api/runs', `${body}\n# edited`);
    const r2 = await fetch(`${relay.url}/api/runs`, { method: 'POST', headers: other, body });
    expect(r2.status).toBe(401);

    // Signed for another path.
    const wrongPath = adminHeaders(owner, 'POST', '/api/runs?paused=1', body);
    expect((await fetch(`${relay.url}/api/runs`, { method: 'POST', headers: wrongPath, body })).status).toBe(
      401,
    );

    const ok = adminHeaders(owner, 'POST', '/api/runs', body);
    const r3 = await fetch(`${relay.url}/api/runs`, { method: 'POST', headers: ok, body });
    expect(r3.status).toBe(201);
    expect(runOf((await r3.json()) as Json)).toMatchObject({
      run_id: 'adm-1',
      run_state: 'WaitingForMembers',
      main_authority: hexKey(owner),
    });

    // The exact same request again is a replay.
    const r4 = await fetch(`${relay.url}/api/runs`, { method: 'POST', headers: ok, body });
    expect(r4.status).toBe(401);

    const dup = await admin(relay.url, owner, 'POST', '/api/runs', body);
    expect(dup.status).toBe(409);
    expect(errorCode(dup.json)).toBe('run_exists');
  });

  it("invalid TOML is a 400 listing core's key paths", async () => {
    const bad = fastRunToml('adm-bad')
      .replace('min_clients = 2', 'min_clients = "two"')
      .replace('total_steps = 40', 'total_steps = -1');
    const r = await admin(relay.url, owner, 'POST', '/api/runs', bad);
    expect(r.status).toBe(400);
    const err = r.json.error as { code: string; issues: Array<{ path: string; message: string }> };
    expect(err.code).toBe('invalid_config');
    expect(err.issues.map((i) => i.path)).toEqual(expect.arrayContaining(['config.min_clients']));
    const syntax = await admin(relay.url, owner, 'POST', '/api/runs', 'this is [not toml');
    expect(syntax.status).toBe(400);
    expect((syntax.json.error as { issues: Array<{ path: string }> }).issues[0]!.path).toBe('<toml>');
  });

  it('pause / resume / config need the main authority; unknown runs are 404', async () => {
    const wrong = await admin(relay.url, stranger, 'POST', '/api/runs/adm-1/pause');
    expect(wrong.status).toBe(403);
    expect(errorCode(wrong.json)).toBe('forbidden');
    const missing = await admin(relay.url, owner, 'POST', '/api/runs/nope/pause');
    expect(missing.status).toBe(404);
    expect(errorCode(missing.json)).toBe('unknown_run');
    expect((await fetch(`${relay.url}/api/runs/nope`)).status).toBe(404);

    // Config changes only while paused: core refuses with WrongPhase.
    const early = await admin(
      relay.url,
      owner,
      'PUT',
      '/api/runs/adm-1/config',
      fastRunToml('adm-1', { total_steps: 77 }),
    );
    expect(early.status).toBe(409);
    expect(errorCode(early.json)).toBe('WrongPhase');

    const paused = await admin(relay.url, owner, 'POST', '/api/runs/adm-1/pause');
    expect(paused.status).toBe(200);
    expect(runOf(paused.json).run_state).toBe('Paused');
    const again = await admin(relay.url, owner, 'POST', '/api/runs/adm-1/pause');
    expect(again.status).toBe(409);

    const otherRun = await admin(relay.url, owner, 'PUT', '/api/runs/adm-1/config', fastRunToml('not-adm-1'));
    expect(otherRun.status).toBe(400);
    const cfg = await admin(
      relay.url,
      owner,
      'PUT',
      '/api/runs/adm-1/config',
      fastRunToml('adm-1', { total_steps: 77 }),
    );
    expect(cfg.status).toBe(200);
    expect(runOf(cfg.json).total_steps).toBe(77);
    // Without trusted verifiers the summary warns that the run may be attacker-controlled; the main authority
    // names them through the same API (docs/protocol.md "Trust").
    expect(runOf(cfg.json).trust_warning).toMatch(/no trusted verifier/);
    const verifier = hexKey(identity(77));
    const anchored = await admin(
      relay.url,
      owner,
      'PUT',
      '/api/runs/adm-1/config',
      withTrustedVerifiers(fastRunToml('adm-1', { total_steps: 77, verification_percent: 10 }), [verifier]),
    );
    expect(anchored.status).toBe(200);
    expect(runOf(anchored.json).trusted_verifiers).toEqual([verifier]);
    expect(runOf(anchored.json).trust_warning).toBeNull();
    expect(relay.relay.run('adm-1')!.state.config.trusted_verifiers).toEqual([verifier]);

    const resumed = await admin(relay.url, owner, 'POST', '/api/runs/adm-1/resume');
    expect(resumed.status).toBe(200);
    expect(runOf(resumed.json).run_state).toBe('WaitingForMembers');

    const detail = (await (await fetch(`${relay.url}/api/runs/adm-1`)).json()) as Json;
    expect((detail.config as { toml: string }).toml).toContain('total_steps = 77');
    expect((detail.transitions as unknown[]).length).toBeGreaterThanOrEqual(3);
    const list = (await (await fetch(`${relay.url}/api/runs`)).json()) as { runs: Json[] };
    expect(list.runs.map((r) => r.run_id)).toContain('adm-1');
  });

  it('serves /healthz and a status page', async () => {
    expect(await (await fetch(`${relay.url}/healthz`)).json()).toEqual({ ok: true });
    const page = await fetch(`${relay.url}/`);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('adm-1');
  });
});

describe('permissioned runs', () => {
  const authorizer = identity(110);
  const delegate = identity(111);
  const outsider = identity(112);
  const direct = identity(113);

  it('refuse an unauthorised Join and accept a delegate of an active grant', async () => {
    const created = await admin(relay.url, owner, 'POST', '/api/runs?permissioned=1', fastRunToml('perm-1'));
    expect(created.status).toBe(201);
    expect(runOf(created.json).permissioned).toBe(true);

    const refuse = async (n: ReturnType<typeof identity>) => {
      const c = await TestClient.open(relay.url, 'perm-1', n);
      open.push(c);
      expect(await c.join()).toMatchObject({ kind: 'error', message: { code: 'not_authorized' } });
    };
    await refuse(outsider);
    await refuse(delegate);

    // Only the join authority (here: the creator) grants.
    const notAuthority = await admin(
      relay.url,
      stranger,
      'POST',
      '/api/runs/perm-1/grants',
      JSON.stringify({ grantee: hexKey(authorizer), active: true }),
    );
    expect(notAuthority.status).toBe(403);
    const badBody = await admin(
      relay.url,
      owner,
      'POST',
      '/api/runs/perm-1/grants',
      JSON.stringify({ grantee: 'zz', active: true }),
    );
    expect(badBody.status).toBe(400);
    const grant = await admin(
      relay.url,
      owner,
      'POST',
      '/api/runs/perm-1/grants',
      JSON.stringify({ grantee: hexKey(authorizer), active: true }),
    );
    expect(grant.status).toBe(200);

    // Only the grantee sets its delegates.
    const path = `/api/runs/perm-1/grants/${hexKey(authorizer)}/delegates`;
    const body = JSON.stringify({ delegates: [hexKey(delegate)] });
    expect((await admin(relay.url, owner, 'POST', path, body)).status).toBe(403);
    const set = await admin(relay.url, authorizer, 'POST', path, body);
    expect(set.status).toBe(200);
    expect((set.json.grant as { delegates: string[] }).delegates).toEqual([hexKey(delegate)]);

    const d = await TestClient.joined(relay.url, 'perm-1', delegate);
    open.push(d);
    expect(d.state!.members.map((m) => m.id)).toContain(hexKey(delegate));
    await refuse(outsider);

    // A grant to a key itself admits that key; deactivating the authorizer's grant stops its delegates.
    await admin(
      relay.url,
      owner,
      'POST',
      '/api/runs/perm-1/grants',
      JSON.stringify({ grantee: hexKey(direct), active: true }),
    );
    open.push(await TestClient.joined(relay.url, 'perm-1', direct));
    await admin(
      relay.url,
      owner,
      'POST',
      '/api/runs/perm-1/grants',
      JSON.stringify({ grantee: hexKey(authorizer), active: false }),
    );
    const again = await TestClient.open(relay.url, 'perm-1', delegate);
    open.push(again);
    expect(await again.join()).toMatchObject({ kind: 'error', message: { code: 'not_authorized' } });

    // The permissionless grant (all-zero grantee) opens the run to anyone.
    await admin(
      relay.url,
      owner,
      'POST',
      '/api/runs/perm-1/grants',
      JSON.stringify({ grantee: '0'.repeat(64), active: true }),
    );
    open.push(await TestClient.joined(relay.url, 'perm-1', outsider));
    const detail = (await (await fetch(`${relay.url}/api/runs/perm-1`)).json()) as Json;
    expect((detail.grants as unknown[]).length).toBe(3);
  });

  it('a named join authority, not the creator, grants', async () => {
    const ja = identity(120);
    const created = await admin(
      relay.url,
      owner,
      'POST',
      `/api/runs?permissioned=1&join_authority=${hexKey(ja)}`,
      fastRunToml('perm-2'),
    );
    expect(created.status).toBe(201);
    const byCreator = await admin(
      relay.url,
      owner,
      'POST',
      '/api/runs/perm-2/grants',
      JSON.stringify({ grantee: hexKey(direct), active: true }),
    );
    expect(byCreator.status).toBe(403);
    const byJa = await admin(
      relay.url,
      ja,
      'POST',
      '/api/runs/perm-2/grants',
      JSON.stringify({ grantee: hexKey(direct), active: true }),
    );
    expect(byJa.status).toBe(200);
    open.push(await TestClient.joined(relay.url, 'perm-2', direct));
  });
});

describe('replay protection survives a restart', () => {
  it('an accepted request replayed after the relay restarts is refused; expired signatures are forgotten', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-replay-'));
    let now = Date.now();
    const clock = () => now;
    try {
      const first = await startRelayServer({ dataDir: dir, clock });
      const body = fastRunToml('replayed');
      const headers = adminHeaders(owner, 'POST', '/api/runs', body, now);
      const created = await fetch(`${first.url}/api/runs`, { method: 'POST', headers, body });
      expect(created.status).toBe(201);
      const pause = adminHeaders(owner, 'POST', '/api/runs/replayed/pause', '', now + 1);
      expect(
        (await fetch(`${first.url}/api/runs/replayed/pause`, { method: 'POST', headers: pause })).status,
      ).toBe(200);
      await first.close();

      const second = await startRelayServer({ dataDir: dir, clock });
      try {
        // Resume, then replay the captured pause: it would pause the run again.
        expect((await admin(second.url, owner, 'POST', '/api/runs/replayed/resume')).status).toBe(200);
        const replay = await fetch(`${second.url}/api/runs/replayed/pause`, {
          method: 'POST',
          headers: pause,
        });
        expect(replay.status).toBe(401);
        expect(errorCode((await replay.json()) as Json)).toBe('unauthenticated');
        expect(second.relay.run('replayed')!.state.run_state).not.toBe('Paused');
        const count = () =>
          Number(
            (second.store.db.prepare('SELECT COUNT(*) AS n FROM admin_signatures').get() as { n: number }).n,
          );
        expect(count()).toBe(3);
        // Past the window the stale timestamp refuses a replay by itself; the remembered signatures go.
        now += 6 * 60 * 1000;
        expect((await admin(second.url, owner, 'POST', '/api/runs/replayed/pause')).status).toBe(401); // stale
        const fresh = adminHeaders(owner, 'POST', '/api/runs/replayed/pause', '', now);
        expect(
          (await fetch(`${second.url}/api/runs/replayed/pause`, { method: 'POST', headers: fresh })).status,
        ).toBe(200);
        expect(count()).toBe(1);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
