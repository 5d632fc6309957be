// relay.db's round history of each run, the results clients sent for its batches, and the evidence of
// misbehaviour found among them.
import type { AcceptedBatch, RoundRow } from '@meshtrain/client/relay-api';
import { num, type Row, type StoreDb } from './database.ts';

export type { RoundRow };

export const ROUNDS_SCHEMA = `
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
`;

/** Round history rows kept per run (the API shows the last 50; this keeps a long tail for the dashboard). */
export const ROUND_HISTORY = 10_000;
/** Evidence rows kept per run. */
export const EVIDENCE_HISTORY = 100;

export interface ResultRow {
  commitment: string;
  step: number;
  batch_start: number;
  batch_end: number;
  sender: string;
  frame: Uint8Array;
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

/** The rounds, results and evidence tables. */
export class RoundTables {
  private readonly db: StoreDb;

  constructor(db: StoreDb) {
    this.db = db;
  }

  roundStarted(
    runId: string,
    r: Omit<RoundRow, 'ended_at' | 'witnesses' | 'quorum' | 'quorum_reached' | 'accepted' | 'loss'>,
  ): void {
    this.db
      .q(
        `INSERT OR REPLACE INTO rounds(run_id, step, epoch, height, random_seed, data_index, batch_size, training,
       clients, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
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
      this.db.q('DELETE FROM rounds WHERE run_id = ? AND step <= ?').run(runId, r.step - ROUND_HISTORY);
  }

  roundEnded(
    runId: string,
    step: number,
    at: number,
    witnesses: number,
    quorum: number,
    reached: boolean,
  ): void {
    this.db
      .q(
        'UPDATE rounds SET ended_at = ?, witnesses = ?, quorum = ?, quorum_reached = ? WHERE run_id = ? AND step = ?',
      )
      .run(at, witnesses, quorum, reached ? 1 : 0, runId, step);
  }

  roundAccepted(runId: string, step: number, accepted: readonly AcceptedBatch[]): void {
    this.db
      .q('UPDATE rounds SET accepted = ? WHERE run_id = ? AND step = ?')
      .run(JSON.stringify(accepted), runId, step);
  }

  roundLoss(runId: string, step: number, loss: number): void {
    this.db.q('UPDATE rounds SET loss = ? WHERE run_id = ? AND step = ?').run(loss, runId, step);
  }

  rounds(runId: string, limit: number): RoundRow[] {
    return (
      this.db.q('SELECT * FROM rounds WHERE run_id = ? ORDER BY step DESC LIMIT ?').all(runId, limit) as Row[]
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

  /** False when the commitment was already stored (the same result sent twice). */
  insertResult(runId: string, r: ResultRow, at: number): boolean {
    const info = this.db
      .q(
        `INSERT OR IGNORE INTO results(run_id, commitment, step, batch_start, batch_end, sender, frame, received_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(runId, r.commitment, r.step, r.batch_start, r.batch_end, r.sender, r.frame, at);
    return num(info.changes) > 0;
  }

  result(runId: string, commitment: string): ResultRow | undefined {
    const r = this.db
      .q('SELECT * FROM results WHERE run_id = ? AND commitment = ?')
      .get(runId, commitment) as Row | undefined;
    return r === undefined ? undefined : resultRow(r);
  }

  resultsForSteps(runId: string, steps: readonly number[]): ResultRow[] {
    if (steps.length === 0) return [];
    const out: ResultRow[] = [];
    const st = this.db.q(
      'SELECT * FROM results WHERE run_id = ? AND step = ? ORDER BY received_at, commitment',
    );
    for (const step of steps) for (const r of st.all(runId, step) as Row[]) out.push(resultRow(r));
    return out;
  }

  /** Results older than the rounds anyone can still apply are dead weight. */
  pruneResults(runId: string, belowStep: number): void {
    this.db.q('DELETE FROM results WHERE run_id = ? AND step < ?').run(runId, belowStep);
  }

  addEvidence(runId: string, e: Omit<EvidenceRow, 'id'>): void {
    const info = this.db
      .q('INSERT INTO evidence(run_id, at, client, kind, detail, first, second) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(runId, e.at, e.client, e.kind, e.detail, e.first, e.second);
    this.db
      .q('DELETE FROM evidence WHERE run_id = ? AND id <= ?')
      .run(runId, num(info.lastInsertRowid) - EVIDENCE_HISTORY);
  }

  evidence(runId: string, limit: number): EvidenceRow[] {
    return (
      this.db.q('SELECT * FROM evidence WHERE run_id = ? ORDER BY id DESC LIMIT ?').all(runId, limit) as Row[]
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
