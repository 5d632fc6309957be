// One run hosted by the relay: the core coordinator state, the only code that changes it (core's `tick`),
// and its persistence. Every state change is written to SQLite (latest snapshot + history row + round
// history derived from core's effects) in one transaction BEFORE the in-memory state moves on, so what
// clients see is always something a restart can resume from. No protocol rule lives here: which events
// are valid, when phases end and what is accepted are all core's answers.
import { randomBytes } from 'node:crypto';
import { acceptedCommitments, bytesToHex, encodeStateSnapshot, roundAtHeight, tick } from '@meshtrain/core';
import type {
  CoordinatorEffect,
  CoordinatorEvent,
  CoordinatorState,
  SnapshotParamHash,
  TickResult,
  WireLimits,
} from '@meshtrain/core';
import type { RelayStore, RunRow } from './store.ts';

/** Wall clock in unix milliseconds; injectable so tests can move time. */
export type Clock = () => number;

export interface ParamHashOutcome {
  /** The epoch's majority hash (hex), if more than half of its reports agree. */
  majority: string | undefined;
  /** Clients whose report for the epoch differs from the majority. */
  mismatched: string[];
  /** Clients that reported for the epoch. */
  reports: number;
}

/** Fresh shell entropy for core's round seeds (core itself never draws randomness). */
function freshEntropy(): string {
  return randomBytes(32).toString('hex');
}

/** A compact, JSON-safe description of an event for the transition history (blooms are summarised). */
function eventLabel(event: CoordinatorEvent): Record<string, unknown> {
  switch (event.type) {
    case 'witness':
      return { type: event.type, id: event.id, step: event.step, index: event.proof?.index };
    case 'health_check':
      return { type: event.type, id: event.id, checks: event.checks.map((c) => c.id) };
    case 'update_config':
      return { type: event.type };
    case 'tick':
    case 'entropy':
      return { type: event.type };
    default:
      return { ...event };
  }
}

export class RunHost {
  readonly runId: string;
  readonly row: RunRow;
  state: CoordinatorState;
  /** Transition counter: StateSnapshot.seq, and the key of the history rows. */
  seq: number;
  toml: string;
  private readonly store: RelayStore;
  private readonly clock: Clock;
  private readonly limits: WireLimits;
  private readonly onChange: (host: RunHost, effects: readonly CoordinatorEffect[]) => void;
  private paramHashCache: SnapshotParamHash | undefined;

  constructor(opts: {
    row: RunRow;
    state: CoordinatorState;
    seq: number;
    toml: string;
    store: RelayStore;
    clock: Clock;
    limits: WireLimits;
    onChange: (host: RunHost, effects: readonly CoordinatorEffect[]) => void;
  }) {
    this.row = opts.row;
    this.runId = opts.row.run_id;
    this.state = opts.state;
    this.seq = opts.seq;
    this.toml = opts.toml;
    this.store = opts.store;
    this.clock = opts.clock;
    this.limits = opts.limits;
    this.onChange = opts.onChange;
    this.paramHashCache = this.loadParamHash();
  }

  private nowSeconds(): number {
    return Math.floor(this.clock() / 1000);
  }

  /**
   * Feed one event from a client or the admin API. Fresh entropy is mixed in first (in the same persisted
   * transition), so a round seed chosen by an event-driven transition is not predictable from the last
   * broadcast state. A refused event changes nothing (unless core recorded a strike).
   */
  apply(event: CoordinatorEvent, alsoInTransaction?: () => void): TickResult {
    const now = this.nowSeconds();
    const base = tick(this.state, { type: 'entropy', entropy: freshEntropy() }, now).state;
    const r = tick(base, event, now);
    if (r.state === base) return r;
    this.commit(r, event, now, alsoInTransaction);
    return r;
  }

  /**
   * The 500 ms timer. Probing without entropy first keeps idle ticks free: core returns the very same state
   * object when nothing is due, and only a real transition is persisted and broadcast.
   */
  timer(): TickResult | undefined {
    const now = this.nowSeconds();
    const probe = tick(this.state, { type: 'tick' }, now);
    if (probe.state === this.state) return undefined;
    const r = tick(this.state, { type: 'tick', entropy: freshEntropy() }, now);
    if (r.state === this.state) return undefined;
    this.commit(r, { type: 'tick' }, now);
    return r;
  }

  private commit(r: TickResult, event: CoordinatorEvent, now: number, extra?: () => void): void {
    const prev = this.state;
    const seq = this.seq + 1;
    const stateJson = JSON.stringify(r.state);
    const label = { ...eventLabel(event), ...(r.error ? { error: r.error.code } : {}) };
    // If the write fails (disk full, I/O error) the exception propagates and the in-memory state stays
    // where the database is: never broadcast a state that a restart would not find.
    this.store.transaction(() => {
      this.store.writeTransition(
        this.runId,
        seq,
        this.clock(),
        JSON.stringify(label),
        JSON.stringify(r.effects),
        stateJson,
      );
      this.recordEffects(prev, r.state, r.effects, now);
      extra?.();
    });
    this.seq = seq;
    this.state = r.state;
    this.onChange(this, r.effects);
  }

  /** Round history rows from core's effects; accepted commitments as core decides them. */
  private recordEffects(
    prev: CoordinatorState,
    next: CoordinatorState,
    effects: readonly CoordinatorEffect[],
    now: number,
  ): void {
    for (const e of effects) {
      if (e.type === 'RoundStarted') {
        this.store.roundStarted(this.runId, {
          step: e.step,
          epoch: e.epoch,
          height: e.height,
          random_seed: e.random_seed,
          data_index: e.data_index,
          batch_size: e.batch_size,
          training: e.training,
          clients: e.clients,
          started_at: now,
        });
        // Results older than the 4-round ring can no longer be applied by anyone; keep a margin.
        this.store.pruneResults(this.runId, e.step - 8);
        this.store.addMetric(this.runId, now * 1000, 'clients', e.clients);
      } else if (e.type === 'RoundEnded') {
        this.store.roundEnded(this.runId, e.step, now, e.witnesses, e.quorum, e.quorum_reached);
        this.store.addMetric(this.runId, now * 1000, 'witnesses', e.witnesses, { step: String(e.step) });
        // The round that just ended attests the one before it: its witnesses' blooms decide which result
        // of each batch everyone applies. `prev` still holds those blooms (pruning happens on later rounds).
        this.recordAccepted(prev, e.height - 1);
      } else if (e.type === 'EpochEnded') {
        // The epoch's parameters live only in its clients; with none left Healthy at its end (the last one
        // paused or crashed), no checkpoint for the next epoch's start step will ever be uploaded.
        const holders = prev.epoch.clients.filter((c) => c.state === 'Healthy').length;
        if (holders === 0 && next.progress.step > 1) this.store.markOrphaned(this.runId, next.progress.step);
      }
    }
  }

  private recordAccepted(state: CoordinatorState, height: number): void {
    const round = roundAtHeight(state, height);
    if (!round) return;
    const results = this.store.resultsForSteps(this.runId, [round.step]);
    const accepted = acceptedCommitments(state, height, (batch, clientIndex) => {
      const sender = state.epoch.clients[clientIndex]?.id;
      return results
        .filter((r) => r.sender === sender && r.batch_start === batch.start && r.batch_end === batch.end)
        .map((r) => Uint8Array.from(Buffer.from(r.commitment, 'hex')));
    });
    if (accepted === null) return;
    const rows = accepted.map((a) => ({
      batch: { start: a.batch.start, end: a.batch.end },
      client: state.epoch.clients[a.client_index]?.id ?? null,
      commitment: a.commitment === null ? null : bytesToHex(a.commitment),
      votes: a.votes,
    }));
    this.store.roundAccepted(this.runId, round.step, rows);
    for (const r of rows)
      if (r.commitment !== null && r.client !== null) this.store.addPoints(this.runId, r.client, 1);
  }

  /** The StateSnapshot frame for the current state (encoded per call: serverTime is "now"). */
  snapshotFrame(): Uint8Array {
    const paramHash = this.paramHashCache;
    return encodeStateSnapshot(
      {
        runId: this.runId,
        seq: this.seq,
        serverTime: this.clock(),
        state: this.state,
        ...(paramHash === undefined ? {} : { paramHash }),
      },
      this.limits,
    );
  }

  /** Steps of the rounds the coordinator still stores (the 4-round ring). */
  storedRoundSteps(): number[] {
    return this.state.epoch.rounds.map((r) => r.step);
  }

  /** Loss, throughput and bandwidth that witnesses report for a step: metric samples and the round's mean loss. */
  recordWitnessMetadata(
    step: number,
    client: string,
    m: { loss: number; tokensPerSec: number; bandwidth: number },
  ): void {
    const at = this.clock();
    const labels = { step: String(step), client };
    if (Number.isFinite(m.loss)) {
      this.store.addMetric(this.runId, at, 'loss', m.loss, labels);
      const losses = this.store
        .metrics(this.runId, 'loss', 200)
        .filter((s) => (s.labels as { step?: string }).step === String(step))
        .map((s) => s.value);
      if (losses.length > 0)
        this.store.roundLoss(this.runId, step, losses.reduce((a, b) => a + b, 0) / losses.length);
    }
    if (Number.isFinite(m.tokensPerSec))
      this.store.addMetric(this.runId, at, 'tokens_per_sec', m.tokensPerSec, labels);
    if (Number.isFinite(m.bandwidth)) this.store.addMetric(this.runId, at, 'bandwidth', m.bandwidth, labels);
  }

  // --- parameter hashes ---------------------------------------------------------------------------

  get paramHash(): SnapshotParamHash | undefined {
    return this.paramHashCache;
  }

  private loadParamHash(): SnapshotParamHash | undefined {
    const rows = this.store.paramHashes(this.runId);
    const epochs = [...new Set(rows.map((r) => r.epoch))].sort((a, b) => b - a);
    for (const epoch of epochs) {
      const m = majorityOf(rows.filter((r) => r.epoch === epoch).map((r) => r.hash));
      if (m !== undefined) return { epoch, hash: Uint8Array.from(Buffer.from(m, 'hex')) };
    }
    return undefined;
  }

  /** Records a client's parameter hash and recomputes the epoch's majority. */
  reportParamHash(client: string, epoch: number, step: number, hashHex: string): ParamHashOutcome {
    this.store.putParamHash(this.runId, { epoch, client, step, hash: hashHex, reported_at: this.clock() });
    const rows = this.store.paramHashes(this.runId, epoch);
    const majority = majorityOf(rows.map((r) => r.hash));
    if (majority !== undefined && (this.paramHashCache === undefined || epoch >= this.paramHashCache.epoch)) {
      this.paramHashCache = { epoch, hash: Uint8Array.from(Buffer.from(majority, 'hex')) };
    }
    const mismatched =
      majority === undefined ? [] : rows.filter((r) => r.hash !== majority).map((r) => r.client);
    return { majority, mismatched, reports: rows.length };
  }

  /** Every epoch's reports with its majority and the clients that differ from it. */
  paramHashReport(): Array<{
    epoch: number;
    majority: string | null;
    reports: number;
    mismatched: string[];
  }> {
    const rows = this.store.paramHashes(this.runId);
    const epochs = [...new Set(rows.map((r) => r.epoch))].sort((a, b) => a - b);
    return epochs.map((epoch) => {
      const of = rows.filter((r) => r.epoch === epoch);
      const majority = majorityOf(of.map((r) => r.hash)) ?? null;
      return {
        epoch,
        majority,
        reports: of.length,
        mismatched: majority === null ? [] : of.filter((r) => r.hash !== majority).map((r) => r.client),
      };
    });
  }
}

/** The value held by more than half of `values`, if any. */
export function majorityOf(values: readonly string[]): string | undefined {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  for (const [v, n] of counts) if (n * 2 > values.length) return v;
  return undefined;
}
