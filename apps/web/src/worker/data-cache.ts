// Training-data batches cached in this browser (IndexedDB via Dexie, table `dataBlocks`), in front of the relay's
// data source, so a reloaded or resumed tab does not download samples it already has.
//
// Samples are cached in aligned blocks of `samplesPerBlock` global sample indices, keyed by
// [runId+datasetKey+block]. A request is served from the blocks it covers; the blocks that are missing are
// downloaded whole (one inner `samples` call per contiguous run of missing blocks), so neighbouring batches hit the
// cache. The row width is derived from what the source returns. The store is bounded: least recently used blocks are
// evicted (across all runs) once it holds more than `maxBytes`. Any IndexedDB failure (quota, private mode, a
// blocked upgrade) turns the cache into a pass-through for the rest of the session, with one log line: the cache
// must never fail training.
import type { DataSource } from '@meshtrain/client';
import { meshtrainDb } from '../lib/db.ts';
import type { StoredDataBlock } from '../lib/db.ts';

export const DEFAULT_SAMPLES_PER_BLOCK = 32;
export const DEFAULT_MAX_DATA_CACHE_BYTES = 64 * 1024 * 1024;

export interface DataCacheStats {
  /** Requested samples served from the cache. */
  hits: number;
  /** Samples downloaded from the inner source (whole blocks, so possibly more than were requested). */
  misses: number;
  /** Bytes the inner source reported downloading on behalf of this cache (its `bytes` counter's deltas). */
  downloadedBytes: number;
}

export interface DataCacheOptions {
  runId: string;
  /** Identifies the data (built from the run's data config): blocks of different keys never mix. */
  datasetKey: string;
  /** Samples per cached block (default 32). */
  samplesPerBlock?: number;
  /** Bound on the whole store's rows, in bytes (default 64 MiB); least recently used blocks go first. */
  maxBytes?: number;
  log?: (line: string) => void;
}

export type CachedDataSource = DataSource & { readonly stats: DataCacheStats };

type BlockKey = [string, string, number];

export function cachedDataSource(
  inner: DataSource & { bytes: number },
  o: DataCacheOptions,
): CachedDataSource {
  return new BlockCache(inner, o);
}

/** The blocks a request covers, in order: their rows when cached (or just downloaded), undefined when not. */
type Blocks = (Int32Array | undefined)[];

class BlockCache implements CachedDataSource {
  readonly stats: DataCacheStats = { hits: 0, misses: 0, downloadedBytes: 0 };
  private readonly inner: DataSource & { bytes: number };
  private readonly o: DataCacheOptions;
  private readonly per: number;
  private readonly maxBytes: number;
  private disabled = false;
  /** The store's total bytes as last counted (null: not counted yet). Other tabs may write too: recounted before evicting. */
  private total: number | null = null;
  private clock = 0;

  constructor(inner: DataSource & { bytes: number }, o: DataCacheOptions) {
    this.inner = inner;
    this.o = o;
    this.per = o.samplesPerBlock ?? DEFAULT_SAMPLES_PER_BLOCK;
    this.maxBytes = o.maxBytes ?? DEFAULT_MAX_DATA_CACHE_BYTES;
    if (!Number.isInteger(this.per) || this.per < 1)
      throw new Error(`samplesPerBlock must be a positive integer, got ${this.per}`);
  }

  async samples(start: number, end: number): Promise<Int32Array> {
    if (end < start) return this.inner.samples(start, end);
    if (this.disabled) return this.passThrough(start, end);
    const first = Math.floor(start / this.per);
    const blocks = await this.lookup(first, Math.floor(end / this.per));
    if (blocks === null) return this.passThrough(start, end);
    const cached = blocks.map((b) => b !== undefined);
    const fresh = await this.fill(blocks, first);
    const assembled = this.assemble(blocks, cached, first, start, end);
    if (assembled === null) {
      // Cached rows of another width under this key: the key does not identify the data. Serve from the source.
      this.o.log?.(
        `data cache: blocks of "${this.o.datasetKey}" differ in row width; downloading samples ${start}..${end}`,
      );
      return this.passThrough(start, end);
    }
    try {
      await this.store(fresh, assembled.touched);
    } catch (err) {
      this.disable(err);
    }
    return assembled.out;
  }

  /** Strictly increasing within this tab, wall-clock across tabs and reloads. */
  private now(): number {
    return (this.clock = Math.max(Date.now(), this.clock + 1));
  }

  private key(block: number): BlockKey {
    return [this.o.runId, this.o.datasetKey, block];
  }

  private disable(err: unknown): void {
    if (this.disabled) return;
    this.disabled = true;
    const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    this.o.log?.(`data cache disabled, downloading every batch (IndexedDB failed: ${why.split('\n')[0]})`);
  }

  private async download(start: number, end: number): Promise<Int32Array> {
    const before = this.inner.bytes;
    try {
      return await this.inner.samples(start, end);
    } finally {
      this.stats.downloadedBytes += this.inner.bytes - before;
    }
  }

  private async passThrough(start: number, end: number): Promise<Int32Array> {
    const rows = await this.download(start, end);
    this.stats.misses += end - start + 1;
    return rows;
  }

  /** Blocks first..last from the store (whole blocks only); null when IndexedDB failed (the cache is off). */
  private async lookup(first: number, last: number): Promise<Blocks | null> {
    try {
      const keys: BlockKey[] = [];
      for (let b = first; b <= last; b++) keys.push(this.key(b));
      const found = await meshtrainDb().dataBlocks.bulkGet(keys);
      return found.map((f) => (f !== undefined && f.count === this.per ? f.rows : undefined));
    } catch (err) {
      this.disable(err);
      return null;
    }
  }

  /** Downloads each contiguous run of missing blocks in one call; returns the new blocks to store. */
  private async fill(blocks: Blocks, first: number): Promise<StoredDataBlock[]> {
    const per = this.per;
    const fresh: StoredDataBlock[] = [];
    const t = this.now();
    for (let i = 0; i < blocks.length;) {
      if (blocks[i] !== undefined) {
        i++;
        continue;
      }
      let j = i;
      while (j + 1 < blocks.length && blocks[j + 1] === undefined) j++;
      const count = (j - i + 1) * per;
      const rows = await this.download((first + i) * per, (first + j + 1) * per - 1);
      if (rows.length % count !== 0)
        throw new Error(
          `data source returned ${rows.length} ids for ${count} samples (not a whole row width)`,
        );
      const width = rows.length / count;
      this.stats.misses += count;
      for (let k = i; k <= j; k++) {
        const part = rows.slice((k - i) * per * width, (k - i + 1) * per * width);
        blocks[k] = part;
        fresh.push({
          runId: this.o.runId,
          datasetKey: this.o.datasetKey,
          block: first + k,
          count: per,
          rows: part,
          bytes: part.byteLength,
          lastUsed: t,
        });
      }
      i = j + 1;
    }
    return fresh;
  }

  /**
   * The requested range out of the (now complete) blocks, counting hits and the cached blocks it touched;
   * null when the blocks differ in row width.
   */
  private assemble(
    blocks: Blocks,
    cached: readonly boolean[],
    first: number,
    start: number,
    end: number,
  ): { out: Int32Array; touched: BlockKey[] } | null {
    const per = this.per;
    const width = (blocks[0] as Int32Array).length / per;
    if (blocks.some((rows) => (rows as Int32Array).length !== per * width)) return null;
    const out = new Int32Array((end - start + 1) * width);
    const touched: BlockKey[] = [];
    for (let k = 0; k < blocks.length; k++) {
      const rows = blocks[k] as Int32Array;
      const b = first + k;
      const lo = Math.max(start, b * per);
      const hi = Math.min(end, (b + 1) * per - 1);
      out.set(rows.subarray((lo - b * per) * width, (hi - b * per + 1) * width), (lo - start) * width);
      if (cached[k]) {
        this.stats.hits += hi - lo + 1;
        touched.push(this.key(b));
      }
    }
    return { out, touched };
  }

  private async countBytes(): Promise<number> {
    const sizes = await meshtrainDb().dataBlocks.orderBy('bytes').keys();
    let sum = 0;
    for (const s of sizes) sum += s as number;
    return sum;
  }

  /** Deletes least recently used blocks until the store holds at most maxBytes. */
  private async evict(): Promise<void> {
    const table = meshtrainDb().dataBlocks;
    let current = await this.countBytes();
    while (current > this.maxBytes) {
      const oldest = await table.orderBy('lastUsed').limit(16).toArray();
      if (oldest.length === 0) break;
      const gone: BlockKey[] = [];
      for (const b of oldest) {
        if (current <= this.maxBytes) break;
        gone.push([b.runId, b.datasetKey, b.block]);
        current -= b.bytes;
      }
      await table.bulkDelete(gone);
    }
    this.total = current;
  }

  private async store(fresh: StoredDataBlock[], touched: BlockKey[]): Promise<void> {
    const table = meshtrainDb().dataBlocks;
    if (touched.length > 0) {
      const t = this.now();
      await table.bulkUpdate(touched.map((k) => ({ key: k, changes: { lastUsed: t } })));
    }
    if (fresh.length === 0) return;
    this.total ??= await this.countBytes();
    await table.bulkPut(fresh);
    this.total += fresh.reduce((a, b) => a + b.bytes, 0);
    if (this.total > this.maxBytes) await this.evict();
  }
}
