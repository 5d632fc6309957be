// relay.db's metric samples of each run (losses, throughput), bounded per run and name.
import { num, type Row, type StoreDb } from './database.ts';

export const METRICS_SCHEMA = `
CREATE TABLE IF NOT EXISTS metrics (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  at INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL NOT NULL,
  labels TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS metrics_run ON metrics(run_id, name, id);
`;

/** Metric samples kept per run and name. */
export const METRIC_HISTORY = 5000;

/** The metrics table. */
export class MetricTable {
  private readonly db: StoreDb;

  constructor(db: StoreDb) {
    this.db = db;
  }

  addMetric(
    runId: string,
    at: number,
    name: string,
    value: number,
    labels: Record<string, string> = {},
  ): void {
    const info = this.db
      .q('INSERT INTO metrics(run_id, at, name, value, labels) VALUES (?, ?, ?, ?, ?)')
      .run(runId, at, name, value, JSON.stringify(labels));
    const id = num(info.lastInsertRowid);
    // Every name of the run, not just this one: inserts of several names interleave in a fixed pattern, so
    // the one that lands on a multiple of 500 could otherwise always be the same.
    if (id % 500 === 0) {
      const names = this.db.q('SELECT DISTINCT name FROM metrics WHERE run_id = ?').all(runId) as Row[];
      for (const n of names)
        this.db
          .q(
            `DELETE FROM metrics WHERE run_id = ? AND name = ? AND id <= (
             SELECT id FROM metrics WHERE run_id = ? AND name = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
          )
          .run(runId, n.name as string, runId, n.name as string, METRIC_HISTORY);
    }
  }

  metrics(runId: string, name: string, limit: number): Array<{ at: number; value: number; labels: unknown }> {
    return (
      this.db
        .q('SELECT at, value, labels FROM metrics WHERE run_id = ? AND name = ? ORDER BY id DESC LIMIT ?')
        .all(runId, name, limit) as Row[]
    ).map((r) => ({ at: num(r.at), value: num(r.value), labels: JSON.parse(r.labels as string) as unknown }));
  }
}
