// relay.db's runs: each run's row, its configs, its latest coordinator snapshot and the append-only log of
// the transitions after it (what a restart replays).
import { num, type Row, type StoreDb } from './database.ts';

export const RUNS_SCHEMA = `
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY,
  main_authority TEXT NOT NULL,
  join_authority TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
-- Every config a run has had; the current one is the row with the largest id.
CREATE TABLE IF NOT EXISTS configs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  toml TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS configs_run ON configs(run_id, id);
-- The latest coordinator snapshot per run (written every SNAPSHOT_EVERY transitions and at phase changes):
-- a restart resumes from it and replays the transition log after it.
CREATE TABLE IF NOT EXISTS snapshots (
  run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
  seq INTEGER NOT NULL,
  state TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
-- Every transition (append-only; pruned to a tail before the latest snapshot): core's compact event
-- (wire/transition.ts) with its unix-second \`now\` and the entropy fed before it, plus a readable label and
-- the effects for the run's history. \`event\` is NULL for history rows from before the log (schema 1).
CREATE TABLE IF NOT EXISTS transition_log (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  at INTEGER NOT NULL,
  now INTEGER NOT NULL,
  entropy BLOB,
  event BLOB,
  label TEXT NOT NULL,
  effects TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
`;

/** Transition log rows kept per run before its latest snapshot (history for the run's API page). */
export const TRANSITION_HISTORY = 500;
/** Configs kept per run (the newest is the run's; older ones are history for the run creator). */
export const CONFIG_HISTORY = 100;

export interface RunRow {
  run_id: string;
  main_authority: string;
  join_authority: string;
  created_at: number;
}

export interface SnapshotRow {
  run_id: string;
  seq: number;
  state: string;
  updated_at: number;
}

export interface TransitionRow {
  seq: number;
  at: number;
  /** JSON label of the event (attestations summarised). */
  event: string;
  effects: string;
}

/** A logged transition, for replay: core's WireEvent bytes, `now` (unix s) and the entropy fed before it. */
export interface LoggedTransition {
  seq: number;
  now: number;
  entropy: Uint8Array | null;
  event: Uint8Array | null;
}

/** The runs, configs, snapshots and transition_log tables. */
export class RunTables {
  private readonly db: StoreDb;

  constructor(db: StoreDb) {
    this.db = db;
  }

  /** The run, its first config and its initial snapshot (seq 0); call inside a transaction. */
  insertRunRows(run: RunRow, toml: string, state: string): void {
    this.db
      .q('INSERT INTO runs(run_id, main_authority, join_authority, created_at) VALUES (?, ?, ?, ?)')
      .run(run.run_id, run.main_authority, run.join_authority, run.created_at);
    this.db
      .q('INSERT INTO configs(run_id, toml, created_at) VALUES (?, ?, ?)')
      .run(run.run_id, toml, run.created_at);
    this.db
      .q('INSERT INTO snapshots(run_id, seq, state, updated_at) VALUES (?, 0, ?, ?)')
      .run(run.run_id, state, run.created_at);
  }

  all(): RunRow[] {
    return (this.db.q('SELECT * FROM runs ORDER BY created_at, run_id').all() as Row[]).map((r) => ({
      run_id: r.run_id as string,
      main_authority: r.main_authority as string,
      join_authority: r.join_authority as string,
      created_at: num(r.created_at),
    }));
  }

  get(runId: string): RunRow | undefined {
    const r = this.db.q('SELECT * FROM runs WHERE run_id = ?').get(runId) as Row | undefined;
    return r === undefined
      ? undefined
      : {
          run_id: r.run_id as string,
          main_authority: r.main_authority as string,
          join_authority: r.join_authority as string,
          created_at: num(r.created_at),
        };
  }

  latestConfig(runId: string): string | undefined {
    const r = this.db.q('SELECT toml FROM configs WHERE run_id = ? ORDER BY id DESC LIMIT 1').get(runId) as
      Row | undefined;
    return r?.toml as string | undefined;
  }

  insertConfig(runId: string, toml: string, at: number): void {
    const info = this.db
      .q('INSERT INTO configs(run_id, toml, created_at) VALUES (?, ?, ?)')
      .run(runId, toml, at);
    this.db
      .q('DELETE FROM configs WHERE run_id = ? AND id <= ?')
      .run(runId, num(info.lastInsertRowid) - CONFIG_HISTORY);
  }

  snapshot(runId: string): SnapshotRow | undefined {
    const r = this.db.q('SELECT * FROM snapshots WHERE run_id = ?').get(runId) as Row | undefined;
    return r === undefined
      ? undefined
      : {
          run_id: r.run_id as string,
          seq: num(r.seq),
          state: r.state as string,
          updated_at: num(r.updated_at),
        };
  }

  /**
   * Appends one transition to the log, in the caller's transaction. `label` and `effects` are JSON for the
   * run's history; `event` is core's encodeWireEvent bytes.
   */
  appendTransition(
    runId: string,
    t: { seq: number; at: number; now: number; entropy: Uint8Array | null; event: Uint8Array },
    label: string,
    effects: string,
  ): void {
    this.db
      .q(
        `INSERT INTO transition_log(run_id, seq, at, now, entropy, event, label, effects)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(runId, t.seq, t.at, t.now, t.entropy, t.event, label, effects);
  }

  /**
   * The run's snapshot becomes `state` at `seq` (in the caller's transaction, with the transition of that
   * seq); the log before it is pruned down to TRANSITION_HISTORY rows of history.
   */
  writeSnapshot(runId: string, seq: number, state: string, at: number): void {
    this.db
      .q('UPDATE snapshots SET seq = ?, state = ?, updated_at = ? WHERE run_id = ?')
      .run(seq, state, at, runId);
    this.db
      .q('DELETE FROM transition_log WHERE run_id = ? AND seq <= ?')
      .run(runId, seq - TRANSITION_HISTORY);
  }

  /** The logged transitions after `seq`, in order (what a restart replays onto the snapshot at `seq`). */
  transitionsAfter(runId: string, seq: number): LoggedTransition[] {
    return (
      this.db
        .q('SELECT seq, now, entropy, event FROM transition_log WHERE run_id = ? AND seq > ? ORDER BY seq')
        .all(runId, seq) as Row[]
    ).map((r) => ({
      seq: num(r.seq),
      now: num(r.now),
      entropy: (r.entropy as Uint8Array | null) ?? null,
      event: (r.event as Uint8Array | null) ?? null,
    }));
  }

  /** The newest `limit` transitions of the run's history, newest first. */
  transitions(runId: string, limit: number): TransitionRow[] {
    return (
      this.db
        .q('SELECT seq, at, label, effects FROM transition_log WHERE run_id = ? ORDER BY seq DESC LIMIT ?')
        .all(runId, limit) as Row[]
    ).map((r) => ({
      seq: num(r.seq),
      at: num(r.at),
      event: r.label as string,
      effects: r.effects as string,
    }));
  }
}
