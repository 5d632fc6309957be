// Test page for apps/web/src/worker/data-cache.ts: the real cache on the browser's real IndexedDB (Dexie), in front
// of an in-page fake DataSource that records its calls. Driven from apps/web/test/data-cache.test.ts.
import type { DataSource } from '@meshtrain/client';
import { Dexie } from 'dexie';
import { registerScenarios } from '../../../../../e2e/lib/page-runtime.ts';
import { meshtrainDb } from '../../../src/lib/db.ts';
import { cachedDataSource } from '../../../src/worker/data-cache.ts';
import type { CachedDataSource } from '../../../src/worker/data-cache.ts';
import type { OpenArgs, ReadArgs, ReadResult, StoreInfo } from './protocol.ts';

/** Deterministic int32 id (full range, negatives included) of sample `s`, column `c`, for a dataset seed. */
function id(seed: number, s: number, c: number): number {
  let h =
    Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(s + 1, 0xc2b2ae35) ^ Math.imul(c + 7, 0x27d4eb2f);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h | 0;
}

function seedOf(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h | 0;
}

/** A fake relay data source: wraps indices modulo the split, counts bytes, records its calls. */
function fakeSource(a: OpenArgs): DataSource & { bytes: number; calls: [number, number][] } {
  const seed = seedOf(a.datasetKey);
  const src = {
    bytes: 0,
    calls: [] as [number, number][],
    async samples(start: number, end: number): Promise<Int32Array> {
      src.calls.push([start, end]);
      await new Promise((r) => setTimeout(r, 0));
      const out = new Int32Array((end - start + 1) * a.rowWidth);
      for (let i = start; i <= end; i++)
        for (let c = 0; c < a.rowWidth; c++) out[(i - start) * a.rowWidth + c] = id(seed, i % a.splitSize, c);
      src.bytes += out.byteLength;
      return out;
    },
  };
  return src;
}

const bytesEqual = (x: Int32Array, y: Int32Array): boolean => {
  if (x.byteLength !== y.byteLength) return false;
  const a = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  const b = new Uint8Array(y.buffer, y.byteOffset, y.byteLength);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

interface Open {
  cache: CachedDataSource;
  inner: ReturnType<typeof fakeSource>;
  direct: ReturnType<typeof fakeSource>;
  log: string[];
}
const opened = new Map<string, Open>();
const restores: (() => void)[] = [];

registerScenarios({
  async clearStore(): Promise<null> {
    await meshtrainDb().dataBlocks.clear();
    return null;
  },
  async open(a: OpenArgs): Promise<null> {
    const log: string[] = [];
    const inner = fakeSource(a);
    const cache = cachedDataSource(inner, {
      runId: a.runId,
      datasetKey: a.datasetKey,
      log: (l) => log.push(l),
      ...(a.samplesPerBlock !== undefined ? { samplesPerBlock: a.samplesPerBlock } : {}),
      ...(a.maxBytes !== undefined ? { maxBytes: a.maxBytes } : {}),
    });
    opened.set(a.name, { cache, inner, direct: fakeSource(a), log });
    return null;
  },
  async read(a: ReadArgs): Promise<ReadResult> {
    const o = opened.get(a.name);
    if (o === undefined) throw new Error(`no cache opened as ${a.name}`);
    const mark = o.inner.calls.length;
    const got = await o.cache.samples(a.start, a.end);
    const want = await o.direct.samples(a.start, a.end);
    return {
      calls: o.inner.calls.slice(mark),
      stats: { ...o.cache.stats },
      innerBytes: o.inner.bytes,
      length: got.length,
      identical: bytesEqual(got, want),
      log: [...o.log],
    };
  },
  async storeInfo(): Promise<StoreInfo> {
    const all = await meshtrainDb().dataBlocks.orderBy('lastUsed').toArray();
    return {
      totalBytes: all.reduce((s, b) => s + b.bytes, 0),
      blocks: all.map((b) => [b.runId, b.datasetKey, b.block]),
    };
  },
  /**
   * Makes IndexedDB fail. 'write': every put throws QuotaExceededError (a full quota). 'open': the database is closed
   * and opening it throws InvalidStateError (Firefox's private mode), so every Dexie call fails.
   */
  async breakIndexedDb(a: { mode: 'write' | 'open' }): Promise<null> {
    if (a.mode === 'write') {
      const put = IDBObjectStore.prototype.put;
      IDBObjectStore.prototype.put = () => {
        throw new DOMException('simulated: the quota has been exceeded', 'QuotaExceededError');
      };
      restores.push(() => (IDBObjectStore.prototype.put = put));
    } else {
      const openDb = IDBFactory.prototype.open;
      meshtrainDb().close({ disableAutoOpen: false });
      IDBFactory.prototype.open = () => {
        throw new DOMException('simulated: a mutation operation was attempted', 'InvalidStateError');
      };
      restores.push(() => {
        IDBFactory.prototype.open = openDb;
        meshtrainDb().close({ disableAutoOpen: false });
      });
    }
    return null;
  },
  /** Recreates the database as schema version 2 with a key and a checkpoint, then opens it through meshtrainDb(). */
  async upgradeFromV2(): Promise<{ verno: number; key: boolean; checkpoint: boolean; tables: string[] }> {
    const db = meshtrainDb();
    db.close({ disableAutoOpen: false });
    await Dexie.delete('meshtrain');
    const old = new Dexie('meshtrain');
    old.version(1).stores({ keys: 'role' });
    old.version(2).stores({ keys: 'role', checkpoints: '[runId+step], runId' });
    await old.table('keys').put({ role: 'volunteer', seed: 'ab', publicKey: 'cd', createdAt: 1 });
    await old
      .table('checkpoints')
      .put({ runId: 'r', step: 5, epoch: 1, paramHash: 'ef', params: new Map(), savedAt: 2 });
    old.close();
    const key = await db.keys.get('volunteer');
    const checkpoint = await db.checkpoints.get(['r', 5]);
    return {
      verno: db.verno,
      key: key?.publicKey === 'cd',
      checkpoint: checkpoint?.paramHash === 'ef',
      tables: db.tables.map((t) => t.name).sort(),
    };
  },
  async restoreIndexedDb(): Promise<null> {
    for (const r of restores.splice(0).reverse()) r();
    return null;
  },
});
const status = document.getElementById('status');
if (status) status.textContent = 'ready';
