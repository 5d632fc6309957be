// relay.db's clients of each run and who may join it: client rows (points, last seen), grants and their
// delegates.
import type { ClientRow as ApiClientRow, GrantRow } from '@meshtrain/client/relay-api';
import { num, type Row, type StoreDb } from './database.ts';

export type { GrantRow };

export const SESSIONS_SCHEMA = `
CREATE TABLE IF NOT EXISTS clients (
  run_id TEXT NOT NULL,
  id TEXT NOT NULL,
  device_kind TEXT NOT NULL,
  p2p_id TEXT NOT NULL,
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  points INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, id)
);
CREATE TABLE IF NOT EXISTS grants (
  run_id TEXT NOT NULL,
  grantee TEXT NOT NULL,
  grantor TEXT NOT NULL,
  active INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, grantee)
);
CREATE TABLE IF NOT EXISTS delegates (
  run_id TEXT NOT NULL,
  grantee TEXT NOT NULL,
  delegate TEXT NOT NULL,
  PRIMARY KEY (run_id, grantee, delegate)
);
CREATE INDEX IF NOT EXISTS delegates_by_key ON delegates(run_id, delegate);
`;

/**
 * Client rows kept per run beyond those with points: joining is free on a permissionless run, so identities
 * that never had a result accepted are forgotten, least recently seen first, past this many.
 */
export const IDLE_CLIENT_HISTORY = 10_000;
/** Grants per run (the join authority's own writes; delegates are capped per grant by the route). */
export const MAX_GRANTS = 10_000;

/** A stored client: the API's row without what the live run adds (connected, member, epoch state). */
export type ClientRow = Pick<
  ApiClientRow,
  'id' | 'device_kind' | 'p2p_id' | 'first_seen' | 'last_seen' | 'points'
>;

/** The clients, grants and delegates tables. */
export class SessionTables {
  /** Client upserts since the last pruning of idle client rows. */
  private clientWrites = 0;

  private readonly db: StoreDb;

  constructor(db: StoreDb) {
    this.db = db;
  }

  touchClient(runId: string, id: string, deviceKind: string, p2pId: string, at: number): void {
    this.db
      .q(
        `INSERT INTO clients(run_id, id, device_kind, p2p_id, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT(run_id, id) DO UPDATE SET device_kind = excluded.device_kind, p2p_id = excluded.p2p_id,
       last_seen = excluded.last_seen`,
      )
      .run(runId, id, deviceKind, p2pId, at, at);
    if (++this.clientWrites >= 256) {
      this.clientWrites = 0;
      this.db
        .q(
          `DELETE FROM clients WHERE run_id = ? AND points = 0 AND id NOT IN (
           SELECT id FROM clients WHERE run_id = ? AND points = 0 ORDER BY last_seen DESC LIMIT ?)`,
        )
        .run(runId, runId, IDLE_CLIENT_HISTORY);
    }
  }

  seenClient(runId: string, id: string, at: number): void {
    this.db.q('UPDATE clients SET last_seen = ? WHERE run_id = ? AND id = ?').run(at, runId, id);
  }

  /** A confirmed cheat keeps no points (its accepted results were taken back). */
  zeroPoints(runId: string, id: string): void {
    this.db.q('UPDATE clients SET points = 0 WHERE run_id = ? AND id = ?').run(runId, id);
  }

  addPoints(runId: string, id: string, points: number): void {
    this.db.q('UPDATE clients SET points = points + ? WHERE run_id = ? AND id = ?').run(points, runId, id);
  }

  clients(runId: string): ClientRow[] {
    return (
      this.db.q('SELECT * FROM clients WHERE run_id = ? ORDER BY first_seen, id').all(runId) as Row[]
    ).map((r) => ({
      id: r.id as string,
      device_kind: r.device_kind as string,
      p2p_id: r.p2p_id as string,
      first_seen: num(r.first_seen),
      last_seen: num(r.last_seen),
      points: num(r.points),
    }));
  }

  upsertGrant(runId: string, grantee: string, grantor: string, active: boolean, at: number): void {
    this.db
      .q(
        `INSERT INTO grants(run_id, grantee, grantor, active, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(run_id, grantee) DO UPDATE SET grantor = excluded.grantor, active = excluded.active,
       updated_at = excluded.updated_at`,
      )
      .run(runId, grantee, grantor, active ? 1 : 0, at);
  }

  grant(runId: string, grantee: string): GrantRow | undefined {
    const r = this.db.q('SELECT * FROM grants WHERE run_id = ? AND grantee = ?').get(runId, grantee) as
      Row | undefined;
    return r === undefined ? undefined : this.grantRow(runId, r);
  }

  private grantRow(runId: string, r: Row): GrantRow {
    const grantee = r.grantee as string;
    const delegates = (
      this.db
        .q('SELECT delegate FROM delegates WHERE run_id = ? AND grantee = ? ORDER BY delegate')
        .all(runId, grantee) as Row[]
    ).map((d) => d.delegate as string);
    return {
      grantee,
      grantor: r.grantor as string,
      active: num(r.active) === 1,
      delegates,
      updated_at: num(r.updated_at),
    };
  }

  grantCount(runId: string): number {
    return num((this.db.q('SELECT COUNT(*) AS n FROM grants WHERE run_id = ?').get(runId) as Row).n);
  }

  grants(runId: string): GrantRow[] {
    return (this.db.q('SELECT * FROM grants WHERE run_id = ? ORDER BY grantee').all(runId) as Row[]).map(
      (r) => this.grantRow(runId, r),
    );
  }

  setDelegates(runId: string, grantee: string, delegates: readonly string[]): void {
    this.db.transaction(() => {
      this.db.q('DELETE FROM delegates WHERE run_id = ? AND grantee = ?').run(runId, grantee);
      const ins = this.db.q('INSERT OR IGNORE INTO delegates(run_id, grantee, delegate) VALUES (?, ?, ?)');
      for (const d of delegates) ins.run(runId, grantee, d);
    });
  }

  /**
   * Active grants by `grantor` that could admit `key`: the permissionless one, one to `key` itself, or one
   * whose delegates list `key`.
   */
  grantsAdmitting(runId: string, grantor: string, key: string, permissionless: string): number {
    const r = this.db
      .q(
        `SELECT COUNT(*) AS n FROM grants g WHERE g.run_id = ? AND g.grantor = ? AND g.active = 1 AND (
         g.grantee = ? OR g.grantee = ? OR EXISTS (
           SELECT 1 FROM delegates d WHERE d.run_id = g.run_id AND d.grantee = g.grantee AND d.delegate = ?))`,
      )
      .get(runId, grantor, permissionless, key, key) as Row;
    return num(r.n);
  }
}
