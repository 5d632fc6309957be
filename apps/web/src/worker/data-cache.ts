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
  const per = o.samplesPerBlock ?? DEFAULT_SAMPLES_PER_BLOCK;
  const maxBytes = o.maxBytes ?? DEFAULT_MAX_DATA_CACHE_BYTES;
  if (!Number.isInteger(per) || per < 1)
    throw new Error(`samplesPerBlock must be a positive integer, got ${per}`);
  const stats: DataCacheStats = { hits: 0, misses: 0, downloadedBytes: 0 };
  let disabled = false;
  /** The store's total bytes as last counted (null: not counted yet). Other tabs may write too: recounted before evicting. */
  let total: number | null = null;
  let clock = 0;
  /** Strictly increasing within this tab, wall-clock across tabs and reloads. */
  const now = (): number => (clock = Math.max(Date.now(), clock + 1));
  const key = (block: number): BlockKey => [o.runId, o.datasetKey, block];

  function disable(err: unknown): void {
    if (disabled) return;
    disabled = true;
    const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    o.log?.(`data cache disabled, downloading every batch (IndexedDB failed: ${why.split('\n')[0]})`);
  }

  async function download(start: number, end: number): Promise<Int32Array> {
    const before = inner.bytes;
    try {
      return await inner.samples(start, end);
    } finally {
      stats.downloadedBytes += inner.bytes - before;
    }
  }

  async function countBytes(): Promise<number> {
    const sizes = await meshtrainDb().dataBlocks.orderBy('bytes').keys();
    let sum = 0;
    for (const s of sizes) sum += s as number;
    return sum;
  }

  /** Deletes least recently used blocks until the store holds at most maxBytes. */
  async function evict(): Promise<void> {
    const table = meshtrainDb().dataBlocks;
    let current = await countBytes();
    while (current > maxBytes) {
      const oldest = await table.orderBy('lastUsed').limit(16).toArray();
      if (oldest.length === 0) break;
      const gone: BlockKey[] = [];
      for (const b of oldest) {
        if (current <= maxBytes) break;
        gone.push([b.runId, b.datasetKey, b.block]);
        current -= b.bytes;
      }
      await table.bulkDelete(gone);
    }
    total = current;
  }

  async function store(fresh: StoredDataBlock[], touched: BlockKey[]): Promise<void> {
    const table = meshtrainDb().dataBlocks;
    if (touched.length > 0) {
      const t = now();
      await table.bulkUpdate(touched.map((k) => ({ key: k, changes: { lastUsed: t } })));
    }
    if (fresh.length === 0) return;
    total ??= await countBytes();
    await table.bulkPut(fresh);
    for (const b of fresh) total += b.bytes;
    if (total > maxBytes) await evict();
  }

  async function passThrough(start: number, end: number): Promise<Int32Array> {
    const rows = await download(start, end);
    stats.misses += end - start + 1;
    return rows;
  }

  return {
    stats,
    async samples(start: number, end: number): Promise<Int32Array> {
      if (end < start) return inner.samples(start, end);
      if (disabled) return passThrough(start, end);
      const first = Math.floor(start / per);
      const last = Math.floor(end / per);
      const blocks: (Int32Array | undefined)[] = [];
      try {
        const keys: BlockKey[] = [];
        for (let b = first; b <= last; b++) keys.push(key(b));
        const found = await meshtrainDb().dataBlocks.bulkGet(keys);
        for (const f of found) blocks.push(f !== undefined && f.count === per ? f.rows : undefined);
      } catch (err) {
        disable(err);
        return passThrough(start, end);
      }
      const cached = blocks.map((b) => b !== undefined);

      // Download each contiguous run of missing blocks in one call.
      const fresh: StoredDataBlock[] = [];
      const t = now();
      for (let i = 0; i < blocks.length;) {
        if (blocks[i] !== undefined) {
          i++;
          continue;
        }
        let j = i;
        while (j + 1 < blocks.length && blocks[j + 1] === undefined) j++;
        const count = (j - i + 1) * per;
        const rows = await download((first + i) * per, (first + j + 1) * per - 1);
        if (rows.length % count !== 0)
          throw new Error(
            `data source returned ${rows.length} ids for ${count} samples (not a whole row width)`,
          );
        const width = rows.length / count;
        stats.misses += count;
        for (let k = i; k <= j; k++) {
          const part = rows.slice((k - i) * per * width, (k - i + 1) * per * width);
          blocks[k] = part;
          fresh.push({
            runId: o.runId,
            datasetKey: o.datasetKey,
            block: first + k,
            count: per,
            rows: part,
            bytes: part.byteLength,
            lastUsed: t,
          });
        }
        i = j + 1;
      }

      // Assemble the requested range from the blocks.
      const width = (blocks[0] as Int32Array).length / per;
      if (blocks.some((rows) => (rows as Int32Array).length !== per * width)) {
        // Cached rows of another width under this key: the key does not identify the data. Serve from the source.
        o.log?.(
          `data cache: blocks of "${o.datasetKey}" differ in row width; downloading samples ${start}..${end}`,
        );
        return passThrough(start, end);
      }
      const out = new Int32Array((end - start + 1) * width);
      const touched: BlockKey[] = [];
      for (let k = 0; k < blocks.length; k++) {
        const rows = blocks[k] as Int32Array;
        const b = first + k;
        const lo = Math.max(start, b * per);
        const hi = Math.min(end, (b + 1) * per - 1);
        out.set(rows.subarray((lo - b * per) * width, (hi - b * per + 1) * width), (lo - start) * width);
        if (cached[k]) {
          stats.hits += hi - lo + 1;
          touched.push(key(b));
        }
      }
      try {
        await store(fresh, touched);
      } catch (err) {
        disable(err);
      }
      return out;
    },
  };
}
