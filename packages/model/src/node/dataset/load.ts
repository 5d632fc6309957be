// Loads a prepared dataset directory into memory (fine for the embedded corpus and for small runs; large
// datasets will want ranged reads through the same ShardIndex) and checks every shard against the manifest.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseManifest, type DataManifest, type SplitEntry } from '../../data/manifest.ts';
import { ShardIndex, readBatch } from '../../data/shards.ts';
import { DatasetError } from './errors.ts';
import { MANIFEST_FILE } from './prepare.ts';

export interface LoadedSplit {
  index: ShardIndex;
  tokens: number;
  /** Row-major int32 [indices.length, seqLen + 1]. */
  batch(indices: ArrayLike<number>): Int32Array;
}

export interface LoadedDataset {
  dir: string;
  manifest: DataManifest;
  train: LoadedSplit;
  val: LoadedSplit;
}

async function loadSplit(
  dir: string,
  manifest: DataManifest,
  split: SplitEntry,
  seqLen: number,
  verify: boolean,
): Promise<LoadedSplit> {
  const shards = await Promise.all(
    split.shards.map(async (s) => {
      const path = join(dir, s.file);
      const bytes = await readFile(path).catch(() => {
        throw new DatasetError(`${path}: listed in ${MANIFEST_FILE} but missing; run prepare-data again`);
      });
      if (bytes.length !== s.tokens * manifest.token_bytes)
        throw new DatasetError(
          `${path}: ${bytes.length} bytes, manifest says ${s.tokens} tokens × ${manifest.token_bytes} bytes`,
        );
      if (verify && createHash('sha256').update(bytes).digest('hex') !== s.sha256)
        throw new DatasetError(
          `${path}: SHA-256 differs from ${MANIFEST_FILE} (corrupt or replaced); prepare it again`,
        );
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }),
  );
  const index = new ShardIndex(
    shards.map((s) => s.length),
    { seqLen, tokenBytes: manifest.token_bytes },
  );
  return {
    index,
    tokens: split.tokens,
    batch: (indices) =>
      readBatch(
        index,
        indices,
        (shard, off, len) => (shards[shard] as Uint8Array).subarray(off, off + len),
        manifest.vocab_size,
      ),
  };
}

export async function loadDataset(
  dir: string,
  options: { seqLen: number; verify?: boolean },
): Promise<LoadedDataset> {
  const manifestPath = join(dir, MANIFEST_FILE);
  const text = await readFile(manifestPath, 'utf8').catch(() => {
    throw new DatasetError(`${manifestPath}: not found; create it with node-trainer prepare-data`);
  });
  const manifest = parseManifest(text);
  const verify = options.verify ?? true;
  return {
    dir,
    manifest,
    train: await loadSplit(dir, manifest, manifest.splits.train, options.seqLen, verify),
    val: await loadSplit(dir, manifest, manifest.splits.val, options.seqLen, verify),
  };
}
