// The training worker's data cache (src/worker/data-cache.ts) on real Chromium and its real IndexedDB: blocks are
// downloaded whole and reused, only missing blocks are fetched, data is byte-identical to the source, the cache
// survives a browser restart on the same profile, dataset keys never mix, the store stays under its byte bound
// (least recently used out first), and a failing IndexedDB degrades to pass-through. The page is
// test/browser/data-cache/page.ts with an in-page fake source that records its calls; the harness is e2e/lib.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  buildPage,
  collectConsole,
  launchChromium,
  openScenarioPage,
  runScenario,
  serveStatic,
  writeArtifact,
} from '../../../e2e/lib/index.ts';
import type { BuiltPage, ConsoleLog, LaunchedChromium, StaticServer } from '../../../e2e/lib/index.ts';
import type { OpenArgs, ReadResult, StoreInfo } from './browser/data-cache/protocol.ts';

const PAGE_ROOT = fileURLToPath(new URL('./browser/data-cache/', import.meta.url));
const ROW = 17; // ids per sample
const PER = 32; // the cache's default samplesPerBlock
const BLOCK_BYTES = PER * ROW * 4;

let built: BuiltPage;
let server: StaticServer;
let profile: string;
let browser: LaunchedChromium | undefined;
let page: Awaited<ReturnType<LaunchedChromium['newPage']>>;
const logs: ConsoleLog[] = [];

async function startBrowser(): Promise<void> {
  browser = await launchChromium({ webgpu: false, userDataDir: profile });
  page = await browser.newPage();
  const log = collectConsole(page);
  logs.push(log);
  await openScenarioPage(page, `${server.url}/`);
}

const open = (a: Partial<OpenArgs> & { name: string }) =>
  runScenario<null>(page, 'open', { runId: 'run-1', datasetKey: 'k1', rowWidth: ROW, splitSize: 1000, ...a });
const read = (name: string, start: number, end: number) =>
  runScenario<ReadResult>(page, 'read', { name, start, end });
const storeInfo = () => runScenario<StoreInfo>(page, 'storeInfo');

beforeAll(async () => {
  built = await buildPage({ root: PAGE_ROOT });
  server = await serveStatic({ root: built.outDir });
  profile = await mkdtemp(join(tmpdir(), 'meshtrain-data-cache-'));
  await startBrowser();
  await runScenario(page, 'clearStore');
}, 120_000);

afterAll(async () => {
  await writeArtifact('web/data-cache.console.log', logs.map((l) => l.dump()).join('\n')).catch(
    () => undefined,
  );
  await browser?.close();
  await server?.close();
  await built?.cleanup();
  if (profile !== undefined) await rm(profile, { recursive: true, force: true });
});

describe('data cache in IndexedDB', () => {
  test('first read downloads whole blocks; neighbouring and overlapping reads hit', async () => {
    await open({ name: 'a' });
    let r = await read('a', 0, 7);
    expect(r.calls).toEqual([[0, 31]]);
    expect(r).toMatchObject({ identical: true, length: 8 * ROW, stats: { hits: 0, misses: 32 } });
    expect(r.stats.downloadedBytes).toBe(BLOCK_BYTES);

    r = await read('a', 8, 15);
    expect(r.calls).toEqual([]);
    expect(r).toMatchObject({ identical: true, stats: { hits: 8, misses: 32 } });
    r = await read('a', 4, 20);
    expect(r.calls).toEqual([]);
    expect(r).toMatchObject({ identical: true, stats: { hits: 25, misses: 32 } });
  });

  test('a read spanning cached and missing blocks downloads only the missing ones', async () => {
    let r = await read('a', 30, 33); // block 0 cached, block 1 missing
    expect(r.calls).toEqual([[32, 63]]);
    expect(r).toMatchObject({ identical: true, stats: { hits: 27, misses: 64 } });

    r = await read('a', 10, 140); // blocks 0–4: 0 and 1 cached, 2–4 missing in one run
    expect(r.calls).toEqual([[64, 159]]);
    expect(r.identical).toBe(true);

    await read('a', 320, 330); // block 10
    r = await read('a', 200, 400); // blocks 6–12: 10 cached; 6–9 and 11–12 missing
    expect(r.calls).toEqual([
      [192, 319],
      [352, 415],
    ]);
    expect(r.identical).toBe(true);
    expect(r.stats.downloadedBytes).toBe(r.innerBytes);
    expect(r.stats.misses * ROW * 4).toBe(r.innerBytes);
  });

  test('random ranges are byte-identical to direct reads of the source (wrapping past the split included)', async () => {
    await open({ name: 'rand', runId: 'run-rand', splitSize: 700 });
    let rng = 20261121;
    const next = (n: number): number => {
      rng = (Math.imul(rng, 1103515245) + 12345) >>> 0;
      return rng % n;
    };
    let last: ReadResult | undefined;
    for (let i = 0; i < 60; i++) {
      const start = next(2000);
      const end = start + next(90);
      last = await read('rand', start, end);
      expect(last.identical, `samples ${start}..${end}`).toBe(true);
      expect(last.length).toBe((end - start + 1) * ROW);
      for (const [s, e] of last.calls) {
        expect(s % PER).toBe(0);
        expect((e + 1) % PER).toBe(0);
      }
    }
    expect(last?.stats.hits).toBeGreaterThan(0);
    expect(last?.stats.downloadedBytes).toBe(last?.innerBytes);
  });

  test('after a browser restart on the same profile, cached samples are served without source calls', async () => {
    await browser?.close();
    await startBrowser();
    await open({ name: 'a' });
    const r = await read('a', 0, 159);
    expect(r.calls).toEqual([]);
    expect(r).toMatchObject({ identical: true, stats: { hits: 160, misses: 0, downloadedBytes: 0 } });
  });

  test('a different dataset key misses and gets its own data', async () => {
    await open({ name: 'b', datasetKey: 'k2' });
    const r = await read('b', 0, 7);
    expect(r.calls).toEqual([[0, 31]]);
    expect(r).toMatchObject({ identical: true, stats: { hits: 0, misses: 32 } });
    const again = await read('a', 0, 7); // k1's block 0 is still there and still k1's
    expect(again.calls).toEqual([]);
    expect(again.identical).toBe(true);
  });

  test('eviction keeps the store under maxBytes, least recently used first', async () => {
    await runScenario(page, 'clearStore');
    const maxBytes = 5 * BLOCK_BYTES;
    await open({ name: 'lru', runId: 'run-lru', maxBytes });
    for (let b = 0; b < 5; b++) await read('lru', b * PER, b * PER + 3);
    expect((await storeInfo()).totalBytes).toBe(5 * BLOCK_BYTES);
    await read('lru', 0, 3); // block 0 is now the most recently used
    const r = await read('lru', 5 * PER, 5 * PER + 3); // block 5 comes in, block 1 (oldest) goes
    expect(r.calls).toEqual([[160, 191]]);
    const info = await storeInfo();
    expect(info.totalBytes).toBeLessThanOrEqual(maxBytes);
    expect(info.blocks.map((k) => k[2]).sort((x, y) => x - y)).toEqual([0, 2, 3, 4, 5]);
    for (let b = 6; b < 25; b++) {
      await read('lru', b * PER + 1, b * PER + 2);
      expect((await storeInfo()).totalBytes).toBeLessThanOrEqual(maxBytes);
    }
    // Wide reads bigger than the bound still return the right data.
    const wide = await read('lru', 0, 10 * PER);
    expect(wide.identical).toBe(true);
    expect((await storeInfo()).totalBytes).toBeLessThanOrEqual(maxBytes);
  });

  test('a failing IndexedDB degrades to pass-through with one log line', async () => {
    await runScenario(page, 'breakIndexedDb', { mode: 'write' });
    try {
      await open({ name: 'quota', runId: 'run-quota' });
      let r = await read('quota', 0, 7);
      expect(r.calls).toEqual([[0, 31]]); // looked up fine, download fine, the put failed
      expect(r.identical).toBe(true);
      r = await read('quota', 3, 9);
      expect(r.calls).toEqual([[3, 9]]); // pass-through from now on
      expect(r.identical).toBe(true);
      expect(r.log).toHaveLength(1);
      expect(r.log[0]).toMatch(/data cache disabled.*QuotaExceededError/);
    } finally {
      await runScenario(page, 'restoreIndexedDb');
    }
    await runScenario(page, 'breakIndexedDb', { mode: 'open' });
    try {
      await open({ name: 'private', runId: 'run-private' });
      let r = await read('private', 40, 50);
      expect(r.calls).toEqual([[40, 50]]);
      r = await read('private', 40, 50);
      expect(r.calls).toEqual([[40, 50]]);
      expect(r).toMatchObject({ identical: true, stats: { hits: 0, misses: 22 } });
      expect(r.log).toHaveLength(1);
      expect(r.log[0]).toMatch(/data cache disabled.*InvalidStateError|data cache disabled.*OpenFailedError/);
    } finally {
      await runScenario(page, 'restoreIndexedDb');
    }
  });

  test('the current schema upgrades a version-2 database, keeping keys and checkpoints', async () => {
    const up = await runScenario<{ verno: number; key: boolean; checkpoint: boolean; tables: string[] }>(
      page,
      'upgradeFromV2',
    );
    expect(up).toEqual({
      verno: 4,
      key: true,
      checkpoint: true,
      tables: ['checkpoints', 'dataBlocks', 'keys', 'metrics'],
    });
    await open({ name: 'upgraded', runId: 'run-up' });
    expect((await read('upgraded', 0, 3)).calls).toEqual([[0, 31]]);
    expect((await read('upgraded', 0, 3)).calls).toEqual([]);
    expect(logs.flatMap((l) => l.errors())).toEqual([]);
  });
});
