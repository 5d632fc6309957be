import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShardIndex, encodeTokens, readBatch, seededOrder, type DataManifest } from '@meshtrain/model';
import type { DataLocation } from '@meshtrain/core';
import { DatasetStore, dataRoutes, parseRange } from '../src/data/index.ts';
import type { Hono } from 'hono';
import { createAdaptorServer } from '@hono/node-server';
import { relayDataSource } from '@meshtrain/client';

const SEQ = 8;
let root: string;
let app: Hono;
let shards: Uint8Array[];

/** Two train shards of u16 tokens (37 and 20 tokens) and one val shard, ids derived from positions. */
async function makeDataset(dir: string): Promise<Uint8Array[]> {
  await mkdir(dir, { recursive: true });
  const ids = (n: number, base: number) => Array.from({ length: n }, (_, i) => (base + i * 7) % 1000);
  const files = [
    { file: 'train-00000.bin', bytes: encodeTokens(ids(37, 1), 2) },
    { file: 'train-00001.bin', bytes: encodeTokens(ids(20, 500), 2) },
    { file: 'val-00000.bin', bytes: encodeTokens(ids(17, 900), 2) },
  ];
  for (const f of files) await writeFile(join(dir, f.file), f.bytes);
  const entry = (f: (typeof files)[number]) => ({
    file: f.file,
    tokens: f.bytes.length / 2,
    sha256: createHash('sha256').update(f.bytes).digest('hex'),
  });
  const manifest: DataManifest = {
    format: 'meshtrain-token-shards',
    version: 1,
    tokenizer: 'test',
    vocab_size: 1000,
    token_bytes: 2,
    document_separator: '\n\n',
    source: 'test',
    splits: {
      train: { documents: 2, tokens: 57, shards: [entry(files[0]!), entry(files[1]!)] },
      val: { documents: 1, tokens: 17, shards: [entry(files[2]!)] },
    },
  };
  await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest));
  return files.map((f) => f.bytes);
}

const SEED = Array.from({ length: 32 }, (_, i) => (i * 29 + 3) % 256);

const runs: Record<string, DataLocation> = {
  r1: { Relay: { dataset: 'toy', token_size_in_bytes: 'TwoBytes', shuffle: 'DontShuffle' } },
  seeded: { Relay: { dataset: 'toy', token_size_in_bytes: 'TwoBytes', shuffle: { Seeded: SEED } } },
  wide: { Relay: { dataset: 'toy', token_size_in_bytes: 'FourBytes', shuffle: 'DontShuffle' } },
  missing: { Relay: { dataset: 'nope', token_size_in_bytes: 'TwoBytes', shuffle: 'DontShuffle' } },
  evil: { Relay: { dataset: '../toy', token_size_in_bytes: 'TwoBytes', shuffle: 'DontShuffle' } },
  local: { Local: '/etc' },
};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'relay-data-'));
  shards = await makeDataset(join(root, 'toy'));
  const store = new DatasetStore({ datasetsDir: root });
  app = dataRoutes({
    store,
    runData: (id) => (runs[id] === undefined ? undefined : { location: runs[id], seqLen: SEQ }),
    maxSamplesPerRequest: 4,
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const get = (path: string, headers: Record<string, string> = {}) => app.request(path, { headers });

describe('manifest and samples', () => {
  it('describes the dataset', async () => {
    const res = await get('/api/runs/r1/data/manifest');
    expect(res.status).toBe(200);
    const m = (await res.json()) as Record<string, unknown>;
    // shard 0: floor((37-1)/8) = 4 samples; shard 1: floor(19/8) = 2; val: floor(16/8) = 2.
    expect(m.samples).toEqual({ train: 6, val: 2 });
    expect(m.seq_len).toBe(SEQ);
    expect(m.sample_tokens).toBe(SEQ + 1);
    expect(m.shard_urls).toMatchObject({ 'train-00001.bin': '/api/runs/r1/data/shards/train-00001.bin' });
    const etag = res.headers.get('ETag')!;
    expect((await get('/api/runs/r1/data/manifest', { 'If-None-Match': etag })).status).toBe(304);
  });

  it('serves samples equal to the shard reader, across a shard boundary', async () => {
    const index = new ShardIndex([shards[0]!.length, shards[1]!.length], { seqLen: SEQ, tokenBytes: 2 });
    const expected = readBatch(index, [2, 3, 4, 5], (s, off, len) => shards[s]!.subarray(off, off + len));
    const res = await get('/api/runs/r1/data/samples?start=2&end=5');
    expect(res.status).toBe(200);
    expect(res.headers.get('X-Meshtrain-Samples')).toBe('4');
    const got = new Int32Array(await res.arrayBuffer());
    expect(got.length).toBe(4 * (SEQ + 1));
    expect([...got]).toEqual([...expected]);
    // Cross-check one sample against the raw little-endian u16 bytes: sample 4 = shard 1's sample 0.
    const dv = new DataView(shards[1]!.buffer, shards[1]!.byteOffset);
    expect(got[2 * (SEQ + 1)]).toBe(dv.getUint16(0, true));
    const val = new Int32Array(
      await (await get('/api/runs/r1/data/samples?start=1&end=1&split=val')).arrayBuffer(),
    );
    const vdv = new DataView(shards[2]!.buffer, shards[2]!.byteOffset);
    expect([...val]).toEqual(Array.from({ length: SEQ + 1 }, (_, k) => vdv.getUint16((SEQ + k) * 2, true)));
  });

  it('refuses bad sample requests with typed errors', async () => {
    const code = async (q: string) => {
      const res = await get(`/api/runs/r1/data/samples${q}`);
      return [res.status, ((await res.json()) as { error: { code: string } }).error.code];
    };
    expect(await code('?start=0&end=6')).toEqual([400, 'sample_out_of_range']);
    expect(await code('?start=3&end=2')).toEqual([400, 'bad_sample_range']);
    expect(await code('?start=-1&end=2')).toEqual([400, 'bad_sample_range']);
    expect(await code('?start=0')).toEqual([400, 'bad_sample_range']);
    expect(await code('?start=0&end=4')).toEqual([400, 'too_many_samples']);
    expect(await code('?start=0&end=0&split=test')).toEqual([400, 'bad_split']);
  });

  it('answers unknown runs, datasets and locations with 4xx', async () => {
    const status = async (path: string) => {
      const res = await get(path);
      return [res.status, ((await res.json()) as { error: { code: string } }).error.code];
    };
    expect(await status('/api/runs/zzz/data/manifest')).toEqual([404, 'unknown_run']);
    expect(await status('/api/runs/missing/data/manifest')).toEqual([404, 'unknown_dataset']);
    expect(await status('/api/runs/evil/data/manifest')).toEqual([404, 'unknown_dataset']);
    expect(await status('/api/runs/local/data/manifest')).toEqual([409, 'unsupported_data_location']);
    expect(await status('/api/runs/wide/data/manifest')).toEqual([409, 'token_size_mismatch']);
  });
});

describe('a seeded run', () => {
  const row = SEQ + 1;
  const order = seededOrder(6, Uint8Array.from(SEED));
  /** What the shard reader holds for these training samples. */
  const expected = (samples: number[]) => {
    const index = new ShardIndex([shards[0]!.length, shards[1]!.length], { seqLen: SEQ, tokenBytes: 2 });
    return [...readBatch(index, samples, (s, off, len) => shards[s]!.subarray(off, off + len))];
  };
  const samples = async (run: string, q: string) => {
    const res = await get(`/api/runs/${run}/data/samples?${q}`);
    expect(res.status, q).toBe(200);
    return { body: [...new Int32Array(await res.arrayBuffer())], etag: res.headers.get('ETag') };
  };

  it('says so in the manifest, under a validator of its own', async () => {
    const seeded = await get('/api/runs/seeded/data/manifest');
    const corpus = await get('/api/runs/r1/data/manifest');
    expect(((await seeded.json()) as { order: string }).order).toBe('seeded');
    expect(((await corpus.json()) as { order: string }).order).toBe('corpus');
    expect(seeded.headers.get('ETag')).not.toBe(corpus.headers.get('ETag'));
  });

  it('serves run ids through the permutation of their pass, gathered from both shards', async () => {
    // Pass 0 in two requests: every sample once, not in corpus order.
    const pass0 = [0, 1, 2, 3, 4, 5].map((i) => order.at(i));
    expect([...pass0].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(pass0).not.toEqual([0, 1, 2, 3, 4, 5]);
    const a = await samples('seeded', 'start=0&end=3');
    const b = await samples('seeded', 'start=4&end=5');
    expect([...a.body, ...b.body]).toEqual(expected(pass0));
    // The corpus-order run's ETag for the same range is not the seeded one's.
    expect((await samples('r1', 'start=0&end=3')).etag).not.toBe(a.etag);
  });

  it('reads past the end of the split, each pass in a new order, across the wrap in one request', async () => {
    const pass1 = [6, 7, 8, 9, 10, 11].map((i) => order.at(i));
    expect([...pass1].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(pass1).not.toEqual([0, 1, 2, 3, 4, 5].map((i) => order.at(i)));
    // Ids 4..7: the last two of pass 0, the first two of pass 1.
    const wrap = await samples('seeded', 'start=4&end=7');
    expect(wrap.body.length).toBe(4 * row);
    expect(wrap.body).toEqual(expected([4, 5, 6, 7].map((i) => order.at(i))));
    // A pass a billion passes on, and the largest id the route takes (15 digits).
    const far = 6_000_000_000;
    expect((await samples('seeded', `start=${far}&end=${far + 3}`)).body).toEqual(
      expected([0, 1, 2, 3].map((k) => order.at(far + k))),
    );
    const last = 999_999_999_999_999;
    expect((await samples('seeded', `start=${last - 1}&end=${last}`)).body).toEqual(
      expected([order.at(last - 1), order.at(last)]),
    );
  });

  it("is read by the client's relayDataSource over HTTP: run ids in a seeded order, folded in corpus order", async () => {
    const server = createAdaptorServer({ fetch: app.fetch });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      // 14 ids in requests of at most 3 (the route's cap is 4): passes 0, 1 and the start of 2.
      const seeded = relayDataSource(url, 'seeded', { maxPerRequest: 3 });
      expect(await seeded.order()).toBe('seeded');
      const ids = Array.from({ length: 14 }, (_, i) => i);
      expect([...(await seeded.samples(0, 13))]).toEqual(expected(ids.map((i) => order.at(i))));
      const corpus = relayDataSource(url, 'r1');
      expect(await corpus.order()).toBe('corpus');
      expect([...(await corpus.samples(4, 9))]).toEqual(expected([4, 5, 0, 1, 2, 3]));
      // The val split of a seeded run is corpus order, folded too.
      const val = relayDataSource(url, 'seeded', { split: 'val' });
      expect(await val.order()).toBe('corpus');
      expect((await val.samples(1, 2)).length).toBe(2 * row);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('keeps the val split in corpus order, and the caps and errors', async () => {
    expect((await samples('seeded', 'split=val&start=0&end=1')).body).toEqual(
      (await samples('r1', 'split=val&start=0&end=1')).body,
    );
    const code = async (q: string) => {
      const res = await get(`/api/runs/seeded/data/samples${q}`);
      return [res.status, ((await res.json()) as { error: { code: string } }).error.code];
    };
    expect(await code('?split=val&start=0&end=2')).toEqual([400, 'sample_out_of_range']);
    expect(await code('?start=6&end=10')).toEqual([400, 'too_many_samples']);
    expect(await code('?start=9&end=8')).toEqual([400, 'bad_sample_range']);
    expect(await code('?start=0&end=1000000000000000')).toEqual([400, 'bad_sample_range']);
  });
});

describe('shards', () => {
  const url = '/api/runs/r1/data/shards/train-00000.bin';
  it('serves the whole shard with an ETag', async () => {
    const res = await get(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('Accept-Ranges')).toBe('bytes');
    expect(res.headers.get('Content-Length')).toBe(String(shards[0]!.length));
    const body = new Uint8Array(await res.arrayBuffer());
    expect(Buffer.compare(body, shards[0]!)).toBe(0);
    const etag = res.headers.get('ETag')!;
    expect(etag).toBe(`"${createHash('sha256').update(shards[0]!).digest('hex')}"`);
    expect((await get(url, { 'If-None-Match': etag })).status).toBe(304);
  });

  it('answers HEAD with the headers only', async () => {
    const res = await app.request(url, { method: 'HEAD', headers: { Range: 'bytes=0-9' } });
    expect(res.status).toBe(206);
    expect(res.headers.get('Content-Length')).toBe('10');
    expect((await res.arrayBuffer()).byteLength).toBe(0);
  });

  it('serves single and suffix ranges', async () => {
    const res = await get(url, { Range: 'bytes=4-13' });
    expect(res.status).toBe(206);
    expect(res.headers.get('Content-Range')).toBe(`bytes 4-13/${shards[0]!.length}`);
    expect(res.headers.get('Content-Length')).toBe('10');
    expect([...new Uint8Array(await res.arrayBuffer())]).toEqual([...shards[0]!.subarray(4, 14)]);
    const suffix = await get(url, { Range: 'bytes=-6' });
    expect(suffix.status).toBe(206);
    expect([...new Uint8Array(await suffix.arrayBuffer())]).toEqual([...shards[0]!.subarray(-6)]);
    const open = await get(url, { Range: 'bytes=70-' });
    expect([...new Uint8Array(await open.arrayBuffer())]).toEqual([...shards[0]!.subarray(70)]);
    // If-Range with a stale validator: the whole file, not a range of a different version.
    const stale = await get(url, { Range: 'bytes=0-1', 'If-Range': '"old"' });
    expect(stale.status).toBe(200);
  });

  it('answers unsatisfiable or malformed ranges with 416', async () => {
    for (const range of [
      'bytes=74-',
      'bytes=1000-2000',
      'bytes=5-2',
      'bytes=0-1,4-5',
      'items=0-1',
      'bytes=-0',
    ]) {
      const res = await get(url, { Range: range });
      expect(res.status, range).toBe(416);
      expect(res.headers.get('Content-Range')).toBe(`bytes */${shards[0]!.length}`);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('range_not_satisfiable');
    }
  });

  it('never maps a file name outside the manifest to the disk', async () => {
    for (const name of ['manifest.json', '..%2Fetc%2Fpasswd', '%2E%2E', 'train-00009.bin']) {
      const res = await get(`/api/runs/r1/data/shards/${name}`);
      expect(res.status, name).toBe(404);
    }
  });

  it('parseRange edge cases', () => {
    expect(parseRange('bytes=0-0', 1)).toEqual({ start: 0, end: 0 });
    expect(parseRange('bytes=-100', 10)).toEqual({ start: 0, end: 9 });
    expect(parseRange('bytes=5-100', 10)).toEqual({ start: 5, end: 9 });
    expect(typeof parseRange('bytes=0-', 0)).toBe('string');
    expect(parseRange(undefined, 10)).toBeNull();
  });
});

describe('brown', () => {
  it('prepares the same bytes as node-trainer prepare-data, and serves them', async () => {
    // Both apps prepare through @meshtrain/model/node; this holds their wiring (directory name, token
    // width, split options) equal. node-trainer's wrapper is not exported from its package, so the test
    // reaches into its source.
    const store = new DatasetStore({ datasetsDir: join(root, 'cache') });
    const dir = await store.ensureDefault(2);
    expect(dir).toBe(join(root, 'cache', 'brown-v1-u16'));
    const ours = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as DataManifest;
    const trainer = await import('../../node-trainer/src/dataset/brown.ts');
    const theirsDir = join(root, 'brown-theirs');
    await trainer.prepareBrown(theirsDir, { tokenBytes: 2, quiet: true });
    expect(await readFile(join(dir, 'manifest.json'), 'utf8')).toBe(
      await readFile(join(theirsDir, 'manifest.json'), 'utf8'),
    );
    expect(ours.splits.train.tokens).toBeGreaterThan(5_000_000);

    const brownApp = dataRoutes({
      store,
      runData: () => ({
        location: { Relay: { dataset: 'brown', token_size_in_bytes: 'TwoBytes', shuffle: 'DontShuffle' } },
        seqLen: 128,
      }),
    });
    const m = (await (await brownApp.request('/api/runs/default/data/manifest')).json()) as {
      samples: { train: number };
    };
    expect(m.samples.train).toBe(Math.floor((ours.splits.train.tokens - 1) / 128));
    const res = await brownApp.request('/api/runs/default/data/samples?start=0&end=0');
    const text = Buffer.from(Uint8Array.from(new Int32Array(await res.arrayBuffer()))).toString('latin1');
    expect(text.length).toBe(129);
  }, 60_000);
});
