// The runs this relay hosts: loaded from SQLite at start (each run's latest snapshot plus the logged
// transitions after it), created from TOML within the operator's limits, and looked up by id.
import { randomBytes } from 'node:crypto';
import {
  coordinatorConfigOf,
  createCoordinator,
  CoordinatorError,
  decodeWireEvent,
  parseRunConfig,
  replayTransition,
  RunConfigError,
  isHex32,
} from '@meshtrain/core';
import type { CoordinatorState, RunConfig, WireLimits } from '@meshtrain/core';
import { modelConfigForRun, parameterCount } from '@meshtrain/model';
import { RunHost } from '../run-host.ts';
import type { Clock, CommittedTransition } from '../run-host.ts';
import type { RelayStore } from '../store.ts';
import { PERMISSIONLESS, RelayError, type RelayLog } from './types.ts';

const RUN_ID = /^[A-Za-z0-9._-]{1,64}$/;

export interface CreateRunOptions {
  toml: string;
  mainAuthority: string;
  joinAuthority?: string;
  paused?: boolean;
  permissioned?: boolean;
}

export interface RunRegistryOptions {
  store: RelayStore;
  clock: Clock;
  limits: WireLimits;
  log: RelayLog;
  /** Keys allowed to create runs over the admin API; empty = any signed request. */
  runCreators: ReadonlySet<string>;
  maxModelParams: number;
  maxRunsPerCreator: number;
  maxRuns: number;
  /** Hears every committed transition of every run. */
  onChange: (host: RunHost, t: CommittedTransition) => void;
}

/** The run config in `toml`, or a 400 RelayError with core's issues. */
export function parseToml(toml: string) {
  try {
    return parseRunConfig(toml);
  } catch (e) {
    if (e instanceof RunConfigError) throw new RelayError(400, 'invalid_config', e.message, e.issues);
    throw e;
  }
}

export class RunRegistry {
  private readonly opts: RunRegistryOptions;
  private readonly hosts = new Map<string, RunHost>();

  constructor(opts: RunRegistryOptions) {
    this.opts = opts;
    const { store, log } = opts;
    for (const row of store.runs.all()) {
      const toml = store.runs.latestConfig(row.run_id);
      let recovered: { state: CoordinatorState; seq: number; replayed: number } | null;
      try {
        recovered = toml === undefined ? null : this.recover(row.run_id);
      } catch (e) {
        // Only a damaged database gets here; keep serving the other runs and say which one is missing.
        log.warn(`run ${row.run_id}: unreadable state (${(e as Error).message}); skipped`);
        continue;
      }
      if (!recovered || toml === undefined) {
        log.warn(`run ${row.run_id}: no snapshot or config in the database; skipped`);
        continue;
      }
      const { state, seq, replayed } = recovered;
      this.hosts.set(row.run_id, this.makeHost(row, state, seq, toml, replayed));
    }
  }

  /** A run's state at its latest seq: the stored snapshot with the logged transitions after it replayed. */
  private recover(runId: string): { state: CoordinatorState; seq: number; replayed: number } | null {
    const snap = this.opts.store.runs.snapshot(runId);
    if (!snap) return null;
    let state = JSON.parse(snap.state) as CoordinatorState;
    let seq = snap.seq;
    const log = this.opts.store.runs.transitionsAfter(runId, seq);
    for (const t of log) {
      if (t.seq !== seq + 1 || t.event === null)
        throw new Error(`the transition log skips from seq ${seq} to ${t.seq}`);
      const event = decodeWireEvent(t.event, this.opts.limits);
      state = replayTransition(state, { now: t.now, entropy: t.entropy, event });
      seq = t.seq;
    }
    return { state, seq, replayed: log.length };
  }

  private makeHost(
    row: RunHost['row'],
    state: CoordinatorState,
    seq: number,
    toml: string,
    sinceSnapshot = 0,
  ): RunHost {
    return new RunHost({
      row,
      state,
      seq,
      sinceSnapshot,
      toml,
      store: this.opts.store,
      clock: this.opts.clock,
      limits: this.opts.limits,
      onChange: this.opts.onChange,
    });
  }

  get(runId: string): RunHost | undefined {
    return this.hosts.get(runId);
  }

  /** The run or a 404 RelayError. */
  mustGet(runId: string): RunHost {
    const h = this.hosts.get(runId);
    if (!h) throw new RelayError(404, 'unknown_run', `no run '${runId}' on this relay`);
    return h;
  }

  list(): RunHost[] {
    return [...this.hosts.values()];
  }

  /**
   * Whether `key` may create a run over the admin API: on the allow-list when there is one (403), and under
   * the live-run quotas (429). Runs the operator creates from the command line are not counted against it.
   */
  assertMayCreate(key: string): void {
    const { runCreators, maxRuns, maxRunsPerCreator } = this.opts;
    if (runCreators.size > 0 && !runCreators.has(key))
      throw new RelayError(
        403,
        'forbidden',
        "only the relay's run creators (--run-creators) may create runs",
      );
    const live = this.list().filter((h) => h.state.run_state !== 'Finished');
    if (live.length >= maxRuns)
      throw new RelayError(429, 'too_many_runs', `this relay hosts at most ${maxRuns} live runs`);
    const mine = live.filter((h) => h.row.main_authority === key).length;
    if (mine >= maxRunsPerCreator)
      throw new RelayError(
        429,
        'too_many_runs',
        `a key may have at most ${maxRunsPerCreator} live runs on this relay; finish one first`,
      );
  }

  /** Refuses a model larger than this relay takes (its checkpoints are stored, seeded and checked here). */
  checkModelSize(run: RunConfig): void {
    let params: number;
    try {
      params = parameterCount(modelConfigForRun(run));
    } catch {
      return; // No model the relay can build: nothing is seeded or checked for it.
    }
    if (params > this.opts.maxModelParams)
      throw new RelayError(
        413,
        'model_too_large',
        `the run's model has ${params} parameters; this relay takes at most ${this.opts.maxModelParams} (--max-model-params)`,
      );
  }

  /** The new run's config, id and join authority, checked (400, 409, 413). */
  private checkNewRun(opts: CreateRunOptions): { config: RunConfig; runId: string; joinAuthority: string } {
    if (!isHex32(opts.mainAuthority))
      throw new RelayError(400, 'bad_request', 'main authority must be 64 lowercase hex digits');
    const joinAuthority = opts.joinAuthority ?? opts.mainAuthority;
    if (!isHex32(joinAuthority))
      throw new RelayError(400, 'bad_request', 'join_authority must be 64 lowercase hex digits');
    const { config } = parseToml(opts.toml);
    this.checkModelSize(config);
    const runId = config.run_id ?? `run-${randomBytes(6).toString('hex')}`;
    // Run ids appear in URLs and file names: keep them to a URL-safe alphabet.
    if (!RUN_ID.test(runId))
      throw new RelayError(
        400,
        'bad_request',
        'run_id may use only letters, digits, ".", "_" and "-" (1..64)',
      );
    if (this.hosts.has(runId) || this.opts.store.runs.get(runId))
      throw new RelayError(409, 'run_exists', `a run '${runId}' already exists on this relay`);
    return { config, runId, joinAuthority };
  }

  /** Creates, stores and hosts a run from its TOML. */
  create(opts: CreateRunOptions): RunHost {
    const { config, runId, joinAuthority } = this.checkNewRun(opts);
    const { store, clock } = this.opts;
    const now = clock();
    let state: CoordinatorState;
    try {
      state = createCoordinator({
        run_id: runId,
        run_seed: randomBytes(32).toString('hex'),
        config: coordinatorConfigOf(config),
        now: Math.floor(now / 1000),
        start: opts.paused ? 'paused' : 'waiting',
      });
    } catch (e) {
      if (e instanceof CoordinatorError) throw new RelayError(400, 'invalid_config', e.message);
      throw e;
    }
    const row = {
      run_id: runId,
      main_authority: opts.mainAuthority,
      join_authority: joinAuthority,
      created_at: now,
    };
    store.transaction(() => {
      store.runs.insertRunRows(row, opts.toml, JSON.stringify(state));
      if (!opts.permissioned) store.sessions.upsertGrant(runId, PERMISSIONLESS, joinAuthority, true, now);
    });
    const host = this.makeHost(row, state, 0, opts.toml);
    this.hosts.set(runId, host);
    return host;
  }
}
