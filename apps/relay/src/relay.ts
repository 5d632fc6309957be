// The relay's runs and live sessions: loads every run from SQLite at start (its latest snapshot plus the
// logged transitions after it), creates runs from TOML, ticks all of them on one timer, and fans state
// changes out to the run's connected clients: a joiner gets the state once (StateSnapshot), then only what
// changed (StateDelta: the transitions, coalesced per 100 ms, one encoded frame for everyone). HTTP and
// WebSocket route modules call into this; it knows nothing about Hono.
import { randomBytes } from 'node:crypto';
import {
  coordinatorConfigOf,
  createCoordinator,
  CoordinatorError,
  decodeWireEvent,
  DEFAULT_WIRE_LIMITS,
  encodeStateDelta,
  parseRunConfig,
  replayTransition,
  RunConfigError,
  setFastEd25519Verifier,
} from '@meshtrain/core';
import type {
  ConfigIssue,
  CoordinatorEffect,
  CoordinatorState,
  ResyncRequest,
  RunConfig,
  SnapshotParamHash,
  TickResult,
  WireLimits,
  WireTransition,
} from '@meshtrain/core';
import { modelConfigForRun, parameterCount, PRESETS } from '@meshtrain/model';
import {
  DEFAULT_MAX_UNJOINED,
  DEFAULT_MAX_UNJOINED_PER_ADDRESS,
  DEFAULT_PRE_JOIN_MAX_BYTES,
} from './connection-limits.ts';
import { IdentityLimits } from './identity-limits.ts';
import { nativeEd25519Verify } from './native-ed25519.ts';
import { RunHost } from './run-host.ts';
import type { Clock, CommittedTransition } from './run-host.ts';
import { LightFeed } from './light-feed.ts';
import { SlicedQueue } from './sliced-queue.ts';
import type { RelayStore } from './store.ts';

/** The longest the relay works through queued frames and sends before it lets timers and I/O run. */
const SLICE_MS = 5;
/** Sessions a broadcast sends to per queued job (a few hundred microseconds of socket writes). */
const FAN_OUT_CHUNK = 64;
/** Transitions per StateDelta frame: a burst beyond this goes out as several frames. */
const DELTA_FRAME_TRANSITIONS = 4096;
/** Recent delta frames kept per run to answer a client's gap (older gaps get a snapshot). */
const RING_FRAMES = 256;
const RING_BYTES = 8 * 1024 * 1024;
/** How often a delta frame carries the state's hash (and always at a phase change). */
const HASH_INTERVAL_MS = 1000;
/** A client gets at most one snapshot per this long for its ResyncRequests (a snapshot can be megabytes). */
export const RESYNC_SNAPSHOT_INTERVAL_MS = 2000;

/** What the relay keeps per run to feed its sessions. */
interface RunFeed {
  /** Transitions since the last broadcast, the first applying to seq `pendingFrom`. */
  pending: WireTransition[];
  pendingFrom: number;
  /** A phase changed since the last broadcast: its frame carries the state hash. */
  hashNow: boolean;
  lastHashAt: number;
  /** The parameter hash the previous frame (or a snapshot) advertised. */
  paramHash: SnapshotParamHash | undefined;
  ring: { from: number; to: number; frame: Uint8Array }[];
  ringBytes: number;
  /** Sessions waiting for a snapshot (joiners, resyncs): sent at the next broadcast, one encoding for all. */
  waiting: Set<SessionHandle>;
  /** The same run for light sessions. */
  light: LightFeed;
}

/** Grantee meaning "anyone" (docs/protocol.md "Run permissions": the all-zero public key). */
export const PERMISSIONLESS = '0'.repeat(64);
const KEY_HEX = /^[0-9a-f]{64}$/;
const RUN_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Largest model (parameters) a run may train unless the operator raises it: the 125m preset, the biggest
 * this relay serves (its f32 checkpoint is ~500 MB, kept a few times on disk and built in memory when the run
 * is seeded). Larger presets need a relay sized for them (--max-model-params).
 */
export const DEFAULT_MAX_MODEL_PARAMS = parameterCount(PRESETS['125m']);
/**
 * Live (not Finished) runs one key may have created over the admin API, and all of them together. Keys cost
 * nothing to make, so only the total truly bounds an open relay; --run-creators closes it.
 */
export const DEFAULT_MAX_RUNS_PER_CREATOR = 4;
export const DEFAULT_MAX_RUNS = 32;

/** An admin/API failure with the HTTP status and the JSON error code the route returns. */
export class RelayError extends Error {
  readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 429 | 500;
  readonly code: string;
  readonly issues: readonly ConfigIssue[] | undefined;
  constructor(status: RelayError['status'], code: string, message: string, issues?: readonly ConfigIssue[]) {
    super(message);
    this.name = 'RelayError';
    this.status = status;
    this.code = code;
    this.issues = issues;
  }
}

/** What a live coordinator session exposes to the relay (implemented in session.ts). */
export interface SessionHandle {
  readonly identity: string;
  /** The session follows the run as a light replica (LightDelta frames and summary snapshots). */
  readonly light?: boolean;
  /** Sends raw frame bytes; never throws (a dead socket just drops them). */
  send(frame: Uint8Array): void;
  /** Closes the transport with a WebSocket close code. */
  close(code: number, reason: string): void;
}

export interface RelayLog {
  info(msg: string): void;
  warn(msg: string): void;
}

export interface RelayOptions {
  store: RelayStore;
  clock?: Clock;
  limits?: WireLimits;
  /** Coordinator tick period (Psyche's centralized server: 500 ms). */
  tickMs?: number;
  /** How long a dropped connection keeps its slot before it becomes a `leave` (default 10 s). */
  graceMs?: number;
  /** How long a new connection may take to send its Join (default 10 s: an honest client answers at once). */
  joinTimeoutMs?: number;
  /** Bytes a connection may send before its Join is acknowledged (default 16 KiB). */
  preJoinMaxBytes?: number;
  /** Connections waiting to join, overall (default 2048) and per source address (default 256). */
  maxUnjoined?: number;
  maxUnjoinedPerAddress?: number;
  /** Least time between two state broadcasts (StateDelta frames) of one run (default 100 ms). */
  snapshotIntervalMs?: number;
  /**
   * Verify Ed25519 signatures on Node's OpenSSL (default true): core's setFastEd25519Verifier, same answers.
   * It is process-wide (core's verify is a pure function with one optional accelerator).
   */
  nativeEd25519?: boolean;
  /** Frames one connection may send per second on average (bursts of twice that; default 100). */
  maxFramesPerSecond?: number;
  /** Keys allowed to create runs over the admin API; empty/undefined = any signed request. */
  runCreators?: readonly string[];
  /** Largest model a run may have, in parameters (default DEFAULT_MAX_MODEL_PARAMS). */
  maxModelParams?: number;
  /** Live runs one key may create over the admin API (default 4), and all keys together (default 32). */
  maxRunsPerCreator?: number;
  maxRuns?: number;
  /**
   * Leading zero bits of the proof of work a Join to a permissionless run must carry (core's join puzzle;
   * default 0: none). Permissioned runs never ask: their grants are the cost of an identity.
   */
  joinPowBits?: number;
  /** Identities one source address may bring into a run (default: no limit; the CLI sets one). */
  maxIdentitiesPerAddress?: number;
  log?: RelayLog;
}

export interface CreateRunOptions {
  toml: string;
  mainAuthority: string;
  joinAuthority?: string;
  paused?: boolean;
  permissioned?: boolean;
}

const quietLog: RelayLog = { info: () => {}, warn: () => {} };

function parseToml(toml: string) {
  try {
    return parseRunConfig(toml);
  } catch (e) {
    if (e instanceof RunConfigError) throw new RelayError(400, 'invalid_config', e.message, e.issues);
    throw e;
  }
}

export class Relay {
  readonly store: RelayStore;
  readonly clock: Clock;
  readonly limits: WireLimits;
  readonly tickMs: number;
  readonly graceMs: number;
  readonly joinTimeoutMs: number;
  readonly preJoinMaxBytes: number;
  readonly maxUnjoined: number;
  readonly maxUnjoinedPerAddress: number;
  readonly joinPowBits: number;
  readonly identityLimits: IdentityLimits;
  /** Salt of the origin tags joins carry (core's originTag), kept in the store across restarts. */
  readonly originSalt: Uint8Array;
  readonly snapshotIntervalMs: number;
  readonly maxFramesPerSecond: number;
  readonly runCreators: ReadonlySet<string>;
  readonly maxModelParams: number;
  readonly maxRunsPerCreator: number;
  readonly maxRuns: number;
  readonly log: RelayLog;
  private readonly hosts = new Map<string, RunHost>();
  /** runId → identity → the one live session of that identity. */
  private readonly sessions = new Map<string, Map<string, SessionHandle>>();
  /** `${runId} ${identity}` → pending disconnect-leave timer. */
  private readonly graceTimers = new Map<string, NodeJS.Timeout>();
  private timer: NodeJS.Timeout | undefined;
  private readonly pendingBroadcasts = new Set<string>();
  /** performance.now() of each run's last broadcast (monotonic: independent of the injectable clock). */
  private readonly lastBroadcast = new Map<string, number>();
  /** The seq each session's state was last brought to (snapshot or delta); unset until its first snapshot. */
  private readonly sentSeq = new WeakMap<SessionHandle, number>();
  /** performance.now() of the last snapshot a session's ResyncRequest got. */
  private readonly resyncedAt = new WeakMap<SessionHandle, number>();
  private readonly feeds = new Map<string, RunFeed>();
  /**
   * Inbound frames (every session's) and broadcast sends, in arrival order, worked through in slices so a
   * burst never holds the thread for long (sliced-queue.ts).
   */
  readonly work = new SlicedQueue(SLICE_MS, (e) =>
    this.log.warn(`queued work failed: ${(e as Error).stack ?? String(e)}`),
  );
  /** Observers for metrics: frame bytes in/out and reported losses. Replace the functions to observe. */
  readonly hooks: {
    bytesIn: (n: number) => void;
    bytesOut: (n: number) => void;
    loss: (runId: string, loss: number) => void;
    /** After every ParamHash report: the epoch's reporters and how many differ from its majority. */
    paramHash: (runId: string, epoch: number, reports: number, mismatched: number) => void;
    /** A client replayed the run's deltas to another state hash than the relay's (ResyncRequest mismatch). */
    stateHashMismatch: (runId: string) => void;
  } = {
    bytesIn: () => {},
    bytesOut: () => {},
    loss: () => {},
    paramHash: () => {},
    stateHashMismatch: () => {},
  };
  /** The relay's libp2p multiaddrs (with /p2p/<id>) while its libp2p node runs; shown in the run API. */
  p2pMultiaddrs: string[] = [];
  /** Called when a run is created (checkpoint seeding, metrics). */
  readonly runCreatedListeners = new Set<(host: RunHost) => void>();
  /** Called after every transition of any run (metrics, status pages). */
  readonly changeListeners = new Set<(host: RunHost, effects: readonly CoordinatorEffect[]) => void>();

  constructor(opts: RelayOptions) {
    if (opts.nativeEd25519 !== false) setFastEd25519Verifier(nativeEd25519Verify);
    this.joinPowBits = opts.joinPowBits ?? 0;
    this.identityLimits = new IdentityLimits(opts.maxIdentitiesPerAddress ?? Infinity);
    this.store = opts.store;
    this.originSalt = opts.store.originSalt();
    this.clock = opts.clock ?? Date.now;
    this.limits = opts.limits ?? DEFAULT_WIRE_LIMITS;
    this.tickMs = opts.tickMs ?? 500;
    this.graceMs = opts.graceMs ?? 10_000;
    this.joinTimeoutMs = opts.joinTimeoutMs ?? 10_000;
    this.preJoinMaxBytes = opts.preJoinMaxBytes ?? DEFAULT_PRE_JOIN_MAX_BYTES;
    this.maxUnjoined = opts.maxUnjoined ?? DEFAULT_MAX_UNJOINED;
    this.maxUnjoinedPerAddress = opts.maxUnjoinedPerAddress ?? DEFAULT_MAX_UNJOINED_PER_ADDRESS;
    this.snapshotIntervalMs = opts.snapshotIntervalMs ?? 100;
    this.maxFramesPerSecond = opts.maxFramesPerSecond ?? 100;
    this.runCreators = new Set(opts.runCreators ?? []);
    this.maxModelParams = opts.maxModelParams ?? DEFAULT_MAX_MODEL_PARAMS;
    this.maxRunsPerCreator = opts.maxRunsPerCreator ?? DEFAULT_MAX_RUNS_PER_CREATOR;
    this.maxRuns = opts.maxRuns ?? DEFAULT_MAX_RUNS;
    this.log = opts.log ?? quietLog;
    for (const row of this.store.runs.all()) {
      const toml = this.store.runs.latestConfig(row.run_id);
      let recovered: { state: CoordinatorState; seq: number; replayed: number } | null;
      try {
        recovered = toml === undefined ? null : this.recover(row.run_id);
      } catch (e) {
        // Only a damaged database gets here; keep serving the other runs and say which one is missing.
        this.log.warn(`run ${row.run_id}: unreadable state (${(e as Error).message}); skipped`);
        continue;
      }
      if (!recovered || toml === undefined) {
        this.log.warn(`run ${row.run_id}: no snapshot or config in the database; skipped`);
        continue;
      }
      const { state, seq, replayed } = recovered;
      this.hosts.set(row.run_id, this.makeHost(row, state, seq, toml, replayed));
    }
  }

  /** A run's state at its latest seq: the stored snapshot with the logged transitions after it replayed. */
  private recover(runId: string): { state: CoordinatorState; seq: number; replayed: number } | null {
    const snap = this.store.runs.snapshot(runId);
    if (!snap) return null;
    let state = JSON.parse(snap.state) as CoordinatorState;
    let seq = snap.seq;
    const log = this.store.runs.transitionsAfter(runId, seq);
    for (const t of log) {
      if (t.seq !== seq + 1 || t.event === null)
        throw new Error(`the transition log skips from seq ${seq} to ${t.seq}`);
      const event = decodeWireEvent(t.event, this.limits);
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
      store: this.store,
      clock: this.clock,
      limits: this.limits,
      onChange: (host, t) => this.changed(host, t),
    });
  }

  // --- runs ---------------------------------------------------------------------------------------

  run(runId: string): RunHost | undefined {
    return this.hosts.get(runId);
  }

  /** The run or a 404 RelayError. */
  mustRun(runId: string): RunHost {
    const h = this.hosts.get(runId);
    if (!h) throw new RelayError(404, 'unknown_run', `no run '${runId}' on this relay`);
    return h;
  }

  runList(): RunHost[] {
    return [...this.hosts.values()];
  }

  /**
   * Whether `key` may create a run over the admin API: on the allow-list when there is one (403), and under
   * the live-run quotas (429). Runs the operator creates from the command line are not counted against it.
   */
  assertMayCreateRun(key: string): void {
    if (this.runCreators.size > 0 && !this.runCreators.has(key))
      throw new RelayError(
        403,
        'forbidden',
        "only the relay's run creators (--run-creators) may create runs",
      );
    const live = this.runList().filter((h) => h.state.run_state !== 'Finished');
    if (live.length >= this.maxRuns)
      throw new RelayError(429, 'too_many_runs', `this relay hosts at most ${this.maxRuns} live runs`);
    const mine = live.filter((h) => h.row.main_authority === key).length;
    if (mine >= this.maxRunsPerCreator)
      throw new RelayError(
        429,
        'too_many_runs',
        `a key may have at most ${this.maxRunsPerCreator} live runs on this relay; finish one first`,
      );
  }

  /** Refuses a model larger than this relay takes (its checkpoints are stored, seeded and checked here). */
  private checkModelSize(run: RunConfig): void {
    let params: number;
    try {
      params = parameterCount(modelConfigForRun(run));
    } catch {
      return; // No model the relay can build: nothing is seeded or checked for it.
    }
    if (params > this.maxModelParams)
      throw new RelayError(
        413,
        'model_too_large',
        `the run's model has ${params} parameters; this relay takes at most ${this.maxModelParams} (--max-model-params)`,
      );
  }

  createRun(opts: CreateRunOptions): RunHost {
    if (!KEY_HEX.test(opts.mainAuthority))
      throw new RelayError(400, 'bad_request', 'main authority must be 64 lowercase hex digits');
    const joinAuthority = opts.joinAuthority ?? opts.mainAuthority;
    if (!KEY_HEX.test(joinAuthority))
      throw new RelayError(400, 'bad_request', 'join_authority must be 64 lowercase hex digits');
    const parsed = parseToml(opts.toml);
    this.checkModelSize(parsed.config);
    const runId = parsed.config.run_id ?? `run-${randomBytes(6).toString('hex')}`;
    // Run ids appear in URLs and file names: keep them to a URL-safe alphabet.
    if (!RUN_ID.test(runId))
      throw new RelayError(
        400,
        'bad_request',
        'run_id may use only letters, digits, ".", "_" and "-" (1..64)',
      );
    if (this.hosts.has(runId) || this.store.runs.get(runId))
      throw new RelayError(409, 'run_exists', `a run '${runId}' already exists on this relay`);
    const now = this.clock();
    let state: CoordinatorState;
    try {
      state = createCoordinator({
        run_id: runId,
        run_seed: randomBytes(32).toString('hex'),
        config: coordinatorConfigOf(parsed.config),
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
    this.store.transaction(() => {
      this.store.runs.insertRunRows(row, opts.toml, JSON.stringify(state));
      if (!opts.permissioned)
        this.store.sessions.upsertGrant(runId, PERMISSIONLESS, joinAuthority, true, now);
    });
    const host = this.makeHost(row, state, 0, opts.toml);
    this.hosts.set(runId, host);
    this.log.info(`run ${runId} created (${state.run_state})`);
    for (const l of this.runCreatedListeners) {
      try {
        l(host);
      } catch (e) {
        this.log.warn(`run-created listener failed: ${(e as Error).message}`);
      }
    }
    return host;
  }

  /** Feeds an admin event (pause/resume) and turns a refusal into a 409 with core's code. */
  adminEvent(host: RunHost, event: { type: 'pause' } | { type: 'resume' }): TickResult {
    const r = host.apply(event);
    if (r.error) throw new RelayError(409, r.error.code, r.error.message);
    return r;
  }

  updateConfig(host: RunHost, toml: string): TickResult {
    const parsed = parseToml(toml);
    if (parsed.config.run_id !== undefined && parsed.config.run_id !== host.runId)
      throw new RelayError(400, 'bad_request', `the TOML's run_id '${parsed.config.run_id}' is not this run`);
    this.checkModelSize(parsed.config);
    const at = this.clock();
    const r = host.apply({ type: 'update_config', config: coordinatorConfigOf(parsed.config) }, () =>
      this.store.runs.insertConfig(host.runId, toml, at),
    );
    if (r.error) throw new RelayError(409, r.error.code, r.error.message);
    host.toml = toml;
    return r;
  }

  // --- permissions (docs/protocol.md "Run permissions") ---------------------------------------------

  /** Join allowed iff an active grant by the run's join authority is permissionless, names the key, or lists it as a delegate. */
  mayJoin(host: RunHost, key: string): boolean {
    return this.store.sessions.grantsAdmitting(host.runId, host.row.join_authority, key, PERMISSIONLESS) > 0;
  }

  /** The join puzzle's difficulty for a run: the relay's setting when anyone may join, else none. */
  joinPowBitsFor(host: RunHost): number {
    return this.store.sessions.grant(host.runId, PERMISSIONLESS)?.active ? this.joinPowBits : 0;
  }

  // --- sessions -----------------------------------------------------------------------------------

  /** Registers `session` as the identity's live connection; returns the one it replaces, if any. */
  attach(runId: string, session: SessionHandle): SessionHandle | undefined {
    let m = this.sessions.get(runId);
    if (!m) {
      m = new Map();
      this.sessions.set(runId, m);
    }
    const old = m.get(session.identity);
    m.set(session.identity, session);
    this.cancelGrace(runId, session.identity);
    return old === session ? undefined : old;
  }

  /** A session's transport closed. If it was the live one, start the grace period before `leave`. */
  detach(runId: string, session: SessionHandle, left: boolean): void {
    this.feeds.get(runId)?.waiting.delete(session);
    const m = this.sessions.get(runId);
    if (!m || m.get(session.identity) !== session) return;
    m.delete(session.identity);
    if (left) return;
    this.scheduleLeave(runId, session.identity);
  }

  /** After the grace period, `leave` for `identity` unless it has a live session again by then. */
  private scheduleLeave(runId: string, identity: string): void {
    const key = `${runId} ${identity}`;
    this.cancelGrace(runId, identity);
    const t = setTimeout(() => {
      this.graceTimers.delete(key);
      const host = this.hosts.get(runId);
      if (!host || this.sessions.get(runId)?.has(identity)) return;
      // UnknownClient (already left, ejected, epoch over) is fine: there is nothing to withdraw.
      try {
        host.apply({ type: 'leave', id: identity });
      } catch (e) {
        this.log.warn(`run ${runId}: leave after disconnect failed: ${(e as Error).message}`);
      }
    }, this.graceMs);
    t.unref();
    this.graceTimers.set(key, t);
  }

  private cancelGrace(runId: string, identity: string): void {
    const key = `${runId} ${identity}`;
    const t = this.graceTimers.get(key);
    if (t) {
      clearTimeout(t);
      this.graceTimers.delete(key);
    }
  }

  sessionsOf(runId: string): SessionHandle[] {
    return [...(this.sessions.get(runId)?.values() ?? [])];
  }

  private feed(runId: string): RunFeed {
    let f = this.feeds.get(runId);
    if (!f) {
      f = {
        pending: [],
        pendingFrom: 0,
        hashNow: false,
        lastHashAt: -Infinity,
        paramHash: undefined,
        ring: [],
        ringBytes: 0,
        waiting: new Set(),
        light: new LightFeed(),
      };
      this.feeds.set(runId, f);
    }
    return f;
  }

  private changed(host: RunHost, t: CommittedTransition): void {
    const feed = this.feed(host.runId);
    if (feed.pending.length === 0) feed.pendingFrom = t.seq - 1;
    feed.pending.push(t.wire);
    const phaseChanged = t.effects.some((e) => e.type === 'RunStateChanged');
    if (phaseChanged) feed.hashNow = true;
    feed.light.push(t.seq, t.light, phaseChanged);
    this.scheduleBroadcast(host);
    for (const l of this.changeListeners) {
      try {
        l(host, t.effects);
      } catch (e) {
        this.log.warn(`change listener failed: ${(e as Error).message}`);
      }
    }
  }

  /**
   * Broadcasts are throttled per run: at most one per snapshotIntervalMs, carrying every transition since the
   * last one in one StateDelta that is encoded once and sent to every session. A change after a quiet period
   * goes out right away (next event-loop turn); during a burst the trailing one carries the rest.
   */
  private scheduleBroadcast(host: RunHost): void {
    if (this.pendingBroadcasts.has(host.runId)) return;
    this.pendingBroadcasts.add(host.runId);
    const wait =
      (this.lastBroadcast.get(host.runId) ?? -Infinity) + this.snapshotIntervalMs - performance.now();
    if (wait <= 0) setImmediate(() => this.flushBroadcast(host));
    else setTimeout(() => this.flushBroadcast(host), wait).unref();
  }

  private flushBroadcast(host: RunHost): void {
    this.pendingBroadcasts.delete(host.runId);
    this.lastBroadcast.set(host.runId, performance.now());
    if (this.hosts.get(host.runId) !== host) return;
    const feed = this.feed(host.runId);
    try {
      if (feed.pending.length > 0) this.sendDeltas(host, feed);
      this.sendLightDelta(host, feed);
      if (feed.waiting.size > 0) {
        const to = [...feed.waiting];
        feed.waiting.clear();
        for (const s of to) this.sentSeq.set(s, host.seq);
        const light = to.filter((s) => s.light === true);
        const full = to.filter((s) => s.light !== true);
        if (full.length > 0) this.fanOut(host.snapshotFrame(), full);
        if (light.length > 0) this.fanOut(host.lightSnapshotFrame(), light);
      }
    } catch (e) {
      // A timer callback: an exception here would end the process. The next change broadcasts again.
      this.log.warn(`run ${host.runId}: broadcast failed: ${(e as Error).stack ?? String(e)}`);
    }
  }

  /** The pending transitions as StateDelta frames, to every session that has its snapshot. */
  private sendDeltas(host: RunHost, feed: RunFeed): void {
    const pending = feed.pending;
    let from = feed.pendingFrom;
    feed.pending = [];
    const sessions = [...(this.sessions.get(host.runId)?.values() ?? [])];
    for (let i = 0; i < pending.length; i += DELTA_FRAME_TRANSITIONS) {
      const transitions = pending.slice(i, i + DELTA_FRAME_TRANSITIONS);
      const to = from + transitions.length;
      const last = to === host.seq;
      const now = performance.now();
      const hashed = last && (feed.hashNow || now - feed.lastHashAt >= HASH_INTERVAL_MS);
      const paramHash = last && host.paramHash !== feed.paramHash ? host.paramHash : undefined;
      const frame = encodeStateDelta(
        {
          runId: host.runId,
          fromSeq: from,
          transitions,
          ...(hashed ? { stateHash: host.stateHash() } : {}),
          ...(paramHash ? { paramHash } : {}),
        },
        this.limits,
      );
      if (hashed) {
        feed.hashNow = false;
        feed.lastHashAt = now;
      }
      if (last) feed.paramHash = host.paramHash;
      feed.ring.push({ from, to, frame });
      feed.ringBytes += frame.length;
      while (feed.ring.length > RING_FRAMES || feed.ringBytes > RING_BYTES)
        feed.ringBytes -= feed.ring.shift()!.frame.length;
      const targets: SessionHandle[] = [];
      for (const s of sessions) {
        if (s.light === true) continue;
        const at = this.sentSeq.get(s);
        if (at === undefined || at >= to) continue;
        targets.push(s);
        this.sentSeq.set(s, to);
      }
      this.fanOut(frame, targets);
      from = to;
    }
  }

  /** The light sessions' frame for everything up to the run's seq, when they need one. */
  private sendLightDelta(host: RunHost, feed: RunFeed): void {
    const light = [...(this.sessions.get(host.runId)?.values() ?? [])].filter((s) => s.light === true);
    if (light.length === 0 && ![...feed.waiting].some((s) => s.light === true)) {
      feed.light.skipTo(host.seq);
      return;
    }
    const f = feed.light.flush(
      host.runId,
      host.seq,
      host.paramHash,
      () => host.lightStateHash(),
      this.limits,
    );
    if (!f) return;
    const targets: SessionHandle[] = [];
    for (const s of light) {
      const at = this.sentSeq.get(s);
      if (at === undefined || at >= f.to) continue;
      targets.push(s);
      this.sentSeq.set(s, f.to);
    }
    this.fanOut(f.frame, targets);
  }

  /** Sends `frame` to `targets` through the work queue, a chunk per job (after everything queued before). */
  private fanOut(frame: Uint8Array, targets: readonly SessionHandle[]): void {
    for (let i = 0; i < targets.length; i += FAN_OUT_CHUNK) {
      const chunk = targets.slice(i, i + FAN_OUT_CHUNK);
      this.work.push(() => {
        for (const s of chunk) s.send(frame);
      });
    }
  }

  /** Sends the run's current state to a session (its join): at the next broadcast, with everyone else's. */
  queueSnapshot(session: SessionHandle, host: RunHost): void {
    this.feed(host.runId).waiting.add(session);
    this.scheduleBroadcast(host);
  }

  /**
   * A session's ResyncRequest: the delta frames after its seq from the ring when the ring still covers them,
   * else (and for a mismatch, always) a snapshot — at most one per RESYNC_SNAPSHOT_INTERVAL_MS per session.
   * 'too_soon' when that snapshot would come too early (the client asks again later).
   */
  resync(session: SessionHandle, host: RunHost, q: ResyncRequest): 'deltas' | 'snapshot' | 'too_soon' {
    const feed = this.feed(host.runId);
    if (q.reason === 'gap' && q.seq <= host.seq && session.light === true) {
      const frames = feed.light.framesAfter(q.seq);
      if (frames) {
        queueMicrotask(() => {
          for (const f of frames) session.send(f.frame);
        });
        const to = frames.at(-1)?.to ?? q.seq;
        this.sentSeq.set(session, Math.max(this.sentSeq.get(session) ?? -1, to));
        return 'deltas';
      }
    } else if (q.reason === 'gap' && q.seq <= host.seq) {
      const i = feed.ring.findIndex((f) => f.to > q.seq);
      if (i >= 0 && feed.ring[i]!.from <= q.seq) {
        const frames = feed.ring.slice(i).map((f) => f.frame);
        // After the request's Ack, which the session sends when this returns.
        queueMicrotask(() => {
          for (const f of frames) session.send(f);
        });
        this.sentSeq.set(session, Math.max(this.sentSeq.get(session) ?? -1, feed.ring.at(-1)!.to));
        return 'deltas';
      }
    }
    const now = performance.now();
    if (now - (this.resyncedAt.get(session) ?? -Infinity) < RESYNC_SNAPSHOT_INTERVAL_MS) return 'too_soon';
    this.resyncedAt.set(session, now);
    if (q.reason === 'mismatch') {
      this.hooks.stateHashMismatch(host.runId);
      this.log.warn(
        `run ${host.runId}: client ${session.identity.slice(0, 12)}… replayed seq ${q.seq} to another state hash; sending it a snapshot`,
      );
    }
    this.queueSnapshot(session, host);
    return 'snapshot';
  }

  // --- timer --------------------------------------------------------------------------------------

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tickAll(), this.tickMs);
    // A restart dropped every connection at once: treat each member as disconnected just now, so those that
    // do not come back within the grace period leave, exactly as after a dropped WebSocket.
    for (const host of this.hosts.values()) {
      const ids = new Set(host.state.members.map((m) => m.id));
      for (const c of host.state.epoch.clients) if (c.state === 'Healthy') ids.add(c.id);
      for (const id of ids) if (!this.sessions.get(host.runId)?.has(id)) this.scheduleLeave(host.runId, id);
    }
  }

  /** One timer tick of every run; one run's failure (e.g. a write error) does not stop the others. */
  tickAll(): void {
    for (const host of this.hosts.values()) {
      try {
        host.timer();
      } catch (e) {
        this.log.warn(`run ${host.runId}: tick failed: ${(e as Error).message}`);
      }
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const t of this.graceTimers.values()) clearTimeout(t);
    this.graceTimers.clear();
  }

  /** Closes every session (e.g. at shutdown). */
  closeAll(code: number, reason: string): void {
    for (const m of this.sessions.values()) for (const s of [...m.values()]) s.close(code, reason);
  }
}
