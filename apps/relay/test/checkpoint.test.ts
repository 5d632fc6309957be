import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PRESETS,
  decodeCheckpoint,
  encodeCheckpoint,
  hfConfigJson,
  initParameters,
  parameterHashHex,
  type LlamaConfig,
  type Parameters,
} from '@meshtrain/model';
import { DEFAULT_RUN_TOML, parseRunConfig } from '@meshtrain/core';
import type { Hono } from 'hono';
import {
  CheckpointStore,
  checkpointRoutes,
  ensureInitialCheckpoint,
  runDirName,
  type CheckpointSummary,
  type CheckpointUpload,
} from '../src/checkpoints/index.ts';

const config: LlamaConfig = PRESETS.micro;
let dir: string;
let store: CheckpointStore;
let app: Hono;
const uploads: CheckpointUpload[] = [];
const runs = new Set(['r1', 'default']);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relay-ckpt-'));
  store = new CheckpointStore({ dataDir: dir, keep: 3 });
  app = checkpointRoutes({
    store,
    runExists: (id) => runs.has(id),
    expectedConfig: () => config,
    maxUploadBytes: 2 * 1024 * 1024,
    verifyUpload: (u, c) => {
      uploads.push(u);
      if (c.req.header('X-Test-Deny') === '1')
        return { ok: false, status: 403, code: 'forbidden', message: 'not a client of this run' };
      return { ok: true, uploader: 'client-a' };
    },
  });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function form(parts: { weights?: Uint8Array; config?: string; step?: string; epoch?: string }): FormData {
  const f = new FormData();
  if (parts.weights)
    f.set('model.safetensors', new Blob([parts.weights as Uint8Array<ArrayBuffer>]), 'model.safetensors');
  if (parts.config !== undefined) f.set('config.json', parts.config);
  if (parts.step !== undefined) f.set('step', parts.step);
  if (parts.epoch !== undefined) f.set('epoch', parts.epoch);
  return f;
}

const upload = (f: FormData, headers: Record<string, string> = {}) =>
  app.request('/api/runs/r1/checkpoint', { method: 'POST', body: f, headers });

const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

function paramsForSeed(seed: number): Parameters {
  return initParameters(config, seed);
}

describe('upload and download', () => {
  it('round-trips bit-exactly and reports the parameter hash', async () => {
    const params = paramsForSeed(7);
    const { safetensors, configJson } = encodeCheckpoint(config, params);
    const res = await upload(form({ weights: safetensors, config: configJson, step: '10', epoch: '1' }));
    expect(res.status).toBe(201);
    const summary = (await res.json()) as CheckpointSummary;
    expect(summary).toMatchObject({ step: 10, epoch: 1, paramHash: parameterHashHex(params) });
    expect(uploads.at(-1)).toMatchObject({ runId: 'r1', step: 10, epoch: 1, bytes: safetensors.length });

    const latest = (await (await app.request('/api/runs/r1/checkpoint')).json()) as CheckpointSummary;
    expect(latest.files['model.safetensors']).toBe('/api/runs/r1/checkpoint/model.safetensors?step=10');
    const file = await app.request(latest.files['model.safetensors']!);
    expect(file.status).toBe(200);
    expect(file.headers.get('Cache-Control')).toContain('immutable');
    const bytes = new Uint8Array(await file.arrayBuffer());
    expect(Buffer.compare(bytes, safetensors)).toBe(0);
    const cfg = await (await app.request(latest.files['config.json']!)).text();
    const back = decodeCheckpoint(cfg, bytes);
    expect(parameterHashHex(back.params)).toBe(summary.paramHash);

    // Range on the weights file, then the same upload again: idempotent (200), not a conflict.
    const part = await app.request('/api/runs/r1/checkpoint/model.safetensors', {
      headers: { Range: 'bytes=-16' },
    });
    expect(part.status).toBe(206);
    expect([...new Uint8Array(await part.arrayBuffer())]).toEqual([...safetensors.subarray(-16)]);
    const again = await upload(form({ weights: safetensors, config: configJson, step: '10', epoch: '1' }));
    expect(again.status).toBe(200);
    const other = encodeCheckpoint(config, paramsForSeed(8));
    const conflict = await upload(
      form({ weights: other.safetensors, config: other.configJson, step: '10', epoch: '1' }),
    );
    expect(conflict.status).toBe(409);
    expect(await errorCode(conflict)).toBe('checkpoint_conflict');
  });

  it('keeps the newest three steps', async () => {
    for (const step of [20, 30, 40, 50]) {
      const { safetensors, configJson } = encodeCheckpoint(config, paramsForSeed(step));
      const res = await upload(
        form({ weights: safetensors, config: configJson, step: String(step), epoch: '2' }),
      );
      expect(res.status).toBe(201);
    }
    expect(await store.steps('r1')).toEqual([50, 40, 30]);
    expect((await readdir(store.runDir('r1'))).sort()).toEqual(['30', '40', '50']);
    const old = await app.request('/api/runs/r1/checkpoint?step=10');
    expect(old.status).toBe(404);
    expect(((await old.json()) as { error: { steps: number[] } }).error.steps).toEqual([50, 40, 30]);
  });

  it('refuses malformed uploads with typed 4xx errors', async () => {
    const { safetensors, configJson } = encodeCheckpoint(config, paramsForSeed(1));
    const cases: Array<[FormData | string, number, string]> = [
      [
        form({ weights: safetensors.subarray(0, 100), config: configJson, step: '1', epoch: '0' }),
        400,
        'bad_checkpoint',
      ],
      [
        form({ weights: new Uint8Array([1, 2, 3]), config: configJson, step: '1', epoch: '0' }),
        400,
        'bad_checkpoint',
      ],
      [form({ weights: safetensors, config: '{nope', step: '1', epoch: '0' }), 400, 'bad_checkpoint'],
      [form({ weights: safetensors, config: configJson, step: '-1', epoch: '0' }), 400, 'bad_request'],
      [form({ config: configJson, step: '1', epoch: '0' }), 400, 'bad_request'],
      [form({ weights: safetensors, step: '1', epoch: '0' }), 400, 'bad_request'],
      ['raw bytes', 415, 'unsupported_media_type'],
    ];
    for (const [body, status, code] of cases) {
      const res = await app.request('/api/runs/r1/checkpoint', { method: 'POST', body });
      expect([res.status, await errorCode(res)]).toEqual([status, code]);
    }
    // A valid checkpoint of another model shape.
    const shallow = { ...config, num_hidden_layers: 2 };
    const tiny = encodeCheckpoint(shallow, initParameters(shallow, 1));
    const res = await upload(
      form({ weights: tiny.safetensors, config: tiny.configJson, step: '1', epoch: '0' }),
    );
    expect([res.status, await errorCode(res)]).toEqual([400, 'config_mismatch']);
    // BF16 tensors: the hash is over f32 values, so refused.
    const bf = encodeCheckpoint(config, paramsForSeed(1), { dtype: 'BF16' });
    const r2 = await upload(
      form({ weights: bf.safetensors, config: hfConfigJson(config), step: '1', epoch: '0' }),
    );
    expect([r2.status, await errorCode(r2)]).toEqual([400, 'bad_checkpoint']);
    // The verifier's refusal is passed through.
    const r3 = await upload(form({ weights: safetensors, config: configJson, step: '60', epoch: '3' }), {
      'X-Test-Deny': '1',
    });
    expect([r3.status, await errorCode(r3)]).toEqual([403, 'forbidden']);
    // Unknown run.
    const r4 = await app.request('/api/runs/nope/checkpoint', {
      method: 'POST',
      body: form({ weights: safetensors }),
    });
    expect([r4.status, await errorCode(r4)]).toEqual([404, 'unknown_run']);
  });

  it('refuses oversized uploads before reading them', async () => {
    const big = new Uint8Array(3 * 1024 * 1024);
    const res = await upload(form({ weights: big, config: '{}', step: '1', epoch: '0' }));
    expect([res.status, await errorCode(res)]).toEqual([413, 'payload_too_large']);
  });

  it('serves only the checkpoint files, whatever the name', async () => {
    for (const name of ['..%2F..%2Fetc%2Fpasswd', '%2E%2E', 'meta.json.tmp', 'model.safetensors%00']) {
      const res = await app.request(`/api/runs/r1/checkpoint/${name}`);
      expect(res.status, name).toBe(404);
    }
    expect((await app.request('/api/runs/r1/checkpoint/meta.json')).status).toBe(200);
    expect((await app.request('/api/runs/r1/checkpoint/model.safetensors?step=abc')).status).toBe(400);
    expect((await app.request('/api/runs/zzz/checkpoint')).status).toBe(404);
    expect(runDirName('../x')).toBe(`~${Buffer.from('../x').toString('hex')}`);
    expect(runDirName('..')).not.toContain('/');
  });
});

describe('initial checkpoint', () => {
  it('stores seeded init weights for an Ephemeral run, once', async () => {
    const run = parseRunConfig(DEFAULT_RUN_TOML).config;
    const meta = await ensureInitialCheckpoint(store, 'default', run);
    expect(meta).toMatchObject({ step: 1, epoch: 0, source: 'init' });
    expect(meta.param_hash).toBe(parameterHashHex(initParameters(PRESETS.tiny, run.meshtrain.seed)));
    const again = await ensureInitialCheckpoint(store, 'default', run);
    expect(again.created_at).toBe(meta.created_at);
    const res = await app.request('/api/runs/default/checkpoint');
    expect(((await res.json()) as CheckpointSummary).paramHash).toBe(meta.param_hash);
  });
});

describe('parameters lost with the last clients of an epoch', () => {
  it('serves the newest earlier checkpoint, marked, only for a step the relay calls orphaned', async () => {
    const orphaned = new Set<number>();
    const lostDir = await mkdtemp(join(tmpdir(), 'relay-ckpt-lost-'));
    const lostApp = checkpointRoutes({
      store: new CheckpointStore({ dataDir: lostDir, keep: 3 }),
      runExists: (id) => id === 'r2',
      verifyUpload: () => ({ ok: true }),
      rollbackFor: (_run, step) => orphaned.has(step),
    });
    try {
      const params = paramsForSeed(11);
      const { safetensors, configJson } = encodeCheckpoint(config, params);
      const f = form({ weights: safetensors, config: configJson, step: '5', epoch: '1' });
      expect((await lostApp.request('/api/runs/r2/checkpoint', { method: 'POST', body: f })).status).toBe(
        201,
      );

      // Not orphaned: the upload may still come, so the client keeps asking.
      expect((await lostApp.request('/api/runs/r2/checkpoint?step=9')).status).toBe(404);

      orphaned.add(9);
      const res = await lostApp.request('/api/runs/r2/checkpoint?step=9');
      expect(res.status).toBe(200);
      const summary = (await res.json()) as CheckpointSummary;
      expect(summary).toMatchObject({ step: 5, rolledBackFrom: 9, paramHash: parameterHashHex(params) });
      expect(summary.files['model.safetensors']).toBe('/api/runs/r2/checkpoint/model.safetensors?step=5');

      // A stored step is served as itself, and nothing earlier than the first checkpoint exists to fall back to.
      const exact = (await (
        await lostApp.request('/api/runs/r2/checkpoint?step=5')
      ).json()) as CheckpointSummary;
      expect(exact.rolledBackFrom).toBeUndefined();
      orphaned.add(3);
      expect((await lostApp.request('/api/runs/r2/checkpoint?step=3')).status).toBe(404);
    } finally {
      await rm(lostDir, { recursive: true, force: true });
    }
  });
});
