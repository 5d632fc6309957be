// The relay's one SQLite database (<data-dir>/relay.db, Node's built-in node:sqlite). Everything a restart
// needs is here: runs and their configs, each run's coordinator state as its latest snapshot plus the
// append-only log of the transitions after it (core's compact events, the same bytes StateDelta carries: a
// transition writes tens of bytes, not the whole state), clients, grants, round history, results, metrics
// and parameter hashes. WAL with synchronous=NORMAL survives a killed process (not a power cut), which is the
// failure the relay is built for: `kill -9` and restart resume every run at exactly the seq it had.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { StatementSync } from 'node:sqlite';
import { StoreCheckpointer, type CheckpointerStats } from './store-checkpointer.ts';
// The API's row shapes (types only): what the store returns is what GET /api/runs/:id sends.
import type { AcceptedBatch, GrantRow, RoundRow } from '@meshtrain/client/relay-api';

export type { GrantRow, RoundRow };

export interface StoreOptions {
  /** Interval of the WAL checkpoint thread; 0 leaves checkpoints to SQLite on the relay's thread. */
  checkpointMs?: number;
  /** Hears problems of the checkpoint thread (default: stderr). */
  warn?: (message: string) => void;
}

/**
 * 2: the transition log replaced version 1's `transitions` table, whose rows each held a full state (opening a
 * version 1 database migrates it: migrateFromV1).
 */
const SCHEMA_VERSION = 2;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
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
CREATE TABLE IF NOT EXISTS rounds (
  run_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  height INTEGER NOT NULL,
  random_seed TEXT NOT NULL,
  data_index INTEGER NOT NULL,
  batch_size INTEGER NOT NULL,
  training INTEGER NOT NULL,
  clients INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  witnesses INTEGER,
  quorum INTEGER,
  quorum_reached INTEGER,
  -- JSON [{batch:{start,end}, commitment: hex|null, votes}] once the next round's witnesses decided.
  accepted TEXT,
  loss REAL,
  PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS results (
  run_id TEXT NOT NULL,
  commitment TEXT NOT NULL,
  step INTEGER NOT NULL,
  batch_start INTEGER NOT NULL,
  batch_end INTEGER NOT NULL,
  sender TEXT NOT NULL,
  frame BLOB NOT NULL,
  received_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, commitment)
);
CREATE INDEX IF NOT EXISTS results_step ON results(run_id, step);
CREATE TABLE IF NOT EXISTS metrics (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  at INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL NOT NULL,
  labels TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS metrics_run ON metrics(run_id, name, id);
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
-- Proof of misbehaviour (e.g. two signed results for one batch): kept for the run creator, bounded per run.
CREATE TABLE IF NOT EXISTS evidence (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  at INTEGER NOT NULL,
  client TEXT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  first BLOB NOT NULL,
  second BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS evidence_run ON evidence(run_id, id);
-- Steps whose epoch ended with no Healthy client: nobody holds those parameters, so joiners restart from the
-- newest stored checkpoint before them instead of waiting forever for one that cannot exist.
-- Admin request signatures accepted within their freshness window: a replay is refused even after a restart.
CREATE TABLE IF NOT EXISTS admin_signatures (
  sig TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS admin_signatures_expiry ON admin_signatures(expires_at);
CREATE TABLE IF NOT EXISTS orphaned_steps (
  run_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);
`;

/** Transition log rows kept per run before its latest snapshot (history for the run's API page). */
export const TRANSITION_HISTORY = 500;
/** Metric samples kept per run and name. */
export const METRIC_HISTORY = 5000;
/** Epoch ends (and the parameter-hash reports of those epochs) kept per run. */
export const EPOCH_END_HISTORY = 16;
/** Evidence rows kept per run. */
export const EVIDENCE_HISTORY = 100;
/** Configs kept per run (the newest is the run's; older ones are history for the run creator). */
export const CONFIG_HISTORY = 100;
/** Round history rows kept per run (the API shows the last 50; this keeps a long tail for the dashboard). */
export const ROUND_HISTORY = 10_000;
/**
 * Client rows kept per run beyond those with points: joining is free on a permissionless run, so identities
 * that never had a result accepted are forgotten, least recently seen first, past this many.
 */
export const IDLE_CLIENT_HISTORY = 10_000;
/** Orphaned steps remembered per run (one at most per epoch; a joiner only ever asks about recent ones). */
export const ORPHANED_HISTORY = 64;
/** Grants per run (the join authority's own writes; delegates are capped per grant by the route). */
export const MAX_GRANTS = 10_000;
/**
 * Admin signatures remembered at once (each for its 5-minute window). Anyone can sign with a fresh key, so
 * beyond this many the relay refuses admin requests until old ones expire rather than grow the table.
 */
export const MAX_ADMIN_SIGNATURES = 100_000;

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

export interface ClientRow {
  id: string;
  device_kind: string;
  p2p_id: string;
  first_seen: number;
  last_seen: number;
  points: number;
}

export interface ResultRow {
  commitment: string;
  step: number;
  batch_start: number;
  batch_end: number;
  sender: string;
  frame: Uint8Array;
}

export interface EpochEndRow {
  epoch: number;
  step: number;
  voters: string[];
  agreed_hash: string | null;
}

export interface EvidenceRow {
  id: number;
  at: number;
  client: string;
  kind: string;
  detail: string;
  first: Uint8Array;
  second: Uint8Array;
}

export interface ParamHashRow {
  epoch: number;
  client: string;
  step: number;
  hash: string;
  reported_at: number;
}

type Row = Record<string, unknown>;

function num(v: unknown): number {
  return typeof v === 'bigint' ? Number(v) : (v as number);
}

export class RelayStore {
  readonly db: DatabaseSync;
  private readonly stmts = new Map<string, StatementSync>();
  /** Client upserts since the last pruning of idle client rows. */
  private clientWrites = 0;

  /** Checkpoints the WAL on its own thread (store-checkpointer.ts); null in memory or once it has failed. */
  private checkpointer: StoreCheckpointer | null = null;

  /** Opens (creating if needed) `<dataDir>/relay.db`; `:memory:` for tests that need no restart. */
  constructor(dataDir: string | ':memory:', opts: StoreOptions = {}) {
    let path = ':memory:';
    if (dataDir !== ':memory:') {
      mkdirSync(dataDir, { recursive: true });
      path = join(dataDir, 'relay.db');
    }
    this.db = new DatabaseSync(path);
    // First: a store closed a moment ago may still be finishing its checkpoint thread's last checkpoint.
    this.db.exec('PRAGMA busy_timeout = 5000');
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec('PRAGMA synchronous = NORMAL');
    this.db.exec('PRAGMA foreign_keys = ON');
    this.db.exec(SCHEMA);
    if (path !== ':memory:' && opts.checkpointMs !== 0) this.startCheckpointer(path, opts);
    const v = this.q('SELECT value FROM meta WHERE key = ?').get('schema_version') as Row | undefined;
    if (v === undefined) {
      this.q('INSERT INTO meta(key, value) VALUES (?, ?)').run('schema_version', String(SCHEMA_VERSION));
    } else if (Number(v.value) === 1) {
      this.migrateFromV1();
    } else if (Number(v.value) !== SCHEMA_VERSION) {
      throw new Error(
        `relay.db has schema version ${String(v.value)}; this relay speaks ${SCHEMA_VERSION}. Use another --data-dir.`,
      );
    }
  }

  /**
   * Version 1 kept the latest state in \`snapshots\` (still valid: it is at the run's latest seq, with no
   * transition after it) and a history table of full states. Its labels and effects become history rows of
   * the log (not replayable, and never replayed: all are at or before the snapshot); the states go.
   */
  /**
   * The secret this relay salts origin tags with (core's originTag), created once and kept in the database so a
   * client that reconnects after a restart gets the same tag.
   */
  originSalt(): Uint8Array {
    const row = this.q('SELECT value FROM meta WHERE key = ?').get('origin_salt') as Row | undefined;
    if (row !== undefined) return Uint8Array.from(Buffer.from(String(row.value), 'hex'));
    const salt = randomBytes(32);
    this.q('INSERT INTO meta(key, value) VALUES (?, ?)').run('origin_salt', salt.toString('hex'));
    return Uint8Array.from(salt);
  }

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
      this.q('UPDATE meta SET value = ? WHERE key = ?').run(String(SCHEMA_VERSION), 'schema_version');
    });
  }

  private startCheckpointer(path: string, opts: StoreOptions): void {
    const warn = opts.warn ?? ((m: string) => process.stderr.write(`relay store: ${m}\n`));
    // The WAL file is reused from its start once checkpointed; this caps what it keeps on disk after a burst.
    this.db.exec(`PRAGMA journal_size_limit = ${64 * 1024 * 1024}`);
    this.db.exec('PRAGMA wal_autocheckpoint = 0');
    this.checkpointer = new StoreCheckpointer(
      path,
      opts.checkpointMs ?? 1000,
      (m) => warn(`WAL checkpoint failed: ${m}`),
      () => {
        // Without its thread the WAL would grow without bound: the relay's connection checkpoints again.
        warn('the WAL checkpoint thread ended; checkpointing on the main thread from now on');
        this.checkpointer = null;
        if (this.db.isOpen) this.db.exec('PRAGMA wal_autocheckpoint = 1000');
      },
    );
  }

  /** Checkpoints the WAL now (for tests): resolves when the pass is done. */
  async checkpointNow(): Promise<void> {
    await this.checkpointer?.passNow();
  }

  /** The WAL checkpoint thread's counters; null when there is none (in memory, or it ended). */
  checkpointStats(): CheckpointerStats | null {
    return this.checkpointer ? { ...this.checkpointer.stats } : null;
  }

  private q(sql: string): StatementSync {
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

  close(): void {
    this.checkpointer?.stop();
    this.checkpointer = null;
    if (this.db.isOpen) this.db.close();
  }

  // --- runs and configs ---------------------------------------------------------------------------

  /** The run, its first config and its initial snapshot (seq 0); call inside a transaction. */
  insertRunRows(run: RunRow, toml: string, state: string): void {
    this.q('INSERT INTO runs(run_id, main_authority, join_authority, created_at) VALUES (?, ?, ?, ?)').run(
      run.run_id,
      run.main_authority,
      run.join_authority,
      run.created_at,
    );
    this.q('INSERT INTO configs(run_id, toml, created_at) VALUES (?, ?, ?)').run(
      run.run_id,
      toml,
      run.created_at,
    );
    this.q('INSERT INTO snapshots(run_id, seq, state, updated_at) VALUES (?, 0, ?, ?)').run(
      run.run_id,
      state,
      run.created_at,
    );
  }

  runs(): RunRow[] {
    return (this.q('SELECT * FROM runs ORDER BY created_at, run_id').all() as Row[]).map((r) => ({
      run_id: r.run_id as string,
      main_authority: r.main_authority as string,
      join_authority: r.join_authority as string,
      created_at: num(r.created_at),
    }));
  }

  run(runId: string): RunRow | undefined {
    const r = this.q('SELECT * FROM runs WHERE run_id = ?').get(runId) as Row | undefined;
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
    const r = this.q('SELECT toml FROM configs WHERE run_id = ? ORDER BY id DESC LIMIT 1').get(runId) as
      Row | undefined;
    return r?.toml as string | undefined;
  }

  insertConfig(runId: string, toml: string, at: number): void {
    const info = this.q('INSERT INTO configs(run_id, toml, created_at) VALUES (?, ?, ?)').run(
      runId,
      toml,
      at,
    );
    this.q('DELETE FROM configs WHERE run_id = ? AND id <= ?').run(
      runId,
      num(info.lastInsertRowid) - CONFIG_HISTORY,
    );
  }

  // --- coordinator snapshots ----------------------------------------------------------------------

  snapshot(runId: string): SnapshotRow | undefined {
    const r = this.q('SELECT * FROM snapshots WHERE run_id = ?').get(runId) as Row | undefined;
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
    this.q(
      `INSERT INTO transition_log(run_id, seq, at, now, entropy, event, label, effects)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(runId, t.seq, t.at, t.now, t.entropy, t.event, label, effects);
  }

  /**
   * The run's snapshot becomes `state` at `seq` (in the caller's transaction, with the transition of that
   * seq); the log before it is pruned down to TRANSITION_HISTORY rows of history.
   */
  writeSnapshot(runId: string, seq: number, state: string, at: number): void {
    this.q('UPDATE snapshots SET seq = ?, state = ?, updated_at = ? WHERE run_id = ?').run(
      seq,
      state,
      at,
      runId,
    );
    this.q('DELETE FROM transition_log WHERE run_id = ? AND seq <= ?').run(runId, seq - TRANSITION_HISTORY);
  }

  /** The logged transitions after `seq`, in order (what a restart replays onto the snapshot at `seq`). */
  transitionsAfter(runId: string, seq: number): LoggedTransition[] {
    return (
      this.q(
        'SELECT seq, now, entropy, event FROM transition_log WHERE run_id = ? AND seq > ? ORDER BY seq',
      ).all(runId, seq) as Row[]
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
      this.q(
        'SELECT seq, at, label, effects FROM transition_log WHERE run_id = ? ORDER BY seq DESC LIMIT ?',
      ).all(runId, limit) as Row[]
    ).map((r) => ({
      seq: num(r.seq),
      at: num(r.at),
      event: r.label as string,
      effects: r.effects as string,
    }));
  }

  // --- clients ------------------------------------------------------------------------------------

  touchClient(runId: string, id: string, deviceKind: string, p2pId: string, at: number): void {
    this.q(
      `INSERT INTO clients(run_id, id, device_kind, p2p_id, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT(run_id, id) DO UPDATE SET device_kind = excluded.device_kind, p2p_id = excluded.p2p_id,
       last_seen = excluded.last_seen`,
    ).run(runId, id, deviceKind, p2pId, at, at);
    if (++this.clientWrites >= 256) {
      this.clientWrites = 0;
      this.q(
        `DELETE FROM clients WHERE run_id = ? AND points = 0 AND id NOT IN (
           SELECT id FROM clients WHERE run_id = ? AND points = 0 ORDER BY last_seen DESC LIMIT ?)`,
      ).run(runId, runId, IDLE_CLIENT_HISTORY);
    }
  }

  seenClient(runId: string, id: string, at: number): void {
    this.q('UPDATE clients SET last_seen = ? WHERE run_id = ? AND id = ?').run(at, runId, id);
  }

  /** A confirmed cheat keeps no points (its accepted results were taken back). */
  zeroPoints(runId: string, id: string): void {
    this.q('UPDATE clients SET points = 0 WHERE run_id = ? AND id = ?').run(runId, id);
  }

  addPoints(runId: string, id: string, points: number): void {
    this.q('UPDATE clients SET points = points + ? WHERE run_id = ? AND id = ?').run(points, runId, id);
  }

  clients(runId: string): ClientRow[] {
    return (this.q('SELECT * FROM clients WHERE run_id = ? ORDER BY first_seen, id').all(runId) as Row[]).map(
      (r) => ({
        id: r.id as string,
        device_kind: r.device_kind as string,
        p2p_id: r.p2p_id as string,
        first_seen: num(r.first_seen),
        last_seen: num(r.last_seen),
        points: num(r.points),
      }),
    );
  }

  // --- grants and delegates -----------------------------------------------------------------------

  upsertGrant(runId: string, grantee: string, grantor: string, active: boolean, at: number): void {
    this.q(
      `INSERT INTO grants(run_id, grantee, grantor, active, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(run_id, grantee) DO UPDATE SET grantor = excluded.grantor, active = excluded.active,
       updated_at = excluded.updated_at`,
    ).run(runId, grantee, grantor, active ? 1 : 0, at);
  }

  grant(runId: string, grantee: string): GrantRow | undefined {
    const r = this.q('SELECT * FROM grants WHERE run_id = ? AND grantee = ?').get(runId, grantee) as
      Row | undefined;
    return r === undefined ? undefined : this.grantRow(runId, r);
  }

  private grantRow(runId: string, r: Row): GrantRow {
    const grantee = r.grantee as string;
    const delegates = (
      this.q('SELECT delegate FROM delegates WHERE run_id = ? AND grantee = ? ORDER BY delegate').all(
        runId,
        grantee,
      ) as Row[]
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
    return num((this.q('SELECT COUNT(*) AS n FROM grants WHERE run_id = ?').get(runId) as Row).n);
  }

  grants(runId: string): GrantRow[] {
    return (this.q('SELECT * FROM grants WHERE run_id = ? ORDER BY grantee').all(runId) as Row[]).map((r) =>
      this.grantRow(runId, r),
    );
  }

  setDelegates(runId: string, grantee: string, delegates: readonly string[]): void {
    this.transaction(() => {
      this.q('DELETE FROM delegates WHERE run_id = ? AND grantee = ?').run(runId, grantee);
      const ins = this.q('INSERT OR IGNORE INTO delegates(run_id, grantee, delegate) VALUES (?, ?, ?)');
      for (const d of delegates) ins.run(runId, grantee, d);
    });
  }

  /**
   * Active grants by `grantor` that could admit `key`: the permissionless one, one to `key` itself, or one
   * whose delegates list `key`.
   */
  grantsAdmitting(runId: string, grantor: string, key: string, permissionless: string): number {
    const r = this.q(
      `SELECT COUNT(*) AS n FROM grants g WHERE g.run_id = ? AND g.grantor = ? AND g.active = 1 AND (
         g.grantee = ? OR g.grantee = ? OR EXISTS (
           SELECT 1 FROM delegates d WHERE d.run_id = g.run_id AND d.grantee = g.grantee AND d.delegate = ?))`,
    ).get(runId, grantor, permissionless, key, key) as Row;
    return num(r.n);
  }

  // --- rounds -------------------------------------------------------------------------------------

  roundStarted(
    runId: string,
    r: Omit<RoundRow, 'ended_at' | 'witnesses' | 'quorum' | 'quorum_reached' | 'accepted' | 'loss'>,
  ): void {
    this.q(
      `INSERT OR REPLACE INTO rounds(run_id, step, epoch, height, random_seed, data_index, batch_size, training,
       clients, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      runId,
      r.step,
      r.epoch,
      r.height,
      r.random_seed,
      r.data_index,
      r.batch_size,
      r.training ? 1 : 0,
      r.clients,
      r.started_at,
    );
    if (r.step % 100 === 0)
      this.q('DELETE FROM rounds WHERE run_id = ? AND step <= ?').run(runId, r.step - ROUND_HISTORY);
  }

  roundEnded(
    runId: string,
    step: number,
    at: number,
    witnesses: number,
    quorum: number,
    reached: boolean,
  ): void {
    this.q(
      'UPDATE rounds SET ended_at = ?, witnesses = ?, quorum = ?, quorum_reached = ? WHERE run_id = ? AND step = ?',
    ).run(at, witnesses, quorum, reached ? 1 : 0, runId, step);
  }

  roundAccepted(runId: string, step: number, accepted: readonly AcceptedBatch[]): void {
    this.q('UPDATE rounds SET accepted = ? WHERE run_id = ? AND step = ?').run(
      JSON.stringify(accepted),
      runId,
      step,
    );
  }

  roundLoss(runId: string, step: number, loss: number): void {
    this.q('UPDATE rounds SET loss = ? WHERE run_id = ? AND step = ?').run(loss, runId, step);
  }

  rounds(runId: string, limit: number): RoundRow[] {
    return (
      this.q('SELECT * FROM rounds WHERE run_id = ? ORDER BY step DESC LIMIT ?').all(runId, limit) as Row[]
    ).map((r) => ({
      step: num(r.step),
      epoch: num(r.epoch),
      height: num(r.height),
      random_seed: r.random_seed as string,
      data_index: num(r.data_index),
      batch_size: num(r.batch_size),
      training: num(r.training) === 1,
      clients: num(r.clients),
      started_at: num(r.started_at),
      ended_at: r.ended_at === null ? null : num(r.ended_at),
      witnesses: r.witnesses === null ? null : num(r.witnesses),
      quorum: r.quorum === null ? null : num(r.quorum),
      quorum_reached: r.quorum_reached === null ? null : num(r.quorum_reached) === 1,
      accepted: r.accepted === null ? null : (JSON.parse(r.accepted as string) as AcceptedBatch[]),
      loss: r.loss === null ? null : num(r.loss),
    }));
  }

  // --- results ------------------------------------------------------------------------------------

  /** False when the commitment was already stored (the same result sent twice). */
  insertResult(runId: string, r: ResultRow, at: number): boolean {
    const info = this.q(
      `INSERT OR IGNORE INTO results(run_id, commitment, step, batch_start, batch_end, sender, frame, received_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(runId, r.commitment, r.step, r.batch_start, r.batch_end, r.sender, r.frame, at);
    return num(info.changes) > 0;
  }

  result(runId: string, commitment: string): ResultRow | undefined {
    const r = this.q('SELECT * FROM results WHERE run_id = ? AND commitment = ?').get(runId, commitment) as
      Row | undefined;
    return r === undefined ? undefined : resultRow(r);
  }

  resultsForSteps(runId: string, steps: readonly number[]): ResultRow[] {
    if (steps.length === 0) return [];
    const out: ResultRow[] = [];
    const st = this.q('SELECT * FROM results WHERE run_id = ? AND step = ? ORDER BY received_at, commitment');
    for (const step of steps) for (const r of st.all(runId, step) as Row[]) out.push(resultRow(r));
    return out;
  }

  /** Results older than the rounds anyone can still apply are dead weight. */
  pruneResults(runId: string, belowStep: number): void {
    this.q('DELETE FROM results WHERE run_id = ? AND step < ?').run(runId, belowStep);
  }

  // --- metrics ------------------------------------------------------------------------------------

  addMetric(
    runId: string,
    at: number,
    name: string,
    value: number,
    labels: Record<string, string> = {},
  ): void {
    const info = this.q('INSERT INTO metrics(run_id, at, name, value, labels) VALUES (?, ?, ?, ?, ?)').run(
      runId,
      at,
      name,
      value,
      JSON.stringify(labels),
    );
    const id = num(info.lastInsertRowid);
    // Every name of the run, not just this one: inserts of several names interleave in a fixed pattern, so
    // the one that lands on a multiple of 500 could otherwise always be the same.
    if (id % 500 === 0) {
      const names = this.q('SELECT DISTINCT name FROM metrics WHERE run_id = ?').all(runId) as Row[];
      for (const n of names)
        this.q(
          `DELETE FROM metrics WHERE run_id = ? AND name = ? AND id <= (
             SELECT id FROM metrics WHERE run_id = ? AND name = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
        ).run(runId, n.name as string, runId, n.name as string, METRIC_HISTORY);
    }
  }

  metrics(runId: string, name: string, limit: number): Array<{ at: number; value: number; labels: unknown }> {
    return (
      this.q(
        'SELECT at, value, labels FROM metrics WHERE run_id = ? AND name = ? ORDER BY id DESC LIMIT ?',
      ).all(runId, name, limit) as Row[]
    ).map((r) => ({ at: num(r.at), value: num(r.value), labels: JSON.parse(r.labels as string) as unknown }));
  }

  // --- parameter hashes ---------------------------------------------------------------------------

  putParamHash(runId: string, row: ParamHashRow): void {
    this.q(
      `INSERT OR REPLACE INTO param_hashes(run_id, epoch, client, step, hash, reported_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
    ).run(runId, row.epoch, row.client, row.step, row.hash, row.reported_at);
  }

  paramHashes(runId: string, epoch?: number): ParamHashRow[] {
    const rows = (
      epoch === undefined
        ? this.q('SELECT * FROM param_hashes WHERE run_id = ? ORDER BY epoch, reported_at').all(runId)
        : this.q('SELECT * FROM param_hashes WHERE run_id = ? AND epoch = ? ORDER BY reported_at').all(
            runId,
            epoch,
          )
    ) as Row[];
    return rows.map((r) => ({
      epoch: num(r.epoch),
      client: r.client as string,
      step: num(r.step),
      hash: r.hash as string,
      reported_at: num(r.reported_at),
    }));
  }

  // --- admin replay protection ----------------------------------------------------------------------

  /**
   * Remembers an accepted admin signature until `expiresAt` (unix ms). 'replay' when it is already
   * remembered, 'full' when MAX_ADMIN_SIGNATURES unexpired ones are; expired ones are forgotten first.
   */
  rememberAdminSignature(sig: string, expiresAt: number, now: number): 'ok' | 'replay' | 'full' {
    this.q('DELETE FROM admin_signatures WHERE expires_at < ?').run(now);
    if (this.q('SELECT 1 FROM admin_signatures WHERE sig = ?').get(sig) !== undefined) return 'replay';
    const n = num((this.q('SELECT COUNT(*) AS n FROM admin_signatures').get() as Row).n);
    if (n >= MAX_ADMIN_SIGNATURES) return 'full';
    this.q('INSERT INTO admin_signatures(sig, expires_at) VALUES (?, ?)').run(sig, expiresAt);
    return 'ok';
  }

  markOrphaned(runId: string, step: number): void {
    this.q('INSERT OR IGNORE INTO orphaned_steps(run_id, step) VALUES (?, ?)').run(runId, step);
    this.q(
      `DELETE FROM orphaned_steps WHERE run_id = ? AND step NOT IN (
         SELECT step FROM orphaned_steps WHERE run_id = ? ORDER BY step DESC LIMIT ?)`,
    ).run(runId, runId, ORPHANED_HISTORY);
  }

  isOrphaned(runId: string, step: number): boolean {
    return (
      this.q('SELECT 1 FROM orphaned_steps WHERE run_id = ? AND step = ?').get(runId, step) !== undefined
    );
  }

  // --- epoch ends and evidence ---------------------------------------------------------------------

  /** Records an epoch end (idempotent) and forgets epoch ends, and their hash reports, beyond the history. */
  recordEpochEnd(runId: string, e: { epoch: number; step: number; voters: readonly string[] }): void {
    this.q(
      'INSERT OR IGNORE INTO epoch_ends(run_id, epoch, step, voters, agreed_hash) VALUES (?, ?, ?, ?, NULL)',
    ).run(runId, e.epoch, e.step, JSON.stringify(e.voters));
    const cut = this.q(
      'SELECT epoch FROM epoch_ends WHERE run_id = ? ORDER BY epoch DESC LIMIT 1 OFFSET ?',
    ).get(runId, EPOCH_END_HISTORY - 1) as Row | undefined;
    if (cut !== undefined) {
      this.q('DELETE FROM epoch_ends WHERE run_id = ? AND epoch < ?').run(runId, cut.epoch as number);
      this.q('DELETE FROM param_hashes WHERE run_id = ? AND epoch < ?').run(runId, cut.epoch as number);
    }
  }

  setAgreedHash(runId: string, epoch: number, hash: string): void {
    this.q('UPDATE epoch_ends SET agreed_hash = ? WHERE run_id = ? AND epoch = ?').run(hash, runId, epoch);
  }

  /** Recorded epoch ends, oldest first. */
  epochEnds(runId: string): EpochEndRow[] {
    return (this.q('SELECT * FROM epoch_ends WHERE run_id = ? ORDER BY epoch').all(runId) as Row[]).map(
      (r) => ({
        epoch: num(r.epoch),
        step: num(r.step),
        voters: JSON.parse(r.voters as string) as string[],
        agreed_hash: (r.agreed_hash as string | null) ?? null,
      }),
    );
  }

  addEvidence(runId: string, e: Omit<EvidenceRow, 'id'>): void {
    const info = this.q(
      'INSERT INTO evidence(run_id, at, client, kind, detail, first, second) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ).run(runId, e.at, e.client, e.kind, e.detail, e.first, e.second);
    this.q('DELETE FROM evidence WHERE run_id = ? AND id <= ?').run(
      runId,
      num(info.lastInsertRowid) - EVIDENCE_HISTORY,
    );
  }

  evidence(runId: string, limit: number): EvidenceRow[] {
    return (
      this.q('SELECT * FROM evidence WHERE run_id = ? ORDER BY id DESC LIMIT ?').all(runId, limit) as Row[]
    ).map((r) => ({
      id: num(r.id),
      at: num(r.at),
      client: r.client as string,
      kind: r.kind as string,
      detail: r.detail as string,
      first: r.first as Uint8Array,
      second: r.second as Uint8Array,
    }));
  }
}

function resultRow(r: Row): ResultRow {
  return {
    commitment: r.commitment as string,
    step: num(r.step),
    batch_start: num(r.batch_start),
    batch_end: num(r.batch_end),
    sender: r.sender as string,
    frame: r.frame as Uint8Array,
  };
}
