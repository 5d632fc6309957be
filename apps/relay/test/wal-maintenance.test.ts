// relay.db's WAL is checkpointed by a thread of its own, never by the relay's connection: a real SQLite file,
// a real worker thread.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RelayStore } from '../src/store.ts';
import { WalMaintenance } from '../src/store/wal-maintenance.ts';

const root = mkdtempSync(join(tmpdir(), 'meshtrain-relay-wal-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const pragma = (store: RelayStore, name: string): number =>
  Number(Object.values(store.db.prepare(`PRAGMA ${name}`).get() as Record<string, unknown>)[0]);

/** ~8 MB in 200 transactions: twice what would trigger SQLite's own checkpoint (1,000 pages). */
function write(store: RelayStore, tag: string): void {
  const put = store.db.prepare('INSERT INTO meta(key, value) VALUES (?, ?)');
  for (let i = 0; i < 200; i++) put.run(`${tag}-${i}`, String(i).padEnd(40_000, 'x'));
}

describe('WAL checkpoints', () => {
  it("happen on the checkpoint thread: the relay's connection never checkpoints, and nothing is lost", async () => {
    const dir = join(root, 'a');
    let store = new RelayStore(dir, { walPassMs: 60_000 });
    expect(pragma(store, 'wal_autocheckpoint')).toBe(0);
    write(store, 'row');
    const wal = join(dir, 'relay.db-wal');
    // No automatic checkpoint ran: every frame is still in the WAL, none in the database file.
    expect(statSync(wal).size).toBeGreaterThan(8_000_000);
    const before = statSync(join(dir, 'relay.db')).size;
    await store.walPassNow();
    const stats = store.walStats();
    expect(stats?.passes).toBe(1);
    expect(stats?.lastCheckpointed).toBeGreaterThan(1_000);
    expect(stats?.errors).toBe(0);
    expect(statSync(join(dir, 'relay.db')).size).toBeGreaterThan(before + 8_000_000);

    await store.close();
    store = new RelayStore(dir, { walPassMs: 60_000 });
    expect(store.db.prepare("SELECT COUNT(*) AS n FROM meta WHERE key LIKE 'row-%'").get()).toEqual({
      n: 200,
    });
    await store.close();
    // Both connections are closed once close() resolves: the last one checkpointed and removed the WAL, so
    // the directory can be removed or reopened at once.
    expect(readdirSync(dir)).toEqual(['relay.db']);
  });

  it('passes every interval on their own', async () => {
    const dir = join(root, 'b');
    const store = new RelayStore(dir, { walPassMs: 50 });
    write(store, 'row');
    const deadline = Date.now() + 10_000;
    while ((store.walStats()?.lastCheckpointed ?? 0) === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(store.walStats()?.lastCheckpointed).toBeGreaterThan(1_000);
    await store.close();
  });

  it("are SQLite's own without the thread (in memory, or walPassMs 0)", async () => {
    const mem = new RelayStore(':memory:');
    expect(mem.walStats()).toBeNull();
    await mem.close();
    const store = new RelayStore(join(root, 'c'), { walPassMs: 0 });
    expect(store.walStats()).toBeNull();
    expect(pragma(store, 'wal_autocheckpoint')).toBe(1000);
    await store.close();
  });

  it('a checkpoint thread that cannot open the database reports it and ends', async () => {
    const errors: string[] = [];
    let exited = false;
    const ended = new Promise<void>((resolve) => {
      new WalMaintenance(
        join(root, 'missing', 'dir', 'relay.db'),
        50,
        (m) => errors.push(m),
        () => {
          exited = true;
          resolve();
        },
      );
    });
    await ended;
    expect(exited).toBe(true);
    expect(errors.join('\n')).toMatch(/unable to open|cannot open/i);
  });
});
