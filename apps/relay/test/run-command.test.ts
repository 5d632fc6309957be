// `meshtrain-relay run` argument and config errors (the real bin), and the relay's --admin-key restriction.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startRelayServer } from '../src/server.ts';
import { admin, fastRunToml, hexKey, identity } from './helpers/relay-fixtures.ts';

const BIN = fileURLToPath(new URL('../bin/meshtrain-relay.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-cmd-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(args: string[]) {
  return spawnSync(process.execPath, [BIN, 'run', ...args], { encoding: 'utf8', timeout: 60_000 });
}

describe('meshtrain-relay run', () => {
  it('refuses bad flags (exit 2) and an invalid --config (exit 1, every key path) before listening', () => {
    const flag = run(['--port', 'eighty']);
    expect(flag.status).toBe(2);
    expect(flag.stderr).toContain('--port must be an integer');
    const unknown = run(['--frobnicate']);
    expect(unknown.status).toBe(2);

    const broken = join(dir, 'broken.toml');
    writeFileSync(broken, fastRunToml('broken').replace('min_clients = 2', 'min_clients = 0'));
    const bad = run(['--config', broken, '--data-dir', join(dir, 'data'), '--no-p2p']);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('config.min_clients');
    expect(bad.stdout).not.toContain('listening');
  });
});

describe('--admin-key', () => {
  it('limits who may create runs; others get 403', async () => {
    const allowed = identity(500);
    const relay = await startRelayServer({ dataDir: ':memory:', adminKeys: [hexKey(allowed)] });
    try {
      const denied = await admin(relay.url, identity(501), 'POST', '/api/runs', fastRunToml('k1'));
      expect(denied.status).toBe(403);
      const ok = await admin(relay.url, allowed, 'POST', '/api/runs', fastRunToml('k1'));
      expect(ok.status).toBe(201);
    } finally {
      await relay.close();
    }
  });
});
