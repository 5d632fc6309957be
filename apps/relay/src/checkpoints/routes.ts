// Checkpoint routes (PROTOCOL.md "HTTP API"):
//
//   GET  /api/runs/:id/checkpoint[?step=N]        → CheckpointSummary (newest, or that step); 404 if none
//   GET  /api/runs/:id/checkpoint/:file[?step=N]  → model.safetensors | config.json | meta.json, Range-friendly
//   POST /api/runs/:id/checkpoint                 → an upload (see below)
//
// An upload's body is the model.safetensors bytes; who signs it, its step and epoch are headers. The route
// decides in this order, so that a stranger costs the relay a header parse and nothing more:
//   1. from the headers alone (`admitUpload`, the composition layer's: signature headers fresh, signer a voter
//      of an agreed epoch end at that step) and the declared Content-Length (at most the run's model size),
//      before a byte of the body is read; a refusal closes the connection;
//   2. the body is streamed to a file and hashed as it arrives (never held in memory whole);
//   3. the signature is checked over that hash;
//   4. a worker thread decodes it for the run's model (every tensor F32), hashes the parameters and encodes
//      them canonically; the parameter hash must be the epoch's agreed one (`accepts`);
//   5. it is stored (atomic, canonical bytes: store.ts).
//
// Mount: `app.route('/', checkpointRoutes({ store, runExists, admitUpload }))`.
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { Hono } from 'hono';
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { CHECKPOINT_HEADER_EPOCH, CHECKPOINT_HEADER_STEP } from '@meshtrain/core';
import type { LlamaConfig } from '@meshtrain/model';
// Types only: the reply shape every client reads (@meshtrain/client/relay-api).
import type { CheckpointSummary } from '@meshtrain/client/relay-api';
import { apiError, serveFile } from '../data/http.ts';
import { BadCheckpointError, runCheckpointJob } from './off-thread.ts';
import type { EncodedJob } from './off-thread.ts';
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

/** Uploads of one run received at once (each from a different uploader). */
export const MAX_UPLOADS_PER_RUN = 2;

/** What an upload's headers ask to store. */
export interface UploadRequest {
  runId: string;
  step: number;
  epoch: number;
  /** A request header (the signature's are the admitter's to read). */
  header(name: string): string | undefined;
}

export interface UploadRefusal {
  ok: false;
  status: 400 | 401 | 403 | 404 | 409;
  code: string;
  message: string;
}

/** The answer to an upload's headers: a refusal, or what the body must then be. */
export type UploadAdmission =
  | {
      ok: true;
      /** Who signed: the checkpoint's uploader. */
      uploader: string;
      /** The run's model: what the body must encode. */
      config: LlamaConfig;
      /** Largest body accepted: the model's parameters as f32 plus the safetensors header. */
      maxBytes: number;
      /** The epoch's agreed parameter hash (hex): a stored checkpoint with it makes the upload moot. */
      agreedHash: string;
      /** Whether the request's signature covers a body with this SHA-256 (hex). */
      signs(bodySha256: string): boolean;
      /** Null when parameters with this hash (hex) may be stored for the epoch end, else why not. */
      accepts(paramHash: string): UploadRefusal | null;
    }
  | UploadRefusal;

export interface CheckpointRoutesDeps {
  store: CheckpointStore;
  runExists: (runId: string) => boolean | Promise<boolean>;
  /** Decides from an upload's headers whether its body is read at all, and what it must then hold. */
  admitUpload: (req: UploadRequest) => UploadAdmission | Promise<UploadAdmission>;
  /**
   * True when nobody can ever upload the parameters of `step` (its epoch ended with no client left): a
   * request for it is then answered with the newest earlier checkpoint, marked `rolledBackFrom: step`, so
   * every joiner restarts from the same parameters instead of waiting forever.
   */
  rollbackFor?: (runId: string, step: number) => boolean | Promise<boolean>;
}

export type { CheckpointSummary };

/** GET …/checkpoint answer. `files` maps file name → URL pinned to this step (`?step=N`). */
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

function intOf(v: unknown): number | undefined {
  return typeof v === 'string' && /^\d{1,15}$/.test(v) ? Number(v) : undefined;
}

/** Streams a request body into `file`, hashing it on the way; stops past `limit` bytes. */
async function receive(
  body: ReadableStream<Uint8Array> | null,
  file: string,
  limit: number,
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  if (body === null) return { bytes, sha256: hash.digest('hex') };
  await pipeline(
    Readable.fromWeb(body as WebReadableStream<Uint8Array>),
    async function* (source: AsyncIterable<Uint8Array>) {
      for await (const chunk of source) {
        bytes += chunk.length;
        if (bytes > limit) throw new Error(`more than the ${limit} bytes Content-Length declared`);
        hash.update(chunk);
        yield chunk;
      }
    },
    createWriteStream(file, { flags: 'wx', mode: 0o600 }),
  );
  return { bytes, sha256: hash.digest('hex') };
}

/** The requested checkpoint's meta (newest, or `?step=`), or the error Response to send. */
async function metaOf(
  c: Context,
  deps: CheckpointRoutesDeps,
): Promise<(CheckpointMeta & { rolledBackFrom?: number }) | Response> {
  const runId = c.req.param('id') ?? '';
  if (!(await deps.runExists(runId)))
    return apiError(c, 404, 'unknown_run', `no run '${runId}' on this relay`);
  const stepQ = c.req.query('step');
  if (stepQ === undefined)
    return (
      (await deps.store.latest(runId)) ??
      apiError(c, 404, 'no_checkpoint', `run '${runId}' has no checkpoint yet`)
    );
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

export function checkpointRoutes(deps: CheckpointRoutesDeps): Hono {
  const app = new Hono();

  app.get('/api/runs/:id/checkpoint', async (c) => {
    const meta = await metaOf(c, deps);
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
    const meta = await metaOf(c, deps);
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

  /** Uploads being received now: run → uploaders (one each, a few per run). */
  const receiving = new Map<string, Set<string>>();

  app.post('/api/runs/:id/checkpoint', async (c) => {
    const admitted = await admitHeaders(c, deps);
    if (admitted instanceof Response) return admitted;
    const { runId, admission } = admitted;
    // Another voter's upload already stored the agreed parameters: nothing this body could add.
    const existing = await deps.store.meta(runId, admitted.step);
    if (existing !== undefined && existing.param_hash === admission.agreedHash) {
      c.header('Connection', 'close');
      return c.json(summarize(existing, runId), 200);
    }
    const uploading = receiving.get(runId) ?? new Set<string>();
    if (uploading.has(admission.uploader) || uploading.size >= MAX_UPLOADS_PER_RUN)
      return refuseUnread(c, 429, 'busy', 'other uploads of this run are being received; retry shortly');
    uploading.add(admission.uploader);
    receiving.set(runId, uploading);
    let file: string | undefined;
    try {
      file = await deps.store.uploadPath();
      return await storeUpload(c, deps, admitted, file);
    } finally {
      uploading.delete(admission.uploader);
      if (uploading.size === 0) receiving.delete(runId);
      if (file !== undefined) await rm(file, { force: true });
    }
  });

  return app;
}

/**
 * A refusal before the body is read: it closes the connection, so the body is never read (node-server
 * drains at most a little of it).
 */
function refuseUnread(
  c: Context,
  status: ContentfulStatusCode,
  code: string,
  message: string,
  extra?: Record<string, unknown>,
): Response {
  c.header('Connection', 'close');
  return apiError(c, status, code, message, extra);
}

/** An upload its headers admit: where it goes, its declared size, and what its body must be. */
interface AdmittedUpload {
  runId: string;
  step: number;
  epoch: number;
  declared: number;
  admission: Extract<UploadAdmission, { ok: true }>;
}

/** Step 1: the upload's headers and declared size, before a byte of the body is read. */
async function admitHeaders(c: Context, deps: CheckpointRoutesDeps): Promise<AdmittedUpload | Response> {
  const runId = c.req.param('id') ?? '';
  if (!(await deps.runExists(runId)))
    return refuseUnread(c, 404, 'unknown_run', `no run '${runId}' on this relay`);
  const step = intOf(c.req.header(CHECKPOINT_HEADER_STEP));
  const epoch = intOf(c.req.header(CHECKPOINT_HEADER_EPOCH));
  if (step === undefined || epoch === undefined)
    return refuseUnread(
      c,
      400,
      'bad_request',
      `${CHECKPOINT_HEADER_STEP} and ${CHECKPOINT_HEADER_EPOCH} must be non-negative integers`,
    );
  const declared = intOf(c.req.header('Content-Length'));
  if (declared === undefined)
    return refuseUnread(
      c,
      411,
      'length_required',
      'send Content-Length: the size decides whether the upload is read',
    );
  const admission = await deps.admitUpload({ runId, step, epoch, header: (name) => c.req.header(name) });
  if (!admission.ok) return refuseUnread(c, admission.status, admission.code, admission.message);
  if (declared > admission.maxBytes)
    return refuseUnread(
      c,
      413,
      'payload_too_large',
      `this run's model.safetensors is at most ${admission.maxBytes} bytes, not ${declared}`,
    );
  return { runId, step, epoch, declared, admission };
}

/** Steps 2–5: receive the body into `file`, check its signature and parameters, store it. */
async function storeUpload(
  c: Context,
  deps: CheckpointRoutesDeps,
  { runId, step, epoch, declared, admission }: AdmittedUpload,
  file: string,
): Promise<Response> {
  let received: { bytes: number; sha256: string };
  try {
    received = await receive(c.req.raw.body, file, declared);
  } catch (err) {
    return apiError(c, 400, 'bad_request', `upload not received: ${(err as Error).message}`);
  }
  if (received.bytes !== declared)
    return apiError(
      c,
      400,
      'bad_request',
      `received ${received.bytes} bytes, Content-Length said ${declared}`,
    );
  if (!admission.signs(received.sha256))
    return apiError(
      c,
      401,
      'unauthenticated',
      'the upload signature does not verify for this run, step, epoch, body and timestamp',
    );
  let encoded: EncodedJob;
  try {
    encoded = await runCheckpointJob({ kind: 'decode', config: admission.config, file });
  } catch (err) {
    if (err instanceof BadCheckpointError)
      return apiError(c, 400, 'bad_checkpoint', err.message, { reason: err.reason });
    throw err;
  }
  const refused = admission.accepts(encoded.paramHash);
  if (refused) return apiError(c, refused.status, refused.code, refused.message);
  try {
    const { meta, created } = await deps.store.saveEncoded({
      runId,
      step,
      epoch,
      source: 'upload',
      uploader: admission.uploader,
      ...encoded,
    });
    return c.json(summarize(meta, runId), created ? 201 : 200);
  } catch (err) {
    if (err instanceof CheckpointConflictError)
      return apiError(c, 409, 'checkpoint_conflict', err.message, {
        paramHash: err.existing.param_hash,
      });
    throw err;
  }
}
