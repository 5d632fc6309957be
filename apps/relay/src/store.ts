// The relay's one SQLite database (<data-dir>/relay.db, Node's built-in node:sqlite). Everything a restart
// needs is here: runs and their configs, each run's coordinator state as its latest snapshot plus the
// append-only log of the transitions after it (core's compact events, the same bytes StateDelta carries: a
// transition writes tens of bytes, not the whole state), clients, grants, round history, results, metrics
// and parameter hashes. WAL with synchronous=NORMAL survives a killed process (not a power cut), which is the
// failure the relay is built for: `kill -9` and restart resume every run at exactly the seq it had.
//
// Each concern's tables (schema and queries) live in a file of store/; this opens the file, creates and
// migrates the schema, and hands out one object per concern over the shared connection.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { WAL_JOURNAL_SIZE_LIMIT, WAL_PASS_MS } from './defaults.ts';
import { ADMIN_SIGNATURES_SCHEMA, AdminSignatureTable } from './store/admin-signatures.ts';
import { CHECKPOINTS_SCHEMA, CheckpointTables } from './store/checkpoints.ts';
import { StoreDb, type Row } from './store/database.ts';
import { METRICS_SCHEMA, MetricTable } from './store/metrics.ts';
import { ROUNDS_SCHEMA, RoundTables } from './store/rounds.ts';
import { RUNS_SCHEMA, RunTables } from './store/runs.ts';
import { SESSIONS_SCHEMA, SessionTables } from './store/sessions.ts';
import { WalMaintenance, type WalMaintenanceStats } from './store/wal-maintenance.ts';

export type { RunRow, SnapshotRow, TransitionRow, LoggedTransition } from './store/runs.ts';
export type { ClientRow, GrantRow } from './store/sessions.ts';
export type { EvidenceRow, ResultRow, RoundRow } from './store/rounds.ts';
export type { EpochEndRow, ParamHashRow } from './store/checkpoints.ts';
export { CONFIG_HISTORY, TRANSITION_HISTORY } from './store/runs.ts';
export { IDLE_CLIENT_HISTORY, MAX_GRANTS } from './store/sessions.ts';
export { EVIDENCE_HISTORY, ROUND_HISTORY } from './store/rounds.ts';
export { METRIC_HISTORY } from './store/metrics.ts';
export { EPOCH_END_HISTORY, ORPHANED_HISTORY } from './store/checkpoints.ts';
export { MAX_ADMIN_SIGNATURES } from './store/admin-signatures.ts';

export interface StoreOptions {
  /** Interval of the WAL maintenance thread; 0 leaves WAL checkpoints to SQLite on the relay's thread. */
  walPassMs?: number;
  /** Hears problems of the WAL maintenance thread (default: stderr). */
  warn?: (message: string) => void;
}

/**
 * 2: the transition log replaced version 1's `transitions` table, whose rows each held a full state (opening a
 * version 1 database migrates it: migrateFromV1).
 */
const SCHEMA_VERSION = 2;

const META_SCHEMA = 'CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);';

export class RelayStore {
  readonly db: DatabaseSync;
  private readonly sql: StoreDb;
  readonly runs: RunTables;
  readonly sessions: SessionTables;
  readonly rounds: RoundTables;
  readonly metrics: MetricTable;
  readonly checkpoints: CheckpointTables;
  readonly adminSignatures: AdminSignatureTable;

  /** Maintains the WAL on its own thread (store/wal-maintenance.ts); null in memory or once it has failed. */
  private wal: WalMaintenance | null = null;

  /** Opens (creating if needed) `<dataDir>/relay.db`; `:memory:` for tests that need no restart. */
  constructor(dataDir: string | ':memory:', opts: StoreOptions = {}) {
    let path = ':memory:';
    if (dataDir !== ':memory:') {
      mkdirSync(dataDir, { recursive: true });
      path = join(dataDir, 'relay.db');
    }
    this.db = new DatabaseSync(path);
    // First: a store closed a moment ago may still be finishing its WAL thread's last checkpoint.
    this.db.exec('PRAGMA busy_timeout = 5000');
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec('PRAGMA synchronous = NORMAL');
    this.db.exec('PRAGMA foreign_keys = ON');
    for (const schema of [
      META_SCHEMA,
      RUNS_SCHEMA,
      SESSIONS_SCHEMA,
      ROUNDS_SCHEMA,
      METRICS_SCHEMA,
      CHECKPOINTS_SCHEMA,
      ADMIN_SIGNATURES_SCHEMA,
    ])
      this.db.exec(schema);
    this.sql = new StoreDb(this.db);
    this.runs = new RunTables(this.sql);
    this.sessions = new SessionTables(this.sql);
    this.rounds = new RoundTables(this.sql);
    this.metrics = new MetricTable(this.sql);
    this.checkpoints = new CheckpointTables(this.sql);
    this.adminSignatures = new AdminSignatureTable(this.sql);
    if (path !== ':memory:' && opts.walPassMs !== 0) this.startWalMaintenance(path, opts);
    const v = this.sql.q('SELECT value FROM meta WHERE key = ?').get('schema_version') as Row | undefined;
    if (v === undefined) {
      this.sql.q('INSERT INTO meta(key, value) VALUES (?, ?)').run('schema_version', String(SCHEMA_VERSION));
    } else if (Number(v.value) === 1) {
      this.migrateFromV1();
    } else if (Number(v.value) !== SCHEMA_VERSION) {
      throw new Error(
        `relay.db has schema version ${String(v.value)}; this relay speaks ${SCHEMA_VERSION}. Use another --data-dir.`,
      );
    }
  }

  /**
   * The secret this relay salts origin tags with (core's originTag), created once and kept in the database so a
   * client that reconnects after a restart gets the same tag.
   */
  originSalt(): Uint8Array {
    const row = this.sql.q('SELECT value FROM meta WHERE key = ?').get('origin_salt') as Row | undefined;
    if (row !== undefined) return Uint8Array.from(Buffer.from(String(row.value), 'hex'));
    const salt = randomBytes(32);
    this.sql.q('INSERT INTO meta(key, value) VALUES (?, ?)').run('origin_salt', salt.toString('hex'));
    return Uint8Array.from(salt);
  }

  /**
   * Version 1 kept the latest state in `snapshots` (still valid: it is at the run's latest seq, with no
   * transition after it) and a history table of full states. Its labels and effects become history rows of
   * the log (not replayable, and never replayed: all are at or before the snapshot); the states go.
   */
  private migrateFromV1(): void {
    this.transaction(() => {
      const old = this.db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'transitions'")
        .get();
      if (old !== undefined) {
        this.db.exec(
          `INSERT OR IGNORE INTO transition_log(run_id, seq, at, now, entropy, event, label, effects)
           SELECT run_id, seq, at, at / 1000, NULL, NULL, event, effects FROM transitions`,
        );
        this.db.exec('DROP TABLE transitions');
      }
      this.sql.q('UPDATE meta SET value = ? WHERE key = ?').run(String(SCHEMA_VERSION), 'schema_version');
    });
  }

  private startWalMaintenance(path: string, opts: StoreOptions): void {
    const warn = opts.warn ?? ((m: string) => process.stderr.write(`relay store: ${m}\n`));
    // The WAL file is reused from its start once checkpointed; this caps what it keeps on disk after a burst.
    this.db.exec(`PRAGMA journal_size_limit = ${WAL_JOURNAL_SIZE_LIMIT}`);
    this.db.exec('PRAGMA wal_autocheckpoint = 0');
    this.wal = new WalMaintenance(
      path,
      opts.walPassMs ?? WAL_PASS_MS,
      (m) => warn(`WAL checkpoint failed: ${m}`),
      () => {
        // Without its thread the WAL would grow without bound: the relay's connection checkpoints again.
        warn('the WAL checkpoint thread ended; checkpointing on the main thread from now on');
        this.wal = null;
        if (this.db.isOpen) this.db.exec('PRAGMA wal_autocheckpoint = 1000');
      },
    );
  }

  /** Runs a WAL maintenance pass now (for tests): resolves when the pass is done. */
  async walPassNow(): Promise<void> {
    await this.wal?.passNow();
  }

  /** The WAL maintenance thread's counters; null when there is none (in memory, or it ended). */
  walStats(): WalMaintenanceStats | null {
    return this.wal ? { ...this.wal.stats } : null;
  }

  /** Runs `fn` in one transaction (rolled back if it throws). */
  transaction<T>(fn: () => T): T {
    return this.sql.transaction(fn);
  }

  /**
   * Closes the relay's connection at once; the promise resolves when the WAL thread has closed its own too,
   * after which nothing touches the data directory (a caller that removes or reopens it awaits this).
   */
  close(): Promise<void> {
    const walClosed = this.wal?.stop() ?? Promise.resolve();
    this.wal = null;
    if (this.db.isOpen) this.db.close();
    return walClosed;
  }
}
