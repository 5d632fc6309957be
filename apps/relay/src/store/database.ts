// The connection every table module of relay.db shares: prepared statements cached by their SQL, and one
// transaction helper, so each table file owns only its schema and queries.
import type { DatabaseSync, StatementSync } from 'node:sqlite';

export type Row = Record<string, unknown>;

/** SQLite integers may come back as bigint; the relay's counters all fit a number. */
export function num(v: unknown): number {
  return typeof v === 'bigint' ? Number(v) : (v as number);
}

export class StoreDb {
  private readonly stmts = new Map<string, StatementSync>();

  readonly db: DatabaseSync;

  constructor(db: DatabaseSync) {
    this.db = db;
  }

  q(sql: string): StatementSync {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }

  /** Runs `fn` in one transaction (rolled back if it throws). */
  transaction<T>(fn: () => T): T {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const out = fn();
      this.db.exec('COMMIT');
      return out;
    } catch (e) {
      this.db.exec('ROLLBACK');
      throw e;
    }
  }
}
