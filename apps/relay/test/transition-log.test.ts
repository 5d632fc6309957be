// Persistence that grows with the change: each transition appends its compact event to relay.db's log (tens of
// bytes, not the state); snapshots are written at phase changes and every SNAPSHOT_EVERY transitions, and the
// log before the latest one is pruned to a bounded tail. Opening the database replays the log onto the
// snapshot to exactly the state and seq the relay had; a version 1 database migrates.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Relay } from '../src/relay.ts';
import { SNAPSHOT_EVERY } from '../src/run-host.ts';
import { RelayStore, TRANSITION_HISTORY } from '../src/store.ts';
import { fastRunToml, hexKey, identity } from './helpers/relay-fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const idOf = (i: number) => i.toString(16).padStart(64, '0');

function rows(store: RelayStore, sql: string, ...args: (string | number)[]): Record<string, unknown>[] {
  return store.db.prepare(sql).all(...args) as Record<string, unknown>[];
}

describe('the transition log', () => {
  it('a join writes one small row; the snapshot stays where the last phase change put it', async () => {
    const data = join(dir, 'small');
    const store = new RelayStore(data);
    const relay = new Relay({ store });
    const host = relay.createRun({
      toml: fastRunToml('log', { init_min_clients: 500 }),
      mainAuthority: hexKey(identity(1)),
    });
    for (let i = 1; i <= 300; i++) host.apply({ type: 'join', id: idOf(i), p2p_id: `peer-${i}` });
    expect(host.seq).toBe(300);
    const log = rows(
      store,
      'SELECT seq, length(event) AS n, entropy FROM transition_log WHERE run_id = ?',
      'log',
    );
    expect(log).toHaveLength(300);
    // A join: 1 type byte, the 32-byte key, the p2p id; no entropy (no round started).
    for (const r of log) {
      expect(Number(r.n)).toBeLessThan(48);
      expect(r.entropy).toBeNull();
    }
    // The state (300 members, ~30 KB) was never written again: the snapshot is the run's first, and each
    // row with its readable history (label, effects) stays a few hundred bytes.
    expect(store.runs.snapshot('log')!.seq).toBe(0);
    expect(JSON.stringify(host.state).length).toBeGreaterThan(25_000);
    const widest = rows(
      store,
      'SELECT MAX(length(event) + length(label) + length(effects)) AS n FROM transition_log WHERE run_id = ?',
      'log',
    )[0]!;
    expect(Number(widest.n)).toBeLessThan(400);
    await store.close();
  });

  it('reopening replays the log onto the snapshot: the same state and seq, snapshots and log bounded', async () => {
    const data = join(dir, 'replay');
    let store = new RelayStore(data);
    let relay = new Relay({ store, clock: () => 5_000_000 });
    const host = relay.createRun({
      toml: fastRunToml('replayed', { init_min_clients: 3, min_clients: 2 }),
      mainAuthority: hexKey(identity(1)),
    });
    const n = SNAPSHOT_EVERY + TRANSITION_HISTORY + 200;
    for (let i = 1; i <= n; i++) {
      host.apply({ type: 'join', id: idOf(i), p2p_id: `peer-${i}` });
      if (i % 2 === 0) host.apply({ type: 'leave', id: idOf(i) });
    }
    const seq = host.seq;
    const state = JSON.stringify(host.state);
    const snapSeq = store.runs.snapshot('replayed')!.seq;
    expect(snapSeq).toBeGreaterThan(0);
    expect(snapSeq).toBeLessThan(seq);
    const logRows = rows(
      store,
      'SELECT MIN(seq) AS lo, COUNT(*) AS n FROM transition_log WHERE run_id = ?',
      'replayed',
    )[0]!;
    expect(Number(logRows.lo)).toBe(snapSeq - TRANSITION_HISTORY + 1);
    expect(Number(logRows.n)).toBe(seq - snapSeq + TRANSITION_HISTORY);
    await store.close();

    store = new RelayStore(data);
    relay = new Relay({ store, clock: () => 5_000_000 });
    const back = relay.run('replayed')!;
    expect(back.seq).toBe(seq);
    expect(JSON.stringify(back.state)).toBe(state);
    // And it goes on from there: the next transition is seq + 1.
    back.apply({ type: 'join', id: idOf(n + 1), p2p_id: 'late' });
    expect(back.seq).toBe(seq + 1);
    await store.close();
  });

  it('a damaged log (a gap) skips the run with a warning instead of serving a wrong state', async () => {
    const data = join(dir, 'damaged');
    let store = new RelayStore(data);
    const relay = new Relay({ store });
    const host = relay.createRun({
      toml: fastRunToml('damaged', { init_min_clients: 50 }),
      mainAuthority: hexKey(identity(1)),
    });
    for (let i = 1; i <= 5; i++) host.apply({ type: 'join', id: idOf(i), p2p_id: `p${i}` });
    store.db.prepare('DELETE FROM transition_log WHERE run_id = ? AND seq = 3').run('damaged');
    await store.close();
    store = new RelayStore(data);
    const warnings: string[] = [];
    const again = new Relay({ store, log: { info: () => {}, warn: (m) => warnings.push(m) } });
    expect(again.run('damaged')).toBeUndefined();
    expect(warnings.join('\n')).toMatch(/damaged: unreadable state .*skips from seq 2 to 4/);
    await store.close();
  });

  it('a schema 1 database migrates: its snapshot is the run, its history stays readable', async () => {
    const data = join(dir, 'v1');
    let store = new RelayStore(data);
    const relay = new Relay({ store });
    const host = relay.createRun({
      toml: fastRunToml('old', { init_min_clients: 50 }),
      mainAuthority: hexKey(identity(1)),
    });
    for (let i = 1; i <= 4; i++) host.apply({ type: 'join', id: idOf(i), p2p_id: `p${i}` });
    const state = JSON.stringify(host.state);
    // Turn it into what schema 1 wrote: the latest state in `snapshots`, history rows holding full states.
    store.db.exec(`
      DROP TABLE transition_log;
      CREATE TABLE transitions (run_id TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL,
        event TEXT NOT NULL, effects TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (run_id, seq));
      UPDATE meta SET value = '1' WHERE key = 'schema_version';
    `);
    store.db.prepare('UPDATE snapshots SET seq = 4, state = ? WHERE run_id = ?').run(state, 'old');
    const ins = store.db.prepare('INSERT INTO transitions VALUES (?, ?, ?, ?, ?, ?)');
    for (let seq = 1; seq <= 4; seq++)
      ins.run('old', seq, seq * 1000, `{"type":"join","n":${seq}}`, '[]', state);
    await store.close();

    store = new RelayStore(data);
    expect(rows(store, "SELECT value FROM meta WHERE key = 'schema_version'")[0]!.value).toBe('2');
    expect(rows(store, "SELECT name FROM sqlite_master WHERE name = 'transitions'")).toEqual([]);
    const migrated = new Relay({ store });
    const back = migrated.run('old')!;
    expect(back.seq).toBe(4);
    expect(JSON.stringify(back.state)).toBe(state);
    expect(store.runs.transitions('old', 10).map((t) => [t.seq, JSON.parse(t.event)])).toEqual([
      [4, { type: 'join', n: 4 }],
      [3, { type: 'join', n: 3 }],
      [2, { type: 'join', n: 2 }],
      [1, { type: 'join', n: 1 }],
    ]);
    back.apply({ type: 'join', id: idOf(9), p2p_id: 'p9' });
    expect(back.seq).toBe(5);
    await store.close();
    // And it opens again as schema 2, the new transition replayed.
    store = new RelayStore(data);
    expect(new Relay({ store }).run('old')!.seq).toBe(5);
    await store.close();
  });
});
