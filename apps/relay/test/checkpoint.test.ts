import { createHash } from 'node:crypto';
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
  type UploadAdmission,
  type UploadRequest,
} from '../src/checkpoints/index.ts';

const config: LlamaConfig = PRESETS.micro;
let dir: string;
let store: CheckpointStore;
let app: Hono;
const requests: UploadRequest[] = [];
const runs = new Set(['r1', 'default']);
/** The fake policy's agreed hash per step (none: any parameters are accepted). */
const agreed = new Map<number, string>();
const MAX_BYTES = 2 * 1024 * 1024;

/**
 * A stand-in for the relay's admission (checkpoints/upload-admission.ts, tested on a real server in
 * wiring.test.ts): this file tests the route around it. Test headers deny (X-Test-Deny), name the body hash the "signature" covers
 * (X-Test-Signed-Sha256).
 */
function admit(req: UploadRequest): UploadAdmission {
  requests.push(req);
  if (req.header('X-Test-Deny') === '1')
    return { ok: false, status: 403, code: 'forbidden', message: 'not a voter of this epoch end' };
  const want = agreed.get(req.step);
  return {
    ok: true,
    uploader: 'client-a',
    config,
    maxBytes: MAX_BYTES,
    agreedHash: want ?? '',
    signs: (sha) => {
      const signed = req.header('X-Test-Signed-Sha256');
      return signed === undefined || signed === sha;
    },
    accepts: (hash) =>
      want === undefined || want === hash
        ? null
        : { ok: false, status: 409, code: 'param_hash_mismatch', message: 'not the agreed hash' },
  };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relay-ckpt-'));
  store = new CheckpointStore({ dataDir: dir, keep: 3 });
  app = checkpointRoutes({ store, runExists: (id) => runs.has(id), admitUpload: admit });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function upload(
  body: Uint8Array,
  step: number | string,
  epoch: number | string,
  headers: Record<string, string> = {},
  path = '/api/runs/r1/checkpoint',
): Promise<Response> {
  return Promise.resolve(
    app.request(path, {
      method: 'POST',
      body: body as Uint8Array<ArrayBuffer>,
      headers: {
        'Content-Type': 'application/octet-stream',
        'Content-Length': String(body.length),
        'X-Meshtrain-Step': String(step),
        'X-Meshtrain-Epoch': String(epoch),
        ...headers,
      },
    }),
  );
}

const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;
const sha256Hex = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

function paramsForSeed(seed: number): Parameters {
  return initParameters(config, seed);
}

describe('upload and download', () => {
  it('round-trips bit-exactly and reports the parameter hash', async () => {
    const params = paramsForSeed(7);
    const { safetensors } = encodeCheckpoint(config, params);
    const res = await upload(safetensors, 10, 1, { 'X-Test-Signed-Sha256': sha256Hex(safetensors) });
    expect(res.status).toBe(201);
    const summary = (await res.json()) as CheckpointSummary;
    expect(summary).toMatchObject({ step: 10, epoch: 1, paramHash: parameterHashHex(params) });
    expect(requests.at(-1)).toMatchObject({ runId: 'r1', step: 10, epoch: 1 });

    const latest = (await (await app.request('/api/runs/r1/checkpoint')).json()) as CheckpointSummary;
    expect(latest.files['model.safetensors']).toBe('/api/runs/r1/checkpoint/model.safetensors?step=10');
    const file = await app.request(latest.files['model.safetensors']!);
    expect(file.status).toBe(200);
    expect(file.headers.get('Cache-Control')).toContain('immutable');
    const bytes = new Uint8Array(await file.arrayBuffer());
    expect(Buffer.compare(bytes, safetensors)).toBe(0);
    const cfg = await (await app.request(latest.files['config.json']!)).text();
    expect(cfg).toBe(hfConfigJson(config));
    const back = decodeCheckpoint(cfg, bytes);
    expect(parameterHashHex(back.params)).toBe(summary.paramHash);

    // Range on the weights file, then the same upload again: idempotent (200), not a conflict.
    const part = await app.request('/api/runs/r1/checkpoint/model.safetensors', {
      headers: { Range: 'bytes=-16' },
    });
    expect(part.status).toBe(206);
    expect([...new Uint8Array(await part.arrayBuffer())]).toEqual([...safetensors.subarray(-16)]);
    expect((await upload(safetensors, 10, 1)).status).toBe(200);
    const other = encodeCheckpoint(config, paramsForSeed(8));
    const conflict = await upload(other.safetensors, 10, 1);
    expect(conflict.status).toBe(409);
    expect(await errorCode(conflict)).toBe('checkpoint_conflict');
    // The agreed parameters already stored: answered from the headers, the body is not needed.
    agreed.set(10, summary.paramHash);
    const moot = await upload(new Uint8Array(100), 10, 1);
    expect(moot.status).toBe(200);
    expect(((await moot.json()) as CheckpointSummary).paramHash).toBe(summary.paramHash);
  });

  it('keeps the newest three steps', async () => {
    for (const step of [20, 30, 40, 50]) {
      const res = await upload(encodeCheckpoint(config, paramsForSeed(step)).safetensors, step, 2);
      expect(res.status).toBe(201);
    }
    expect(await store.steps('r1')).toEqual([50, 40, 30]);
    expect((await readdir(store.runDir('r1'))).sort()).toEqual(['30', '40', '50']);
    const old = await app.request('/api/runs/r1/checkpoint?step=10');
    expect(old.status).toBe(404);
    expect(((await old.json()) as { error: { steps: number[] } }).error.steps).toEqual([50, 40, 30]);
  });

  it('refuses malformed uploads with typed 4xx errors', async () => {
    const { safetensors } = encodeCheckpoint(config, paramsForSeed(1));
    const shallow = { ...config, num_hidden_layers: 2 };
    const otherModel = encodeCheckpoint(shallow, initParameters(shallow, 1)).safetensors;
    // The hash is over f32 values, so BF16 tensors are refused.
    const bf16 = encodeCheckpoint(config, paramsForSeed(1), { dtype: 'BF16' }).safetensors;
    const cases: Array<[() => Promise<Response>, number, string]> = [
      [() => upload(safetensors.subarray(0, 100), 1, 0), 400, 'bad_checkpoint'],
      [() => upload(new Uint8Array([1, 2, 3]), 1, 0), 400, 'bad_checkpoint'],
      [() => upload(otherModel, 1, 0), 400, 'bad_checkpoint'],
      [() => upload(bf16, 1, 0), 400, 'bad_checkpoint'],
      [() => upload(safetensors, -1, 0), 400, 'bad_request'],
      [() => upload(safetensors, 1, 'x'), 400, 'bad_request'],
      [() => upload(safetensors, 60, 3, { 'X-Test-Deny': '1' }), 403, 'forbidden'],
      [() => upload(safetensors, 60, 3, { 'X-Test-Signed-Sha256': '00'.repeat(32) }), 401, 'unauthenticated'],
      [() => upload(safetensors, 1, 0, {}, '/api/runs/nope/checkpoint'), 404, 'unknown_run'],
    ];
    // One at a time: the route receives one upload per uploader at once (a second gets 429).
    for (const [res, status, code] of cases) {
      const r = await res();
      expect([r.status, await errorCode(r)]).toEqual([status, code]);
    }
    // Parameters other than the agreed ones.
    agreed.set(70, 'ab'.repeat(32));
    const r = await upload(safetensors, 70, 4);
    expect([r.status, await errorCode(r)]).toEqual([409, 'param_hash_mismatch']);
    expect(await store.steps('r1')).not.toContain(70);
  });

  it('refuses from the headers without reading the body: size, length, signer', async () => {
    let pulls = 0;
    // A body that is never finished: a route that read it would wait forever.
    const endless = () =>
      new ReadableStream<Uint8Array>(
        {
          pull(ctrl) {
            pulls++;
            ctrl.enqueue(new Uint8Array(65536));
          },
        },
        { highWaterMark: 0 },
      );
    const post = (headers: Record<string, string>) =>
      app.request('/api/runs/r1/checkpoint', {
        method: 'POST',
        body: endless(),
        duplex: 'half',
        headers: { 'X-Meshtrain-Step': '80', 'X-Meshtrain-Epoch': '5', ...headers },
      } as RequestInit);
    const tooBig = await post({ 'Content-Length': String(300 * 1024 * 1024) });
    expect([tooBig.status, await errorCode(tooBig)]).toEqual([413, 'payload_too_large']);
    expect(tooBig.headers.get('Connection')).toBe('close');
    const noLength = await post({});
    expect([noLength.status, await errorCode(noLength)]).toEqual([411, 'length_required']);
    const denied = await post({ 'Content-Length': '1000', 'X-Test-Deny': '1' });
    expect([denied.status, await errorCode(denied)]).toEqual([403, 'forbidden']);
    expect(pulls).toBe(0);
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
    const lostStore = new CheckpointStore({ dataDir: lostDir, keep: 3 });
    const lostApp = checkpointRoutes({
      store: lostStore,
      runExists: (id) => id === 'r2',
      admitUpload: admit,
      rollbackFor: (_run, step) => orphaned.has(step),
    });
    try {
      const params = paramsForSeed(11);
      await lostStore.save({ runId: 'r2', step: 5, epoch: 1, config, params, source: 'upload' });

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
