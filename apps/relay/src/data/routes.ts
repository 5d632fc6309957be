// HTTP data provider (PROTOCOL.md "HTTP API"): a run's dataset manifest, samples by id, and raw shards.
//
//   GET /api/runs/:id/data/manifest
//   GET /api/runs/:id/data/samples?start=S&end=E[&split=train|val]
//       body: little-endian int32, (E−S+1)·(seq_len+1) values, sample after sample (see dataset-store.ts
//       for what a sample is); headers X-Meshtrain-Seq-Len, X-Meshtrain-Samples. In a run whose data location
//       has `shuffle = { Seeded = … }` (the manifest's `order: "seeded"`), S..E of the train split are the run's
//       sample ids, past the split's end too: id i reads sample π_p(i mod n), p = ⌊i/n⌋ (@meshtrain/model's
//       sample-order.ts), gathered from wherever those samples live. Otherwise, and always for val, S..E are
//       samples of the split in corpus order and must lie inside it (clients fold run ids mod n).
//   GET /api/runs/:id/data/shards/:name   (one Range per request: 206 / 416; ETag = "<sha256>")
//
// Mount: `app.route('/', dataRoutes({ store, runData }))` — paths are absolute so the composition layer
// does not need to know our prefix. `runData(runId)` returns undefined for an unknown run (→ 404).
import { createHash } from 'node:crypto';
import { Hono } from 'hono';
import type { Context } from 'hono';
import { sampleOrderFor, shuffleSeedOf } from '@meshtrain/model';
import { DatasetError } from './errors.ts';
import { apiError, etagMatches, serveFile } from './http.ts';
import type { DatasetStore, OpenDataset, RunDataRef } from './dataset-store.ts';
// Types only: the reply shape every client reads (@meshtrain/client/relay-api).
import type { DataManifestResponse } from '@meshtrain/client/relay-api';
import { DEFAULT_MAX_SAMPLES_PER_REQUEST, DEFAULT_MAX_SAMPLE_BYTES } from '../defaults.ts';

export type { DataManifestResponse };

export { DEFAULT_MAX_SAMPLES_PER_REQUEST, DEFAULT_MAX_SAMPLE_BYTES } from '../defaults.ts';

export interface DataRoutesDeps {
  store: DatasetStore;
  /** The run's data location and max_seq_len; undefined when no such run exists. */
  runData: (runId: string) => RunDataRef | undefined | Promise<RunDataRef | undefined>;
  maxSamplesPerRequest?: number;
  maxSampleBytes?: number;
}

/** Caps on one samples answer: `samples` per request, `bytes` whatever the sequence length. */
interface SampleLimits {
  samples: number;
  bytes: number;
}

interface Opened {
  ds: OpenDataset;
  ref: RunDataRef;
}

export function dataRoutes(deps: DataRoutesDeps): Hono {
  const app = new Hono();
  const limits: SampleLimits = {
    samples: deps.maxSamplesPerRequest ?? DEFAULT_MAX_SAMPLES_PER_REQUEST,
    bytes: deps.maxSampleBytes ?? DEFAULT_MAX_SAMPLE_BYTES,
  };

  /** The opened dataset of `:id` with the run's data reference, or the error Response to send. */
  const datasetOf = async (c: Context): Promise<Opened | Response> => {
    const runId = c.req.param('id') ?? '';
    const ref = await deps.runData(runId);
    if (ref === undefined) return apiError(c, 404, 'unknown_run', `no run '${runId}' on this relay`);
    try {
      return { ds: await deps.store.open(ref), ref };
    } catch (err) {
      if (err instanceof DatasetError) return apiError(c, err.status, err.code, err.message);
      throw err;
    }
  };

  app.get('/api/runs/:id/data/manifest', async (c) => {
    const opened = await datasetOf(c);
    return opened instanceof Response ? opened : serveManifest(c, opened, limits);
  });
  app.get('/api/runs/:id/data/samples', async (c) => {
    const opened = await datasetOf(c);
    return opened instanceof Response ? opened : await serveSamples(c, opened, limits);
  });
  app.get('/api/runs/:id/data/shards/:name', async (c) => {
    const opened = await datasetOf(c);
    return opened instanceof Response ? opened : await serveShard(c, opened.ds);
  });
  return app;
}

/** Most samples one answer may hold at this dataset's sample width. */
function samplesPerRequest(ds: OpenDataset, limits: SampleLimits): number {
  return Math.max(1, Math.min(limits.samples, Math.floor(limits.bytes / ((ds.seqLen + 1) * 4))));
}

function serveManifest(c: Context, { ds, ref }: Opened, limits: SampleLimits): Response {
  const runId = c.req.param('id') ?? '';
  const base = `/api/runs/${encodeURIComponent(runId)}/data/shards/`;
  const body: DataManifestResponse = {
    run_id: runId,
    dataset: ds.name,
    seq_len: ds.seqLen,
    sample_tokens: ds.seqLen + 1,
    token_bytes: ds.manifest.token_bytes,
    vocab_size: ds.manifest.vocab_size,
    tokenizer: ds.manifest.tokenizer,
    samples: { train: ds.splits.train.index.sampleCount, val: ds.splits.val.index.sampleCount },
    order: shuffleSeedOf(ref.location) === null ? 'corpus' : 'seeded',
    max_samples_per_request: samplesPerRequest(ds, limits),
    shard_urls: Object.fromEntries(
      [...ds.splits.train.shards, ...ds.splits.val.shards].map((e) => [
        e.file,
        base + encodeURIComponent(e.file),
      ]),
    ),
    manifest: ds.manifest,
  };
  // The manifest can change only when the dataset is re-prepared; revalidate each time (cheap 304s).
  const etag = `"${ds.fingerprint}-${ds.seqLen}-${orderTag(ref)}"`;
  const headers = { ETag: etag, 'Cache-Control': 'no-cache' };
  if (etagMatches(c.req.header('If-None-Match'), etag)) return c.body(null, 304, headers);
  return c.json(body, 200, headers);
}

async function serveSamples(c: Context, { ds, ref }: Opened, limits: SampleLimits): Promise<Response> {
  const split = c.req.query('split') ?? 'train';
  if (split !== 'train' && split !== 'val')
    return apiError(c, 400, 'bad_split', `split must be 'train' or 'val', got '${split}'`);
  const count = ds.splits[split].index.sampleCount;
  // The val split is a fixed evaluation set: never reordered.
  const seeded = split === 'train' && count > 0 && shuffleSeedOf(ref.location) !== null;
  const start = intParam(c.req.query('start'));
  const end = intParam(c.req.query('end'));
  if (start === undefined || end === undefined)
    return apiError(
      c,
      400,
      'bad_sample_range',
      'start and end must be non-negative integers (sample ids, end inclusive)',
    );
  if (end < start) return apiError(c, 400, 'bad_sample_range', `end ${end} is before start ${start}`);
  if (end >= count && !seeded)
    return apiError(
      c,
      400,
      'sample_out_of_range',
      `samples ${start}..${end} are not all in 0..${count - 1} (${split} has ${count} samples of ${ds.seqLen + 1} tokens)`,
      { samples: count },
    );
  const n = end - start + 1;
  const limit = samplesPerRequest(ds, limits);
  if (n > limit)
    return apiError(c, 400, 'too_many_samples', `${n} samples requested, at most ${limit} per request`, {
      limit,
    });
  // Samples are a pure function of (dataset bytes, seq_len, split, order, start, end): safe to cache by that.
  const etag = `"${ds.fingerprint}-${ds.seqLen}-${split}-${split === 'train' ? orderTag(ref) : 'corpus'}-${start}-${end}"`;
  const headers: Record<string, string> = {
    ETag: etag,
    'Cache-Control': 'public, max-age=3600',
    'X-Meshtrain-Seq-Len': String(ds.seqLen),
    'X-Meshtrain-Samples': String(n),
  };
  if (etagMatches(c.req.header('If-None-Match'), etag)) return c.body(null, 304, headers);
  let tokens: Int32Array;
  try {
    if (seeded) {
      // At most `limit` ids, each mapped in constant time and memory: no table of the split.
      const order = sampleOrderFor(ref.location, count);
      tokens = await ds.readSampleIds(
        split,
        Array.from({ length: n }, (_, k) => order.at(start + k)),
      );
    } else tokens = await ds.readSamples(split, start, end);
  } catch (err) {
    if (err instanceof DatasetError) return apiError(c, 500, err.code, err.message);
    return apiError(c, 500, 'bad_dataset', (err as Error).message);
  }
  // Int32Array bytes are host-endian; every host we support is little-endian (safetensors.ts checks too).
  // readSamples returns a fresh array that owns its whole ArrayBuffer.
  return c.body(tokens.buffer as ArrayBuffer, 200, {
    ...headers,
    'Content-Type': 'application/octet-stream',
    'Content-Length': String(tokens.byteLength),
  });
}

async function serveShard(c: Context, ds: OpenDataset): Promise<Response> {
  // Only names listed in the manifest reach the disk, so `..`, slashes or encoded separators cannot.
  const name = c.req.param('name') ?? '';
  const entry = ds.shard(name);
  if (entry === undefined)
    return apiError(c, 404, 'unknown_shard', `'${name}' is not a shard of dataset '${ds.name}'`);
  // Not `immutable`: a shard's URL is its name, which a re-prepared dataset reuses; the ETag (its SHA-256)
  // makes revalidation a cheap 304 and lets `If-Range` resume a download safely.
  return await serveFile(c, {
    path: ds.shardPath(entry),
    etag: `"${entry.sha256}"`,
    contentType: 'application/octet-stream',
    cacheControl: 'public, max-age=3600',
    headers: { 'X-Meshtrain-Sha256': entry.sha256 },
  });
}

/** The run's order in ETags: a seeded order by a digest of its seed, so two seeds never share a validator. */
function orderTag(ref: RunDataRef): string {
  const seed = shuffleSeedOf(ref.location);
  return seed === null ? 'corpus' : `seeded-${createHash('sha256').update(seed).digest('hex').slice(0, 16)}`;
}

/** Sample ids: at most 15 digits, so every id (and id / n) is an exact double. */
function intParam(v: string | undefined): number | undefined {
  if (v === undefined || !/^\d{1,15}$/.test(v)) return undefined;
  return Number(v);
}
