// `meshtrain-relay run` argument and config errors (the real bin), and who may create runs: --run-creators,
// live-run quotas, and the largest model a relay takes.
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
    // The host's verifier for the default run: a node-trainer identity file, or a key.
    const notKey = join(dir, 'not-a-key');
    writeFileSync(notKey, 'hello\n');
    const badVerifier = run(['--verifier-identity', notKey, '--data-dir', join(dir, 'dv'), '--no-p2p']);
    expect(badVerifier.status).toBe(2);
    expect(badVerifier.stderr).toContain('--verifier-identity');
    const badTrusted = run(['--trusted-verifier', 'xyz', '--data-dir', join(dir, 'dv'), '--no-p2p']);
    expect(badTrusted.status).toBe(2);
    expect(badTrusted.stderr).toContain('--trusted-verifier');

    const broken = join(dir, 'broken.toml');
    writeFileSync(broken, fastRunToml('broken').replace('min_clients = 2', 'min_clients = 0'));
    const bad = run(['--config', broken, '--data-dir', join(dir, 'data'), '--no-p2p']);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('config.min_clients');
    expect(bad.stdout).not.toContain('listening');
  });
});

describe('run creation is bounded', () => {
  it('--run-creators limits who may create runs; others get 403', async () => {
    const allowed = identity(500);
    const relay = await startRelayServer({ dataDir: ':memory:', runCreators: [hexKey(allowed)] });
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

describe('run creation quotas and model size', () => {
  /** fastRunToml with another preset, and optionally a wider vocabulary (the embedding grows with it). */
  const tomlWith = (runId: string, preset: string, vocab?: number) => {
    const t = fastRunToml(runId).replace('preset = "tiny"', `preset = "${preset}"`);
    return vocab === undefined ? t : `${t}\n[meshtrain.model]\nvocab_size = ${vocab}\n`;
  };

  it('live runs per creating key and per relay are capped (429); the operator raises them', async () => {
    const relay = await startRelayServer({ dataDir: ':memory:', maxRunsPerCreator: 2, maxRuns: 3 });
    try {
      const a = identity(510);
      const b = identity(511);
      for (const id of ['q1', 'q2'])
        expect((await admin(relay.url, a, 'POST', '/api/runs', fastRunToml(id))).status).toBe(201);
      const third = await admin(relay.url, a, 'POST', '/api/runs', fastRunToml('q3'));
      expect([third.status, (third.json.error as { code: string }).code]).toEqual([429, 'too_many_runs']);
      expect((await admin(relay.url, b, 'POST', '/api/runs', fastRunToml('q4'))).status).toBe(201);
      // The relay is full now, whoever asks.
      const full = await admin(relay.url, identity(512), 'POST', '/api/runs', fastRunToml('q5'));
      expect(full.status).toBe(429);
      expect(relay.relay.runList().map((h) => h.runId)).toEqual(['q1', 'q2', 'q4']);
    } finally {
      await relay.close();
    }
  });

  it('a model beyond --max-model-params is refused (413) before anything is stored or seeded', async () => {
    const relay = await startRelayServer({ dataDir: ':memory:' });
    try {
      // The 125m preset with a 1M-token vocabulary: ~0.9B parameters, a ~3.6 GB checkpoint.
      const huge = await admin(
        relay.url,
        identity(520),
        'POST',
        '/api/runs',
        tomlWith('huge', '125m', 1_000_000),
      );
      expect([huge.status, (huge.json.error as { code: string }).code]).toEqual([413, 'model_too_large']);
      expect(relay.relay.run('huge')).toBeUndefined();
      expect(relay.relay.store.runs.get('huge')).toBeUndefined();
      // The biggest preset the relay serves by default is accepted.
      expect(
        (await admin(relay.url, identity(520), 'POST', '/api/runs', tomlWith('ok', '125m'))).status,
      ).toBe(201);
    } finally {
      await relay.close();
    }
  });

  it('the bin takes --run-creators (and the older --admin-key) and --max-model-params', () => {
    const cfg = join(dir, 'tiny.toml');
    writeFileSync(cfg, fastRunToml('tiny-run'));
    const badKey = run(['--run-creators', 'nothex', '--data-dir', join(dir, 'd1'), '--no-p2p']);
    expect(badKey.status).toBe(2);
    expect(badKey.stderr).toContain('--run-creators');
    // The tiny preset has ~1.08M parameters: a relay limited to 1000 refuses it and exits 1.
    const small = run([
      '--config',
      cfg,
      '--max-model-params',
      '1000',
      '--admin-key',
      hexKey(identity(530)),
      '--data-dir',
      join(dir, 'd2'),
      '--no-p2p',
    ]);
    expect(small.status).toBe(1);
    expect(small.stderr).toContain('--admin-key is now called --run-creators');
    expect(small.stderr).toContain('at most 1000');
  });
});

describe('seeding a larger run', () => {
  // How long the event loop waits meanwhile is measured in bench/relay-hostile.ts, not here.
  it('stores the initial checkpoint of a 20m-parameter run, /healthz answering meanwhile', async () => {
    const data = mkdtempSync(join(tmpdir(), 'meshtrain-relay-seed-'));
    const relay = await startRelayServer({ dataDir: data, services: true });
    try {
      const toml = fastRunToml('seeded').replace('preset = "tiny"', 'preset = "20m"');
      expect((await admin(relay.url, identity(540), 'POST', '/api/runs', toml)).status).toBe(201);
      expect((await fetch(`${relay.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${relay.url}/api/runs/seeded/checkpoint`)).status).toBe(404);
      for (let i = 0; i < 600; i++) {
        if ((await fetch(`${relay.url}/api/runs/seeded/checkpoint`)).status === 200) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const summary = (await (await fetch(`${relay.url}/api/runs/seeded/checkpoint`)).json()) as {
        step: number;
        source: string;
      };
      expect(summary).toMatchObject({ step: 1, source: 'init' });
    } finally {
      await relay.close();
      rmSync(data, { recursive: true, force: true });
    }
  });
});
