// Checkpoint routes (PROTOCOL.md "HTTP API"):
//
//   GET  /api/runs/:id/checkpoint[?step=N]        → CheckpointSummary (newest, or that step); 404 if none
//   GET  /api/runs/:id/checkpoint/:file[?step=N]  → model.safetensors | config.json | meta.json, Range-friendly
//   POST /api/runs/:id/checkpoint                 → multipart/form-data upload (see below)
//
// Upload form fields: `model.safetensors` (file), `config.json` (file or text), `step`, `epoch`. The route
// checks structure (safetensors decodes, every tensor is F32, shapes match config.json, config matches
// the run's model when `expectedConfig` is given), computes the parameter hash, then asks the composition
// layer's `verifyUpload` whether this uploader may store this checkpoint (signature, membership, hash ==
// the coordinator's majority hash). Only then is it stored (atomic, re-encoded canonically: store.ts).
//
// Mount: `app.route('/', checkpointRoutes({ store, runExists, verifyUpload }))`.
import { createHash } from 'node:crypto';
import { Hono } from 'hono';
import type { Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import {
  CheckpointError,
  SafetensorsError,
  decodeCheckpoint,
  decodeSafetensors,
  parameterHashHex,
  parameterSpecs,
  type LlamaConfig,
} from '@meshtrain/model';
import { apiError, serveFile } from '../data/http.ts';
import {
  CHECKPOINT_FILES,
  CONFIG_FILE,
  CheckpointConflictError,
  META_FILE,
  WEIGHTS_FILE,
  type CheckpointFile,
  type CheckpointMeta,
  type CheckpointStore,
} from './store.ts';

/** Default upload cap: a 125m-preset f32 checkpoint is ~500 MB; bigger presets need a bigger relay. */
export const DEFAULT_MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;

/** What the verifier is asked about: everything it may want to check a signature or a hash against. */
export interface CheckpointUpload {
  runId: string;
  step: number;
  epoch: number;
  /** parameterHashHex of the uploaded parameters, hex. */
  paramHash: string;
  /** SHA-256 (hex) of the `model.safetensors` part exactly as uploaded (what a client signs). */
  safetensorsSha256: string;
  /** SHA-256 (hex) of the `config.json` part as uploaded. */
  configSha256: string;
  bytes: number;
}

export type UploadVerdict =
  | { ok: true; uploader?: string }
  | { ok: false; status: 400 | 401 | 403 | 409; code: string; message: string };

export type CheckpointUploadVerifier = (
  upload: CheckpointUpload,
  c: Context,
) => UploadVerdict | Promise<UploadVerdict>;

export interface CheckpointRoutesDeps {
  store: CheckpointStore;
  runExists: (runId: string) => boolean | Promise<boolean>;
  /** Decides who may upload and whether the hash is the accepted one (signed client, majority hash). */
  verifyUpload: CheckpointUploadVerifier;
  /** The run's model config; when given, uploads with another config.json are refused. */
  expectedConfig?: (runId: string) => LlamaConfig | undefined | Promise<LlamaConfig | undefined>;
  maxUploadBytes?: number;
  /**
   * True when nobody can ever upload the parameters of `step` (its epoch ended with no client left): a
   * request for it is then answered with the newest earlier checkpoint, marked `rolledBackFrom: step`, so
   * every joiner restarts from the same parameters instead of waiting forever.
   */
  rollbackFor?: (runId: string, step: number) => boolean | Promise<boolean>;
}

/** GET …/checkpoint answer. `files` maps file name → URL pinned to this step (`?step=N`). */
export interface CheckpointSummary {
  step: number;
  epoch: number;
  paramHash: string;
  files: Record<string, string>;
  sha256: Record<string, string>;
  bytes: Record<string, number>;
  source: CheckpointMeta['source'];
  createdAt: string;
  /** Set when this is an earlier checkpoint standing in for an orphaned step (see `rollbackFor`). */
  rolledBackFrom?: number;
}

export function summarize(meta: CheckpointMeta, runId: string, rolledBackFrom?: number): CheckpointSummary {
  const base = `/api/runs/${encodeURIComponent(runId)}/checkpoint/`;
  const names = [WEIGHTS_FILE, CONFIG_FILE] as const;
  return {
    step: meta.step,
    epoch: meta.epoch,
    paramHash: meta.param_hash,
    files: Object.fromEntries(names.map((n) => [n, `${base}${n}?step=${meta.step}`])),
    sha256: Object.fromEntries(names.map((n) => [n, meta.files[n].sha256])),
    bytes: Object.fromEntries(names.map((n) => [n, meta.files[n].bytes])),
    source: meta.source,
    createdAt: meta.created_at,
    ...(rolledBackFrom !== undefined ? { rolledBackFrom } : {}),
  };
}

const sha256 = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');

function intOf(v: unknown): number | undefined {
  return typeof v === 'string' && /^\d{1,15}$/.test(v) ? Number(v) : undefined;
}

export function checkpointRoutes(deps: CheckpointRoutesDeps): Hono {
  const app = new Hono();
  const maxUpload = deps.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;

  /** The requested checkpoint's meta (newest, or `?step=`), or the error Response to send. */
  const metaOf = async (c: Context): Promise<(CheckpointMeta & { rolledBackFrom?: number }) | Response> => {
    const runId = c.req.param('id') ?? '';
    if (!(await deps.runExists(runId)))
      return apiError(c, 404, 'unknown_run', `no run '${runId}' on this relay`);
    const stepQ = c.req.query('step');
    if (stepQ !== undefined) {
      const step = intOf(stepQ);
      if (step === undefined) return apiError(c, 400, 'bad_request', 'step must be a non-negative integer');
      const meta = await deps.store.meta(runId, step);
      if (meta) return meta;
      const steps = await deps.store.steps(runId);
      const earlier = steps.filter((s) => s < step);
      if (earlier.length > 0 && (await deps.rollbackFor?.(runId, step))) {
        const fallback = await deps.store.meta(runId, Math.max(...earlier));
        if (fallback) return { ...fallback, rolledBackFrom: step };
      }
      return apiError(c, 404, 'no_checkpoint', `run '${runId}' has no stored checkpoint for step ${step}`, {
        steps,
      });
    }
    return (
      (await deps.store.latest(runId)) ??
      apiError(c, 404, 'no_checkpoint', `run '${runId}' has no checkpoint yet`)
    );
  };

  app.get('/api/runs/:id/checkpoint', async (c) => {
    const meta = await metaOf(c);
    if (meta instanceof Response) return meta;
    // The newest checkpoint changes every epoch: never cache this answer; the files are pinned by step.
    return c.json(summarize(meta, c.req.param('id'), meta.rolledBackFrom), 200, {
      'Cache-Control': 'no-cache',
    });
  });

  app.get('/api/runs/:id/checkpoint/:file', async (c) => {
    const file = c.req.param('file');
    // A fixed list of names: nothing the client sends becomes part of a path.
    if (!(CHECKPOINT_FILES as readonly string[]).includes(file))
      return apiError(
        c,
        404,
        'unknown_file',
        `checkpoints have ${CHECKPOINT_FILES.join(', ')}; not '${file}'`,
      );
    const meta = await metaOf(c);
    if (meta instanceof Response) return meta;
    const name = file as CheckpointFile;
    const runId = c.req.param('id');
    const pinned = c.req.query('step') !== undefined;
    const etag =
      name === META_FILE ? `"meta-${meta.param_hash}-${meta.step}"` : `"${meta.files[name].sha256}"`;
    return await serveFile(c, {
      path: deps.store.filePath(runId, meta.step, name),
      etag,
      contentType: name === WEIGHTS_FILE ? 'application/octet-stream' : 'application/json',
      // A step's files never change (a conflicting upload is refused), so pinned URLs are immutable.
      cacheControl: pinned ? 'public, max-age=31536000, immutable' : 'no-cache',
      headers: { 'X-Meshtrain-Step': String(meta.step), 'X-Meshtrain-Param-Hash': meta.param_hash },
    });
  });

  app.post(
    '/api/runs/:id/checkpoint',
    async (c, next) => {
      const runId = c.req.param('id');
      if (!(await deps.runExists(runId)))
        return apiError(c, 404, 'unknown_run', `no run '${runId}' on this relay`);
      await next();
    },
    // Refuses by Content-Length at once and counts streamed bytes otherwise, before anything is buffered.
    bodyLimit({
      maxSize: maxUpload,
      onError: (c) =>
        apiError(c, 413, 'payload_too_large', `checkpoint uploads are limited to ${maxUpload} bytes`),
    }),
    async (c) => {
      const runId = c.req.param('id');
      if (!(c.req.header('Content-Type') ?? '').startsWith('multipart/form-data'))
        return apiError(
          c,
          415,
          'unsupported_media_type',
          `send multipart/form-data with parts ${WEIGHTS_FILE}, ${CONFIG_FILE}, step, epoch`,
        );
      let form: Record<string, string | File>;
      try {
        form = (await c.req.parseBody()) as Record<string, string | File>;
      } catch (err) {
        return apiError(c, 400, 'bad_request', `unreadable multipart body: ${(err as Error).message}`);
      }
      const weightsPart = form[WEIGHTS_FILE];
      const configPart = form[CONFIG_FILE];
      const step = intOf(form.step);
      const epoch = intOf(form.epoch);
      if (!(weightsPart instanceof File))
        return apiError(c, 400, 'bad_request', `the ${WEIGHTS_FILE} part (a file) is missing`);
      if (configPart === undefined)
        return apiError(c, 400, 'bad_request', `the ${CONFIG_FILE} part is missing`);
      if (step === undefined || epoch === undefined)
        return apiError(c, 400, 'bad_request', 'step and epoch must be non-negative integers');
      const weights = new Uint8Array(await weightsPart.arrayBuffer());
      const configText = typeof configPart === 'string' ? configPart : await configPart.text();

      let decoded: ReturnType<typeof decodeCheckpoint>;
      try {
        // The parameter hash is over f32 values; a BF16 upload would hash differently from every replica.
        for (const [name, t] of decodeSafetensors(weights).tensors)
          if (t.dtype !== 'F32')
            return apiError(c, 400, 'bad_checkpoint', `${name}: dtype ${t.dtype}; uploads must be F32`);
        decoded = decodeCheckpoint(configText, weights);
      } catch (err) {
        if (err instanceof SafetensorsError || err instanceof CheckpointError)
          return apiError(c, 400, 'bad_checkpoint', err.message, { reason: err.code });
        throw err;
      }
      const expected = await deps.expectedConfig?.(runId);
      if (expected !== undefined && !sameShape(expected, decoded.config))
        return apiError(c, 400, 'config_mismatch', `${CONFIG_FILE} does not describe this run's model`);

      const upload: CheckpointUpload = {
        runId,
        step,
        epoch,
        paramHash: parameterHashHex(decoded.params),
        safetensorsSha256: sha256(weights),
        configSha256: sha256(configText),
        bytes: weights.length,
      };
      const verdict = await deps.verifyUpload(upload, c);
      if (!verdict.ok) return apiError(c, verdict.status, verdict.code, verdict.message);
      try {
        const { meta, created } = await deps.store.save({
          runId,
          step,
          epoch,
          config: decoded.config,
          params: decoded.params,
          source: 'upload',
          paramHash: upload.paramHash,
          ...(verdict.uploader === undefined ? {} : { uploader: verdict.uploader }),
        });
        return c.json(summarize(meta, runId), created ? 201 : 200);
      } catch (err) {
        if (err instanceof CheckpointConflictError)
          return apiError(c, 409, 'checkpoint_conflict', err.message, {
            paramHash: err.existing.param_hash,
          });
        throw err;
      }
    },
  );

  return app;
}

/** Same model: every LlamaConfig field equal (parameterSpecs agree then, and so does the math). */
function sameShape(a: LlamaConfig, b: LlamaConfig): boolean {
  const keys = Object.keys(a) as (keyof LlamaConfig)[];
  return keys.every((k) => a[k] === b[k]) && parameterSpecs(a).length === parameterSpecs(b).length;
}
