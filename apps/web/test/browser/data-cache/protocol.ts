// JSON shapes exchanged between apps/web/test/data-cache.test.ts and the page (page.ts).

export interface OpenArgs {
  /** Name the page keeps the cache under for later `read` calls. */
  name: string;
  runId: string;
  datasetKey: string;
  samplesPerBlock?: number;
  maxBytes?: number;
  /** int32 ids per sample of the fake source. */
  rowWidth: number;
  /** The fake source wraps sample indices modulo this, as the relay does with its split. */
  splitSize: number;
}

export interface ReadArgs {
  name: string;
  start: number;
  end: number;
}

export interface ReadResult {
  /** The fake source's `samples(start, end)` calls made during this read. */
  calls: [number, number][];
  stats: { hits: number; misses: number; downloadedBytes: number };
  /** The fake source's own byte counter. */
  innerBytes: number;
  length: number;
  /** Byte-identical to a direct read of a second, identical source. */
  identical: boolean;
  /** Log lines the cache wrote so far. */
  log: string[];
}

export interface StoreInfo {
  totalBytes: number;
  /** [runId, datasetKey, block] of every stored block, least recently used first. */
  blocks: [string, string, number][];
}
