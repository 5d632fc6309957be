// An in-process coordinator host: core's real state machine behind CoordinatorLink objects, for tests,
// benchmarks and single-process simulations. Like the relay it decides nothing itself: every message goes
// through core's protocol rules (admitResult, admitAnnounce, witnessEvent, warmupWitnessEvent,
// healthCheckEvent, admitParamHash, paramHashVerdict, admitCheckpoint) and core's tick, and refusals are
// thrown with their codes, as the relay sends them. Time is virtual: `advance(seconds)` ticks the
// coordinator, so tests run at CPU speed, not wall-clock.
import {
  admitAnnounce,
  admitCheckpoint,
  admitParamHash,
  admitResult,
  bytesToHex,
  coordinatorConfigOf,
  createCoordinator,
  decodeSignedResult,
  epochEndOf,
  healthCheckEvent,
  paramHashMismatch,
  paramHashVerdict,
  ProtocolRefusal,
  publicKeyOf,
  runResultSpec,
  tick,
  trainingResultBytesOf,
  verdictEvent,
  warmupWitnessEvent,
  witnessEvent,
  type AgreedEpoch,
  type Announce,
  type CoordinatorEvent,
  type CoordinatorState,
  type EpochEnd,
  type HealthCheck,
  type ResultSpec,
  type RunConfig,
  type SubmittedResult,
  type Verdict,
  type WitnessMessage,
} from '@meshtrain/core';
import { modelConfigForRun, parameterSpecs } from '@meshtrain/model';
import type { Checkpoint, CheckpointSource, CoordinatorLink } from '../interfaces.ts';

export interface HubLog {
  /** Coordinator errors and protocol refusals for messages clients sent. */
  refusals: { id: string; event: string; code: string; message: string }[];
  /** Per epoch-end step: client id → parameter hash (hex) it reported. */
  paramHashes: Map<number, Map<string, string>>;
  /** RoundEnded effects: whether each round reached witness quorum. */
  rounds: { step: number; witnesses: number; quorum: number; reached: boolean }[];
}

export interface LocalHubOptions {
  /** Run seed (hex, 32 bytes). */
  runSeedHex?: string;
  /**
   * The parameters results must fit (core's checkResultShape). Default: the run's model; null turns the
   * check off (tests of code that does not train a real model).
   */
  parameters?: ReadonlyArray<{ name: string; shape: readonly number[] }> | null;
}

interface LinkState {
  id: string;
  connected: boolean;
  stateListeners: ((s: CoordinatorState) => void)[];
  announceListeners: ((a: Announce) => void)[];
  resultListeners: ((frame: Uint8Array) => void)[];
  /** Test fault: this client never receives results (neither forwarded nor fetchable). */
  starved: boolean;
}

interface StoredResult extends SubmittedResult {
  frame: Uint8Array;
  announced: boolean;
}

function specFor(run: RunConfig, parameters: LocalHubOptions['parameters']): ResultSpec | null {
  if (parameters === null) return null;
  try {
    return runResultSpec(
      parameters ?? parameterSpecs(modelConfigForRun(run)),
      run.model.LLM.optimizer,
      run.config.verification_percent,
    );
  } catch {
    return null;
  }
}

function copyParams(ck: Checkpoint): Checkpoint {
  return { ...ck, params: new Map([...ck.params].map(([k, v]) => [k, Float32Array.from(v)])) };
}

export class LocalHub {
  state: CoordinatorState;
  now: number;
  readonly log: HubLog = { refusals: [], paramHashes: new Map(), rounds: [] };
  readonly run: RunConfig;
  readonly runId: string;
  readonly resultSpec: ResultSpec | null;
  private readonly links = new Map<string, LinkState>();
  private readonly results = new Map<string, StoredResult>();
  private readonly checkpointStore = new Map<number, Checkpoint>();
  /** Epoch ends the coordinator reached (newest last), with their reports and agreed hash. */
  private readonly ends: (EpochEnd & { reports: Map<string, string>; agreed: string | null })[] = [];

  constructor(run: RunConfig, runId: string, options: LocalHubOptions | string = {}) {
    const o = typeof options === 'string' ? { runSeedHex: options } : options;
    this.run = run;
    this.runId = runId;
    this.now = 1_000;
    this.resultSpec = specFor(run, o.parameters);
    this.state = createCoordinator({
      run_id: runId,
      run_seed: o.runSeedHex ?? '00'.repeat(32),
      config: coordinatorConfigOf(run),
      now: this.now,
    });
  }

  /** Feeds `event` from client `id` (or the timer); returns core's refusal, if any. */
  private apply(id: string, event: CoordinatorEvent): Error | null {
    const r = tick(this.state, event, this.now);
    for (const e of r.effects) {
      if (e.type === 'RoundEnded')
        this.log.rounds.push({
          step: e.step,
          witnesses: e.witnesses,
          quorum: e.quorum,
          reached: e.quorum_reached,
        });
      if (e.type === 'RunStateChanged' && e.to === 'Cooldown') {
        const end = epochEndOf(r.state);
        if (end) this.ends.push({ ...end, reports: new Map(), agreed: null });
        if (this.ends.length > 16) this.ends.shift();
      }
    }
    if (r.state !== this.state) {
      this.state = r.state;
      // Deliver asynchronously, as a socket would, so a client is never re-entered from its own send.
      const s = this.state;
      queueMicrotask(() => {
        for (const l of this.links.values()) if (l.connected) for (const f of l.stateListeners) f(s);
      });
    }
    if (r.error) this.refused(id, event.type, r.error);
    return r.error ?? null;
  }

  private refused(id: string, event: string, e: Error & { code: string }): void {
    this.log.refusals.push({ id, event, code: e.code, message: e.message });
  }

  /** Core's answer, or its refusal logged and thrown (what the relay replies with). */
  private must<T>(id: string, event: string, answer: T | ProtocolRefusal): T {
    if (answer instanceof ProtocolRefusal) {
      this.refused(id, event, answer);
      throw answer;
    }
    return answer;
  }

  /** Advance virtual time one second at a time, ticking the coordinator each second. */
  advance(seconds = 1): void {
    for (let i = 0; i < seconds; i++) {
      this.now += 1;
      this.apply('', { type: 'tick' });
    }
  }

  /** A coordinator session for the holder of `secretKey`; it joins immediately. */
  connect(secretKey: Uint8Array): CoordinatorLink {
    const id = bytesToHex(publicKeyOf(secretKey));
    const l: LinkState = {
      id,
      connected: true,
      stateListeners: [],
      announceListeners: [],
      resultListeners: [],
      starved: false,
    };
    this.links.set(id, l);
    const join = (): void => void this.apply(id, { type: 'join', id, p2p_id: `local-${id.slice(0, 8)}` });
    join();
    const throwIf = (err: Error | null) => {
      if (err) throw err;
    };
    return {
      clientId: id,
      onState: (f) => {
        l.stateListeners.push(f);
        const s = this.state;
        queueMicrotask(() => f(s));
      },
      onAnnounce: (f) => l.announceListeners.push(f),
      onResult: (f) => l.resultListeners.push(f),
      submitResult: async (frame, announce) => {
        this.submitResult(id, frame);
        this.announce(id, announce);
      },
      submitWitness: async (w: WitnessMessage) => throwIf(this.apply(id, witnessEvent(id, w))),
      submitWarmupWitness: async (epoch) =>
        throwIf(
          this.apply(
            id,
            this.must(id, 'warmup_witness', warmupWitnessEvent(this.state, id, { runId: this.runId, epoch })),
          ),
        ),
      submitVerdict: async (v: Verdict) =>
        throwIf(this.apply(id, this.must(id, 'verdict', verdictEvent(this.state, id, v)))),
      submitHealthCheck: async (h: HealthCheck) =>
        throwIf(this.apply(id, this.must(id, 'health_check', healthCheckEvent(this.state, id, h)))),
      reportParamHash: async (epoch, step, hash) =>
        this.reportParamHash(id, { runId: this.runId, epoch, step, hash }),
      fetchResult: async (commitment) =>
        l.starved ? null : (this.results.get(bytesToHex(commitment))?.frame ?? null),
      rejoin: async () => {
        this.apply(id, { type: 'leave', id });
        join();
      },
    };
  }

  private submitResult(id: string, frame: Uint8Array): void {
    const signed = decodeSignedResult(frame);
    const { event } = this.must(id, 'result', admitResult(this.state, id, signed, this.resultSpec));
    const err = this.apply(id, event);
    // The same result again is a client retry: nothing to do.
    if (err && (err as Error & { code: string }).code !== 'DuplicateResult') throw err;
    if (err) return;
    this.results.set(event.commitment, {
      sender: id,
      step: event.step,
      batch: event.batch,
      commitment: event.commitment,
      trainingResultBytes: trainingResultBytesOf(frame.length),
      frame,
      announced: false,
    });
  }

  private announce(id: string, announce: Announce): void {
    const stored = this.results.get(bytesToHex(announce.commitment));
    this.must(id, 'announce', admitAnnounce(this.state, id, announce, stored) ?? true);
    if (!stored || stored.announced) return;
    stored.announced = true;
    for (const other of this.links.values()) {
      if (other.id === id || !other.connected) continue;
      for (const f of other.announceListeners) queueMicrotask(() => f(announce));
      if (!other.starved) for (const f of other.resultListeners) queueMicrotask(() => f(stored.frame));
    }
  }

  private reportParamHash(
    id: string,
    p: { runId: string; epoch: number; step: number; hash: Uint8Array },
  ): void {
    const end = this.ends.at(-1) ?? null;
    this.must(id, 'param_hash', admitParamHash(this.runId, end, id, p) ?? true);
    const e = end as NonNullable<typeof end>;
    const hex = bytesToHex(p.hash);
    e.reports.set(id, hex);
    const m = this.log.paramHashes.get(e.step) ?? new Map<string, string>();
    m.set(id, hex);
    this.log.paramHashes.set(e.step, m);
    const verdict = paramHashVerdict(
      e,
      [...e.reports].map(([client, hash]) => ({ client, hash })),
    );
    e.agreed = verdict.agreed;
    this.must(id, 'param_hash', paramHashMismatch(e.epoch, verdict, hex) ?? true);
  }

  /** Epoch ends with an agreed parameter hash. */
  agreedEpochs(): AgreedEpoch[] {
    return this.ends.flatMap((e) =>
      e.agreed === null ? [] : [{ epoch: e.epoch, step: e.step, hash: e.agreed }],
    );
  }

  /** Simulates a crash: the client leaves and stops receiving states. */
  disconnect(id: string): void {
    const l = this.links.get(id);
    if (!l) return;
    l.connected = false;
    this.apply(id, { type: 'leave', id });
  }

  /** Test fault: hand one frame to one client only (e.g. an equivocating trainer's second result). */
  deliverTo(id: string, frame: Uint8Array): void {
    const l = this.links.get(id);
    if (l) for (const f of l.resultListeners) f(frame);
  }

  /** Test fault: result payloads stop reaching this client (announces still arrive). */
  starve(id: string, starved = true): void {
    const l = this.links.get(id);
    if (l) l.starved = starved;
  }

  /** A checkpoint store with the relay's rule: core's admitCheckpoint against the agreed epoch ends. */
  checkpoints(): CheckpointSource {
    return {
      load: async (step) => {
        const ck = this.checkpointStore.get(step);
        return ck ? copyParams(ck) : null;
      },
      has: async (step) => this.checkpointStore.has(step),
      upload: async (ck) => {
        const refused = admitCheckpoint(this.agreedEpochs(), {
          epoch: ck.epoch,
          step: ck.step,
          paramHash: bytesToHex(ck.paramHash),
        });
        if (refused) throw refused;
        this.checkpointStore.set(ck.step, copyParams(ck));
      },
    };
  }
}
