// The relay: its runs and their live sessions. The run registry (relay/run-registry.ts) loads every run from
// SQLite at start and creates runs from TOML; session attachment (relay/attachments.ts) keeps each identity's
// live connection and its grace period; the broadcaster (relay/broadcaster.ts) fans state changes out. This
// holds the relay's settings, ticks all runs on one timer, and answers the routes' permission questions.
// HTTP and WebSocket route modules call into this; it knows nothing about Hono.
import { coordinatorConfigOf, DEFAULT_WIRE_LIMITS, setFastEd25519Verifier } from '@meshtrain/core';
import type { CoordinatorEffect, ResyncRequest, TickResult, WireLimits } from '@meshtrain/core';
import {
  DEFAULT_GRACE_MS,
  DEFAULT_JOIN_TIMEOUT_MS,
  DEFAULT_MAX_FRAMES_PER_SECOND,
  DEFAULT_MAX_MODEL_PARAMS,
  DEFAULT_MAX_RUNS,
  DEFAULT_MAX_RUNS_PER_CREATOR,
  DEFAULT_MAX_UNJOINED,
  DEFAULT_MAX_UNJOINED_PER_ADDRESS,
  DEFAULT_PRE_JOIN_MAX_BYTES,
  DEFAULT_SNAPSHOT_INTERVAL_MS,
  DEFAULT_TICK_MS,
} from './defaults.ts';
import { IdentityLimits } from './identity-limits.ts';
import { nativeEd25519Verify } from './native-ed25519.ts';
import { SessionAttachments } from './relay/attachments.ts';
import { Broadcaster } from './relay/broadcaster.ts';
import { parseToml, RunRegistry, type CreateRunOptions } from './relay/run-registry.ts';
import { PERMISSIONLESS, quietLog, RelayError, type RelayLog, type SessionHandle } from './relay/types.ts';
import type { Clock, RunHost } from './run-host.ts';
import { SlicedQueue } from './sliced-queue.ts';
import type { RelayStore } from './store.ts';

export { RESYNC_SNAPSHOT_INTERVAL_MS } from './relay/broadcaster.ts';
export type { CreateRunOptions } from './relay/run-registry.ts';
export { PERMISSIONLESS, RelayError } from './relay/types.ts';
export type { RelayLog, SessionHandle } from './relay/types.ts';

/** The longest the relay works through queued frames and sends before it lets timers and I/O run. */
const SLICE_MS = 5;

export interface RelayOptions {
  store: RelayStore;
  clock?: Clock;
  limits?: WireLimits;
  /** Coordinator tick period (default DEFAULT_TICK_MS). */
  tickMs?: number;
  /** How long a dropped connection keeps its slot before it becomes a `leave` (default DEFAULT_GRACE_MS). */
  graceMs?: number;
  /** How long a new connection may take to send its Join (default DEFAULT_JOIN_TIMEOUT_MS). */
  joinTimeoutMs?: number;
  /** Bytes a connection may send before its Join is acknowledged (default DEFAULT_PRE_JOIN_MAX_BYTES). */
  preJoinMaxBytes?: number;
  /** Connections waiting to join, overall and per source address (DEFAULT_MAX_UNJOINED, …_PER_ADDRESS). */
  maxUnjoined?: number;
  maxUnjoinedPerAddress?: number;
  /** Least time between two state broadcasts (StateDelta frames) of one run (default DEFAULT_SNAPSHOT_INTERVAL_MS). */
  snapshotIntervalMs?: number;
  /**
   * Verify Ed25519 signatures on Node's OpenSSL (default true): core's setFastEd25519Verifier, same answers.
   * It is process-wide (core's verify is a pure function with one optional accelerator).
   */
  nativeEd25519?: boolean;
  /** Frames one connection may send per second on average (bursts of twice that). */
  maxFramesPerSecond?: number;
  /** Keys allowed to create runs over the admin API; empty/undefined = any signed request. */
  runCreators?: readonly string[];
  /** Largest model a run may have, in parameters (default DEFAULT_MAX_MODEL_PARAMS). */
  maxModelParams?: number;
  /** Live runs one key may create over the admin API, and all keys together (defaults.ts). */
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
  readonly log: RelayLog;
  private readonly runs: RunRegistry;
  private readonly attachments: SessionAttachments;
  private readonly broadcaster: Broadcaster;
  private timer: NodeJS.Timeout | undefined;
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
    this.tickMs = opts.tickMs ?? DEFAULT_TICK_MS;
    this.graceMs = opts.graceMs ?? DEFAULT_GRACE_MS;
    this.joinTimeoutMs = opts.joinTimeoutMs ?? DEFAULT_JOIN_TIMEOUT_MS;
    this.preJoinMaxBytes = opts.preJoinMaxBytes ?? DEFAULT_PRE_JOIN_MAX_BYTES;
    this.maxUnjoined = opts.maxUnjoined ?? DEFAULT_MAX_UNJOINED;
    this.maxUnjoinedPerAddress = opts.maxUnjoinedPerAddress ?? DEFAULT_MAX_UNJOINED_PER_ADDRESS;
    this.snapshotIntervalMs = opts.snapshotIntervalMs ?? DEFAULT_SNAPSHOT_INTERVAL_MS;
    this.maxFramesPerSecond = opts.maxFramesPerSecond ?? DEFAULT_MAX_FRAMES_PER_SECOND;
    this.log = opts.log ?? quietLog;
    this.attachments = new SessionAttachments(this.graceMs, this.log, (runId, identity) =>
      this.runs.get(runId)?.apply({ type: 'leave', id: identity }),
    );
    this.broadcaster = new Broadcaster({
      limits: this.limits,
      snapshotIntervalMs: this.snapshotIntervalMs,
      work: this.work,
      log: this.log,
      sessionsOf: (runId) => this.attachments.sessionsOf(runId),
      isHosted: (host) => this.runs.get(host.runId) === host,
      stateHashMismatch: (runId) => this.hooks.stateHashMismatch(runId),
    });
    this.runs = new RunRegistry({
      store: this.store,
      clock: this.clock,
      limits: this.limits,
      log: this.log,
      runCreators: new Set(opts.runCreators ?? []),
      maxModelParams: opts.maxModelParams ?? DEFAULT_MAX_MODEL_PARAMS,
      maxRunsPerCreator: opts.maxRunsPerCreator ?? DEFAULT_MAX_RUNS_PER_CREATOR,
      maxRuns: opts.maxRuns ?? DEFAULT_MAX_RUNS,
      onChange: (host, t) => {
        this.broadcaster.changed(host, t);
        this.notify(this.changeListeners, (l) => l(host, t.effects), 'change listener');
      },
    });
  }

  /** Calls every listener; one that throws is logged and does not stop the others. */
  private notify<L>(listeners: ReadonlySet<L>, call: (l: L) => void, what: string): void {
    for (const l of listeners) {
      try {
        call(l);
      } catch (e) {
        this.log.warn(`${what} failed: ${(e as Error).message}`);
      }
    }
  }

  // --- runs ---------------------------------------------------------------------------------------

  run(runId: string): RunHost | undefined {
    return this.runs.get(runId);
  }

  /** The run or a 404 RelayError. */
  mustRun(runId: string): RunHost {
    return this.runs.mustGet(runId);
  }

  runList(): RunHost[] {
    return this.runs.list();
  }

  /**
   * Whether `key` may create a run over the admin API: on the allow-list when there is one (403), and under
   * the live-run quotas (429). Runs the operator creates from the command line are not counted against it.
   */
  assertMayCreateRun(key: string): void {
    this.runs.assertMayCreate(key);
  }

  createRun(opts: CreateRunOptions): RunHost {
    const host = this.runs.create(opts);
    this.log.info(`run ${host.runId} created (${host.state.run_state})`);
    this.notify(this.runCreatedListeners, (l) => l(host), 'run-created listener');
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
    this.runs.checkModelSize(parsed.config);
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
    return this.attachments.attach(runId, session);
  }

  /** A session's transport closed. If it was the live one, start the grace period before `leave`. */
  detach(runId: string, session: SessionHandle, left: boolean): void {
    this.broadcaster.forget(runId, session);
    this.attachments.detach(runId, session, left);
  }

  sessionsOf(runId: string): SessionHandle[] {
    return this.attachments.sessionsOf(runId);
  }

  /** Sends the run's current state to a session (its join): at the next broadcast, with everyone else's. */
  queueSnapshot(session: SessionHandle, host: RunHost): void {
    this.broadcaster.queueSnapshot(session, host);
  }

  /** A session's ResyncRequest (relay/broadcaster.ts): missed deltas, a snapshot, or 'too_soon'. */
  resync(session: SessionHandle, host: RunHost, q: ResyncRequest): 'deltas' | 'snapshot' | 'too_soon' {
    return this.broadcaster.resync(session, host, q);
  }

  // --- timer --------------------------------------------------------------------------------------

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tickAll(), this.tickMs);
    // A restart dropped every connection at once: treat each member as disconnected just now, so those that
    // do not come back within the grace period leave, exactly as after a dropped WebSocket.
    for (const host of this.runs.list()) {
      const ids = new Set(host.state.members.map((m) => m.id));
      for (const c of host.state.epoch.clients) if (c.state === 'Healthy') ids.add(c.id);
      for (const id of ids)
        if (!this.attachments.has(host.runId, id)) this.attachments.scheduleLeave(host.runId, id);
    }
  }

  /** One timer tick of every run; one run's failure (e.g. a write error) does not stop the others. */
  tickAll(): void {
    for (const host of this.runs.list()) {
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
    this.attachments.stop();
  }

  /** Closes every session (e.g. at shutdown). */
  closeAll(code: number, reason: string): void {
    this.attachments.closeAll(code, reason);
  }
}
