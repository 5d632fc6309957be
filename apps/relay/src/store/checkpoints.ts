// relay.db's record of each run's model parameters: the parameter hashes clients report per epoch, the epoch
// ends that decide them, and the steps whose parameters nobody holds (joiners restart from a stored model
// checkpoint instead).
import { num, type Row, type StoreDb } from './database.ts';

export const CHECKPOINTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS param_hashes (
  run_id TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  client TEXT NOT NULL,
  step INTEGER NOT NULL,
  hash TEXT NOT NULL,
  reported_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, epoch, client)
);
-- Epoch ends the coordinator reached (core's epochEndOf at Cooldown): who votes on the epoch's parameter hash,
-- and the hash once a strict majority of them agreed (core's paramHashVerdict). Bounded per run.
CREATE TABLE IF NOT EXISTS epoch_ends (
  run_id TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  step INTEGER NOT NULL,
  voters TEXT NOT NULL,
  agreed_hash TEXT,
  PRIMARY KEY (run_id, epoch)
);
-- Steps whose epoch ended with no Healthy client: nobody holds those parameters, so joiners restart from the
-- newest stored checkpoint before them instead of waiting forever for one that cannot exist.
CREATE TABLE IF NOT EXISTS orphaned_steps (
  run_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);
`;

/** Epoch ends (and the parameter-hash reports of those epochs) kept per run. */
export const EPOCH_END_HISTORY = 16;
/** Orphaned steps remembered per run (one at most per epoch; a joiner only ever asks about recent ones). */
export const ORPHANED_HISTORY = 64;

export interface EpochEndRow {
  epoch: number;
  step: number;
  voters: string[];
  agreed_hash: string | null;
}

export interface ParamHashRow {
  epoch: number;
  client: string;
  step: number;
  hash: string;
  reported_at: number;
}

/** The param_hashes, epoch_ends and orphaned_steps tables. */
export class CheckpointTables {
  private readonly db: StoreDb;

  constructor(db: StoreDb) {
    this.db = db;
  }

  putParamHash(runId: string, row: ParamHashRow): void {
    this.db
      .q(
        `INSERT OR REPLACE INTO param_hashes(run_id, epoch, client, step, hash, reported_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
      )
      .run(runId, row.epoch, row.client, row.step, row.hash, row.reported_at);
  }

  paramHashes(runId: string, epoch?: number): ParamHashRow[] {
    const rows = (
      epoch === undefined
        ? this.db.q('SELECT * FROM param_hashes WHERE run_id = ? ORDER BY epoch, reported_at').all(runId)
        : this.db
            .q('SELECT * FROM param_hashes WHERE run_id = ? AND epoch = ? ORDER BY reported_at')
            .all(runId, epoch)
    ) as Row[];
    return rows.map((r) => ({
      epoch: num(r.epoch),
      client: r.client as string,
      step: num(r.step),
      hash: r.hash as string,
      reported_at: num(r.reported_at),
    }));
  }

  markOrphaned(runId: string, step: number): void {
    this.db.q('INSERT OR IGNORE INTO orphaned_steps(run_id, step) VALUES (?, ?)').run(runId, step);
    this.db
      .q(
        `DELETE FROM orphaned_steps WHERE run_id = ? AND step NOT IN (
         SELECT step FROM orphaned_steps WHERE run_id = ? ORDER BY step DESC LIMIT ?)`,
      )
      .run(runId, runId, ORPHANED_HISTORY);
  }

  isOrphaned(runId: string, step: number): boolean {
    return (
      this.db.q('SELECT 1 FROM orphaned_steps WHERE run_id = ? AND step = ?').get(runId, step) !== undefined
    );
  }

  /** Records an epoch end (idempotent) and forgets epoch ends, and their hash reports, beyond the history. */
  recordEpochEnd(runId: string, e: { epoch: number; step: number; voters: readonly string[] }): void {
    this.db
      .q(
        'INSERT OR IGNORE INTO epoch_ends(run_id, epoch, step, voters, agreed_hash) VALUES (?, ?, ?, ?, NULL)',
      )
      .run(runId, e.epoch, e.step, JSON.stringify(e.voters));
    const cut = this.db
      .q('SELECT epoch FROM epoch_ends WHERE run_id = ? ORDER BY epoch DESC LIMIT 1 OFFSET ?')
      .get(runId, EPOCH_END_HISTORY - 1) as Row | undefined;
    if (cut !== undefined) {
      this.db.q('DELETE FROM epoch_ends WHERE run_id = ? AND epoch < ?').run(runId, cut.epoch as number);
      this.db.q('DELETE FROM param_hashes WHERE run_id = ? AND epoch < ?').run(runId, cut.epoch as number);
    }
  }

  setAgreedHash(runId: string, epoch: number, hash: string): void {
    this.db.q('UPDATE epoch_ends SET agreed_hash = ? WHERE run_id = ? AND epoch = ?').run(hash, runId, epoch);
  }

  /** Recorded epoch ends, oldest first. */
  epochEnds(runId: string): EpochEndRow[] {
    return (this.db.q('SELECT * FROM epoch_ends WHERE run_id = ? ORDER BY epoch').all(runId) as Row[]).map(
      (r) => ({
        epoch: num(r.epoch),
        step: num(r.step),
        voters: JSON.parse(r.voters as string) as string[],
        agreed_hash: (r.agreed_hash as string | null) ?? null,
      }),
    );
  }
}
