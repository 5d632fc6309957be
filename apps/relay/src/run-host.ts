// One run hosted by the relay: the core coordinator state, the only code that changes it (core's `tick`),
// and its persistence. Every state change is written to SQLite (the transition in core's compact form, a
// snapshot now and then, round history derived from core's effects) in one transaction BEFORE the in-memory
// state moves on, so what clients see is always something a restart can resume from, at the same seq. No
// protocol rule lives here: which events are valid, when phases end and what is accepted are all core's
// answers.
import { createHash, randomBytes } from 'node:crypto';
import {
  admittedListOf,
  listAddresses,
  roundListAddress,
  encodeAdmittedList,
  compactTransition,
  encodeStateSnapshot,
  encodeWireEvent,
  lightTransitionOf,
  summarizeState,
  maxSignedResultBytes,
  parseRunConfig,
  runResultSpec,
  tick,
  usesEntropy,
} from '@meshtrain/core';
import type {
  AgreedEpoch,
  AppliedTransition,
  CoordinatorEffect,
  CoordinatorEvent,
  CoordinatorState,
  LightTransition,
  ParamHash,
  ParamHashVerdict,
  ProtocolRefusal,
  ResultSpec,
  SnapshotParamHash,
  TickResult,
  WireLimits,
  WireTransition,
} from '@meshtrain/core';
import { modelConfigForRun, parameterSpecs } from '@meshtrain/model';
import type { ParamHashReport } from '@meshtrain/client/relay-api';
import { eventLabel, recordEffects, recordWitnessMetadata } from './run-host/history.ts';
import { RunParamHashes } from './run-host/param-hashes.ts';
import type { RelayStore, RunRow } from './store.ts';

/** Room for every other frame a client sends: attestations and health reports of a run of thousands of clients. */
const NON_RESULT_FRAME_BYTES = 1024 * 1024;

/** Wall clock in unix milliseconds; injectable so tests can move time. */
export type Clock = () => number;

/**
 * A snapshot is written at least every this many transitions (and at every phase change but RoundTrain →
 * RoundWitness), so a restart replays at most this many logged transitions.
 */
export const SNAPSHOT_EVERY = 1000;

/** What a committed transition hands the relay: its seq, core's wire form and the effects. */
export interface CommittedTransition {
  seq: number;
  wire: WireTransition;
  /** What light replicas apply for it (core's lightTransitionOf); null when their summary did not change. */
  light: LightTransition | null;
  effects: readonly CoordinatorEffect[];
}

/**
 * What a result must look like for this run's model and optimizer (core's runResultSpec: DisTrO's signs or
 * SparseLoCo's n-bit values of the run's width), or null when the run's TOML does not describe a model this
 * relay can build or an optimizer whose peers exchange results (such runs are refused at creation; older rows
 * may exist).
 */
export function resultSpecForToml(toml: string): ResultSpec | null {
  try {
    const run = parseRunConfig(toml).config;
    return runResultSpec(
      parameterSpecs(modelConfigForRun(run)),
      run.model.LLM.optimizer,
      run.config.verification_percent,
    );
  } catch {
    return null;
  }
}

/** Fresh shell entropy for core's round seeds (core itself never draws randomness). */
function freshEntropy(): string {
  return randomBytes(32).toString('hex');
}

/** Whether the transition's state is worth a snapshot of its own (a phase change other than into RoundWitness). */
function phaseChange(effects: readonly CoordinatorEffect[]): boolean {
  return effects.some((e) => e.type === 'RunStateChanged' && e.to !== 'RoundWitness');
}

export class RunHost {
  readonly runId: string;
  readonly row: RunRow;
  state: CoordinatorState;
  /** Transition counter: StateSnapshot.seq / StateDelta seqs, and the key of the transition log. */
  seq: number;
  /** Transitions since the stored snapshot. */
  private sinceSnapshot: number;
  private tomlText: string;
  /** The shape every admitted result must have (core's checkResultShape); null: not checked. */
  resultSpec: ResultSpec | null;
  private readonly store: RelayStore;
  private readonly clock: Clock;
  private readonly limits: WireLimits;
  private readonly onChange: (host: RunHost, t: CommittedTransition) => void;
  private readonly paramHashes: RunParamHashes;
  /** The encoded StateSnapshot of one seq (and parameter hash), shared by everyone who gets it. */
  private snapshotCache: { seq: number; paramHash: SnapshotParamHash | undefined; frame: Uint8Array } | null =
    null;
  private hashCache: { seq: number; hash: Uint8Array } | null = null;
  /** The same two for light replicas: the summary's snapshot frame and hash at one seq. */
  private lightSnapshotCache: {
    seq: number;
    paramHash: SnapshotParamHash | undefined;
    frame: Uint8Array;
  } | null = null;
  private lightHashCache: { seq: number; hash: Uint8Array } | null = null;
  /** The canonical JSON of the state at one seq (a snapshot write and the state hash of a phase change share it). */
  private jsonCache: { seq: number; text: string } | null = null;
  /** Encoded AdmittedList frames of the ring's closed rounds, by admitted_list: each encoded once. */
  private readonly admittedFrames = new Map<string, Uint8Array>();

  constructor(opts: {
    row: RunRow;
    state: CoordinatorState;
    seq: number;
    /** Transitions the log holds after the stored snapshot (what recovery replayed). */
    sinceSnapshot?: number;
    toml: string;
    store: RelayStore;
    clock: Clock;
    limits: WireLimits;
    onChange: (host: RunHost, t: CommittedTransition) => void;
  }) {
    this.row = opts.row;
    this.runId = opts.row.run_id;
    this.state = opts.state;
    this.seq = opts.seq;
    this.sinceSnapshot = opts.sinceSnapshot ?? 0;
    this.tomlText = opts.toml;
    this.resultSpec = resultSpecForToml(opts.toml);
    this.store = opts.store;
    this.clock = opts.clock;
    this.limits = opts.limits;
    this.onChange = opts.onChange;
    this.paramHashes = new RunParamHashes(opts.store, this.runId, opts.clock);
  }

  get toml(): string {
    return this.tomlText;
  }

  /** A new config (admin update while paused): the result spec follows it. */
  set toml(text: string) {
    this.tomlText = text;
    this.resultSpec = resultSpecForToml(text);
  }

  /**
   * The largest frame a client of this run may send: its biggest valid result (core's maxSignedResultBytes),
   * or NON_RESULT_FRAME_BYTES for witnesses and health checks of a large run; the relay-wide limit when the
   * run's model is unknown.
   */
  get maxFrameBytes(): number {
    const spec = this.resultSpec;
    if (!spec) return this.limits.maxFrameBytes;
    return Math.min(this.limits.maxFrameBytes, Math.max(maxSignedResultBytes(spec), NON_RESULT_FRAME_BYTES));
  }

  private nowSeconds(): number {
    return Math.floor(this.clock() / 1000);
  }

  /**
   * Feed one event from a client or the admin API. A transition that starts a round is run again on fresh
   * entropy (core's usesEntropy), in the same persisted transition, so no round seed is predictable before
   * its round starts; other transitions carry none. A refused event changes nothing (unless core recorded a
   * strike).
   */
  apply(event: CoordinatorEvent, alsoInTransaction?: (r: TickResult) => void): TickResult {
    const now = this.nowSeconds();
    let r = tick(this.state, event, now);
    if (r.state === this.state) return r;
    if (!usesEntropy(r.effects)) {
      this.commit(r, { now, event }, alsoInTransaction);
      return r;
    }
    const entropy = freshEntropy();
    const base = tick(this.state, { type: 'entropy', entropy }, now).state;
    r = tick(base, event, now);
    if (r.state === base) return r;
    this.commit(r, { now, entropy, event }, alsoInTransaction);
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
    if (!usesEntropy(probe.effects)) {
      this.commit(probe, { now, event: { type: 'tick' } });
      return probe;
    }
    const entropy = freshEntropy();
    const r = tick(this.state, { type: 'tick', entropy }, now);
    if (r.state === this.state) return undefined;
    this.commit(r, { now, event: { type: 'tick', entropy } });
    return r;
  }

  private commit(r: TickResult, t: AppliedTransition, extra?: (r: TickResult) => void): void {
    const prev = this.state;
    const seq = this.seq + 1;
    // Encoded before anything is written: a transition the wire cannot carry would be one clients cannot
    // follow and a restart cannot replay, so it is refused (the caller's error) rather than applied.
    const wire = compactTransition(prev, t);
    const event = encodeWireEvent(wire.event, this.limits);
    const label = { ...eventLabel(t.event), ...(r.error ? { error: r.error.code } : {}) };
    const at = this.clock();
    const snapshot = this.sinceSnapshot + 1 >= SNAPSHOT_EVERY || phaseChange(r.effects);
    const json = snapshot ? JSON.stringify(r.state) : null;
    // If the write fails (disk full, I/O error) the exception propagates and the in-memory state stays
    // where the database is: never broadcast a state that a restart would not find.
    this.store.transaction(() => {
      this.store.runs.appendTransition(
        this.runId,
        { seq, at, now: t.now, entropy: wire.entropy, event },
        JSON.stringify(label),
        JSON.stringify(r.effects),
      );
      if (json !== null) this.store.runs.writeSnapshot(this.runId, seq, json, at);
      recordEffects(this.store, this.runId, prev, r.state, r.effects, t.now);
      extra?.(r);
    });
    this.seq = seq;
    this.state = r.state;
    this.sinceSnapshot = snapshot ? 0 : this.sinceSnapshot + 1;
    if (json !== null) this.jsonCache = { seq, text: json };
    this.onChange(this, { seq, wire, light: lightTransitionOf(prev, t, r, seq), effects: r.effects });
  }

  /**
   * The StateSnapshot frame of the current state, encoded once per seq (and parameter hash) and shared by
   * every joiner and resync of that seq; `serverTime` is when it was encoded.
   */
  snapshotFrame(): Uint8Array {
    const paramHash = this.paramHashes.current;
    const c = this.snapshotCache;
    if (c && c.seq === this.seq && c.paramHash === paramHash) return c.frame;
    const frame = encodeStateSnapshot(
      {
        runId: this.runId,
        seq: this.seq,
        serverTime: this.clock(),
        state: this.state,
        ...(paramHash === undefined ? {} : { paramHash }),
      },
      this.limits,
    );
    this.snapshotCache = { seq: this.seq, paramHash, frame };
    return frame;
  }

  /** snapshotFrame for light replicas: the summary of the current state (core's summarizeState). */
  lightSnapshotFrame(): Uint8Array {
    const paramHash = this.paramHashes.current;
    const c = this.lightSnapshotCache;
    if (c && c.seq === this.seq && c.paramHash === paramHash) return c.frame;
    const frame = encodeStateSnapshot(
      {
        runId: this.runId,
        seq: this.seq,
        serverTime: this.clock(),
        state: summarizeState(this.state),
        ...(paramHash === undefined ? {} : { paramHash }),
      },
      this.limits,
    );
    this.lightSnapshotCache = { seq: this.seq, paramHash, frame };
    return frame;
  }

  /** The hash light replicas check: core's stateHash of the summary of the current state. */
  lightStateHash(): Uint8Array {
    const c = this.lightHashCache;
    if (c && c.seq === this.seq) return c.hash;
    const json = JSON.stringify(summarizeState(this.state));
    const hash = new Uint8Array(createHash('sha256').update(json, 'utf8').digest());
    this.lightHashCache = { seq: this.seq, hash };
    return hash;
  }

  /**
   * The AdmittedList frame of the closed round among the ring's whose admitted_list is `address` (the frame
   * holds the step, so an address names one round), or null when none is. Encoded once per round, so a list
   * asked for by many costs its bytes, not its encoding, each time.
   */
  admittedListFrame(address: string): Uint8Array | null {
    const runId = this.state.run_id;
    const round = this.state.epoch.rounds.find((r) => r && roundListAddress(runId, r) === address);
    if (!round) return null;
    const cached = this.admittedFrames.get(address);
    if (cached) return cached;
    const list = admittedListOf(this.state, round.height);
    if (!list) return null;
    const frame = encodeAdmittedList(list, this.limits);
    const held = listAddresses(this.state);
    for (const k of [...this.admittedFrames.keys()]) if (!held.has(k)) this.admittedFrames.delete(k);
    this.admittedFrames.set(address, frame);
    return frame;
  }

  /** Core's stateHash of the current state (SHA-256 of its canonical JSON, on Node's native SHA-256). */
  stateHash(): Uint8Array {
    const c = this.hashCache;
    if (c && c.seq === this.seq) return c.hash;
    const json = this.jsonCache?.seq === this.seq ? this.jsonCache.text : JSON.stringify(this.state);
    // Node hashes a string as its UTF-8 bytes: core's canonicalStateBytes.
    const hash = new Uint8Array(createHash('sha256').update(json, 'utf8').digest());
    this.hashCache = { seq: this.seq, hash };
    return hash;
  }

  /** Loss, throughput and bandwidth that witnesses report for a step: metric samples and the round's mean loss. */
  recordWitnessMetadata(
    step: number,
    client: string,
    m: { loss: number; tokensPerSec: number; bandwidth: number },
  ): void {
    recordWitnessMetadata(this.store, this.runId, this.clock(), step, client, m);
  }

  // --- parameter hashes (run-host/param-hashes.ts) ------------------------------------------------

  get paramHash(): SnapshotParamHash | undefined {
    return this.paramHashes.current;
  }

  /**
   * A client's ParamHash: recorded if core admits it for the latest epoch end, then judged by core's verdict.
   * An agreed hash becomes the run's advertised hash and the one checkpoints must match.
   */
  reportParamHash(
    client: string,
    p: ParamHash,
  ): { verdict: ParamHashVerdict; newlyMismatched: string[] } | ProtocolRefusal {
    return this.paramHashes.report(client, p);
  }

  /** Epoch ends with an agreed hash, oldest first: the only (epoch, step, hash) checkpoints may carry. */
  agreedEpochs(): AgreedEpoch[] {
    return this.paramHashes.agreedEpochs();
  }

  /** Every recorded epoch end with core's verdict over its reports, oldest first. */
  paramHashReport(): ParamHashReport[] {
    return this.paramHashes.reports();
  }
}
