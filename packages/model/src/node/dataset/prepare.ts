// Tokenizes documents into token shards plus manifest.json (format: ../../data/shards.ts and
// ../../data/manifest.ts). Documents are assigned wholly to train or val by a hash of their id, then streamed
// into fixed-size shards: `train-00000.bin`, `train-00001.bin`, …, `val-00000.bin`, ….
import { createHash } from 'node:crypto';
import { mkdir, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { DataManifest, ShardEntry, SplitEntry } from '../../data/manifest.ts';
import { encodeTokens, type TokenBytes } from '../../data/shards.ts';
import { heldOutDocuments } from '../../data/split.ts';
import { DEFAULT_SHARD_TOKENS } from '../../defaults.ts';
import type { Tokenizer } from '../../tokenizer/index.ts';
import { writeFileAtomic } from '../fs.ts';
import { DatasetError } from './errors.ts';

export interface SourceDocument {
  id: string;
  /** Size hint for progress (bytes of source text). */
  bytes: number;
  load(): Promise<string> | string;
}

export interface PrepareOptions {
  tokenizer: Tokenizer;
  tokenBytes: TokenBytes;
  valFraction: number;
  /** Seed of the held-out split (default 0). */
  splitSeed?: number;
  /** Tokens per shard file (default 2^24: 32 MiB of u16). */
  shardTokens?: number;
  documentSeparator?: string;
  source: string;
  onProgress?: (doneBytes: number, totalBytes: number) => void;
}

export const MANIFEST_FILE = 'manifest.json';
const SHARD_NAME = /^(train|val)-\d{5}\.bin$/;

/** Accumulates one split's token stream and cuts it into shard files of `shardTokens` tokens. */
class ShardWriter {
  readonly entries: ShardEntry[] = [];
  tokens = 0;
  documents = 0;
  private buffer: number[] = [];
  private readonly dir: string;
  private readonly split: string;
  private readonly tokenBytes: TokenBytes;
  private readonly shardTokens: number;

  constructor(dir: string, split: string, tokenBytes: TokenBytes, shardTokens: number) {
    this.dir = dir;
    this.split = split;
    this.tokenBytes = tokenBytes;
    this.shardTokens = shardTokens;
  }

  async push(ids: ArrayLike<number>): Promise<void> {
    for (let i = 0; i < ids.length; i++) {
      this.buffer.push(ids[i] as number);
      if (this.buffer.length === this.shardTokens) await this.flush();
    }
    this.tokens += ids.length;
  }

  async flush(): Promise<void> {
    if (this.buffer.length === 0) return;
    const bytes = encodeTokens(this.buffer, this.tokenBytes);
    const file = `${this.split}-${String(this.entries.length).padStart(5, '0')}.bin`;
    await writeFileAtomic(join(this.dir, file), bytes);
    this.entries.push({
      file,
      tokens: this.buffer.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    });
    this.buffer = [];
  }

  summary(): SplitEntry {
    return { documents: this.documents, tokens: this.tokens, shards: this.entries };
  }
}

export async function prepareShards(
  documents: readonly SourceDocument[],
  outDir: string,
  options: PrepareOptions,
): Promise<DataManifest> {
  const { tokenizer, tokenBytes } = options;
  if (tokenBytes === 2 && tokenizer.vocabSize > 0x10000)
    throw new DatasetError(
      `vocabulary of ${tokenizer.vocabSize} ids does not fit in 2-byte tokens: use --token-bytes 4`,
    );
  const shardTokens = options.shardTokens ?? DEFAULT_SHARD_TOKENS;
  if (!Number.isInteger(shardTokens) || shardTokens < 1)
    throw new DatasetError(`shard size ${shardTokens} must be ≥ 1`);
  if (documents.length === 0) throw new DatasetError('no documents to prepare');
  const separator = options.documentSeparator ?? '\n\n';
  const sepIds = tokenizer.encode(separator);

  await mkdir(outDir, { recursive: true });
  // Stale shards from an earlier, larger run would sit next to the new manifest: remove ours only.
  for (const name of await readdir(outDir)) if (SHARD_NAME.test(name)) await unlink(join(outDir, name));

  const val = heldOutDocuments(
    documents.map((d) => d.id),
    options.valFraction,
    options.splitSeed ?? 0,
  );
  const writers = {
    train: new ShardWriter(outDir, 'train', tokenBytes, shardTokens),
    val: new ShardWriter(outDir, 'val', tokenBytes, shardTokens),
  };
  const totalBytes = documents.reduce((n, d) => n + d.bytes, 0);
  let doneBytes = 0;
  for (const doc of documents) {
    const w = val.has(doc.id) ? writers.val : writers.train;
    await w.push(tokenizer.encode(await doc.load()));
    await w.push(sepIds);
    w.documents += 1;
    doneBytes += doc.bytes;
    options.onProgress?.(doneBytes, totalBytes);
  }
  await writers.train.flush();
  await writers.val.flush();

  const manifest: DataManifest = {
    format: 'meshtrain-token-shards',
    version: 1,
    tokenizer: tokenizer.name,
    vocab_size: tokenizer.vocabSize,
    token_bytes: tokenBytes,
    document_separator: separator,
    source: options.source,
    splits: { train: writers.train.summary(), val: writers.val.summary() },
  };
  // The manifest is written last: its presence marks a complete dataset (the cache relies on this).
  await writeFileAtomic(join(outDir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}
