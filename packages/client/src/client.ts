// The client state machine (docs/protocol.md "Client state machine"), driven by the coordinator states the
// relay sends.
//
//   NotYetInitialized ─(Warmup, self in epoch)→ Initializing ─(model loaded)→ Warmup
//   Warmup ─RoundTrain→ Training ─RoundWitness→ Witness ─RoundTrain→ Training … ─Cooldown→ Cooldown ─→ Warmup
//
// Every round of height h: (1) apply the accepted results of round h−2
// (docs/protocol.md "The two-round apply lag"), in batch-id order, with packages/distro's exact integer
// aggregate + apply, so every replica stays bit-identical; (2) witnesses report trainers of round h−2 their
// peers did not see (health checks); (3) trainers fetch their batch, run the train step on a lookahead copy,
// DisTrO-compress, commit, sign and publish; (4) witnesses of round h submit blooms of the round h−1 results
// they verified. At every epoch end the client hashes its parameters.
//
// Divergence is never silent. A result is applied only if core's acceptedCommitments names it (a quorum of
// the next round's witnesses saw exactly that commitment). If an accepted payload cannot be fetched from the
// local store, peers or the relay, or a round needed for apply fell out of the coordinator's ring, the client
// stops contributing, rejoins and loads the next epoch's checkpoint (verified by its hash) instead of
// training on a copy that differs from everyone else's.
//
// One async driver processes states one at a time, always the newest: work (training, fetching) can take
// longer than a phase, and acting on a stale state is harmless because every action names its round.
import {
  acceptedCommitments,
  bytesToHex,
  coldStartFactor,
  currentRound,
  decodeSignedResult,
  decodeTrainingResult,
  frameCommitment,
  encodeSignedResult,
  encodeTrainingResult,
  hexToBytes,
  isHealthy,
  loadBloom,
  signAnnounce,
  learningRate,
  participantItem,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  BloomFilter,
  sha256Concat,
  signResult,
  verifyAnnounce,
  verifySignedResult,
  type Announce,
  type BatchId,
  type CoordinatorState,
  type HealthReport,
  type LrSchedule,
  type Round,
  type RunConfig,
  type TrainingResult,
} from '@meshtrain/core';
import {
  applyResults,
  quantize1bit,
  type DistroBackend,
  type DistroTensor,
  type TensorResult,
} from '@meshtrain/distro';
import { parameterHash, parameterOrder } from '@meshtrain/model';
import { fromWire, toWire } from './convert.ts';
import { isResidentFor } from './interfaces.ts';
import type {
  Checkpoint,
  CheckpointSource,
  CoordinatorLink,
  DataSource,
  ParameterMap,
  PeerNetwork,
  ResidentStepOutput,
  ResidentTrainingBackend,
  TrainingBackend,
} from './interfaces.ts';

/** The batch's rows in slices of at most `maxRows` (`n` rows each), as the backend runs them. */
function* microBatches(
  tokens: Int32Array,
  rows: number,
  maxRows: number,
): Generator<{ part: Int32Array; n: number }> {
  const width = tokens.length / rows;
  for (let r0 = 0; r0 < rows; r0 += maxRows) {
    const n = Math.min(maxRows, rows - r0);
    yield { part: tokens.subarray(r0 * width, (r0 + n) * width), n };
  }
}

/** A train step's mean loss and gradients (DisTrO tensors), and how to free them once compressed. */
interface Gradients {
  loss: number;
  grads: DistroTensor[];
  release(): void;
}

export type ClientPhase =
  | 'NotYetInitialized'
  | 'Initializing'
  | 'Warmup'
  | 'Training'
  | 'Witness'
  | 'Cooldown'
  | 'Resyncing'
  | 'Stopped';

export type ClientEvent =
  | { type: 'phase'; phase: ClientPhase; epoch: number; step: number }
  | { type: 'model'; source: 'init' | 'checkpoint' | 'kept'; step: number; hash: string; via?: string }
  | { type: 'applied'; step: number; height: number; results: number; skipped: number }
  | {
      type: 'trained';
      epoch: number;
      step: number;
      batch: BatchId;
      loss: number;
      lr: number;
      bytes: number;
      seconds: number;
    }
  | { type: 'witness'; step: number; results: number }
  | { type: 'healthCheck'; step: number; reported: number }
  | { type: 'paramHash'; epoch: number; step: number; hash: string }
  | { type: 'resync'; reason: string }
  | { type: 'warning'; message: string }
  | { type: 'error'; message: string };

export interface ClientOptions {
  run: RunConfig;
  runId: string;
  /** Ed25519 secret key (32 bytes); its public key must equal `link.clientId`. */
  secretKey: Uint8Array;
  link: CoordinatorLink;
  backend: TrainingBackend;
  /** DisTrO on the host (CPU reference) or a GPU device; its chunk must be the run's compression_chunk. */
  distro: DistroBackend;
  data: DataSource;
  /** Deterministic init for a run's first epoch: parameters from the run seed. */
  initParams: () => ParameterMap;
  checkpoints: CheckpointSource;
  peers?: PeerNetwork;
  /** Randomness for bloom salts (defaults to crypto.getRandomValues). */
  randomBytes?: (n: number) => Uint8Array;
  onEvent?: (e: ClientEvent) => void;
  /** How long to retry a missing accepted result before re-syncing (ms). */
  fetchPatienceMs?: number;
}

/** A verified result this client holds (its own or a peer's). */
interface HeldResult {
  commitment: Uint8Array;
  from: string;
  frame: Uint8Array;
  result: TrainingResult;
}

/** An announced (signature-checked) commitment, maybe not fetched yet. */
interface Candidate {
  commitment: string;
  from: string;
}

function batchKey(step: number, b: { start: number; end: number }): string {
  return `${step}:${b.start}-${b.end}`;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class ResyncNeeded extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResyncNeeded';
  }
}

export class Client {
  phase: ClientPhase = 'NotYetInitialized';
  readonly stats = {
    bytesSent: 0,
    bytesReceived: 0,
    bytesFromPeers: 0,
    resultsSent: 0,
    resultsApplied: 0,
    resyncs: 0,
  };
  lastLoss: number | null = null;

  private readonly o: ClientOptions;
  private readonly id: string;
  private readonly schedule: LrSchedule;
  private names: string[] = [];
  private params: DistroTensor[] = [];
  private delta: DistroTensor[] = [];
  private scratch: DistroTensor[] = [];
  /** `progress.step` at which `params` are the run's parameters at an epoch start (null: none loaded). */
  private paramsStep: number | null = null;
  /** Epoch key (epoch number + start step) the per-epoch bookkeeping below belongs to. */
  private epochKey = '';
  private appliedThrough = -1;
  private trainedHeight = -1;
  private healthCheckedHeight = -1;
  private witnessedSteps = new Set<number>();
  private warmupSent = false;
  private hashReported = false;
  private ownPrev: TensorResult[] | null = null;
  private trainerNonce = 0;
  private readonly held = new Map<string, HeldResult>();
  private readonly candidates = new Map<string, Candidate[]>();
  private readonly fetching = new Set<string>();
  private latest: CoordinatorState | null = null;
  private wake: (() => void) | null = null;
  private stopped = false;
  /** Set when the client found itself diverged; cleared once a checkpoint is loaded. */
  private desynced = false;

  constructor(options: ClientOptions) {
    this.o = options;
    this.id = options.link.clientId;
    this.schedule = (() => {
      const t = options.run.model.LLM.lr_schedule;
      if ('Constant' in t) return { kind: 'Constant' as const, ...t.Constant };
      if ('Linear' in t) return { kind: 'Linear' as const, ...t.Linear };
      if ('Cosine' in t) return { kind: 'Cosine' as const, ...t.Cosine };
      return { kind: 'WarmupStableDecay' as const, ...t.WarmupStableDecay };
    })();
    if (!('Distro' in options.run.model.LLM.optimizer))
      throw new Error('this client trains DisTrO runs only (optimizer.Distro)');
    if (options.distro.chunk !== this.distroConfig.compression_chunk)
      throw new Error(
        `DisTrO backend chunk ${options.distro.chunk} ≠ run compression_chunk ${this.distroConfig.compression_chunk}`,
      );
    options.link.onState((s) => {
      this.latest = s;
      this.wake?.();
    });
    options.link.onAnnounce((a) => this.onAnnounce(a, 'relay'));
    options.link.onResult?.((frame) => {
      if (this.accept(frame)) this.wake?.();
    });
    options.peers?.onAnnounce?.((a) => this.onAnnounce(a, 'peer'));
  }

  private get distroConfig() {
    const opt = this.o.run.model.LLM.optimizer;
    if (!('Distro' in opt)) throw new Error('not a DisTrO run');
    return opt.Distro;
  }

  private emit(e: ClientEvent): void {
    this.o.onEvent?.(e);
  }

  private setPhase(phase: ClientPhase, s: CoordinatorState | null): void {
    if (this.phase === phase) return;
    this.phase = phase;
    this.emit({ type: 'phase', phase, epoch: s?.progress.epoch ?? 0, step: s?.progress.step ?? 0 });
  }

  /** Runs until `stop()` or the run finishes. */
  async run(): Promise<void> {
    let seen: CoordinatorState | null = null;
    while (!this.stopped) {
      const s = this.latest;
      if (!s || s === seen) {
        await new Promise<void>((r) => {
          this.wake = r;
          // Re-check periodically: witnesses wait for results that arrive without a new state.
          setTimeout(r, 200);
        });
        this.wake = null;
        if (s && s === seen && !this.stopped) await this.poll(s);
        continue;
      }
      seen = s;
      try {
        await this.step(s);
      } catch (err) {
        if (err instanceof ResyncNeeded) await this.beginResync(err.message);
        else this.emit({ type: 'error', message: (err as Error).stack ?? String(err) });
      }
      if (s.run_state === 'Finished') {
        this.setPhase('Stopped', s);
        break;
      }
    }
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
  }

  /** Current parameters (host copies), in name order. */
  async parameters(): Promise<ParameterMap> {
    const out: ParameterMap = new Map();
    for (let i = 0; i < this.names.length; i++)
      out.set(this.names[i] as string, await this.o.distro.read(this.params[i] as DistroTensor));
    return out;
  }

  async parameterHash(): Promise<Uint8Array> {
    return parameterHash(await this.parameters());
  }

  // ---------------------------------------------------------------- per-state work

  private myClientIndex(s: CoordinatorState): number {
    return s.epoch.clients.findIndex((c) => c.id === this.id);
  }

  private inEpoch(s: CoordinatorState): boolean {
    const i = this.myClientIndex(s);
    return i >= 0 && s.epoch.clients[i]?.state === 'Healthy';
  }

  private resetEpoch(s: CoordinatorState): void {
    const key = `${s.progress.epoch}:${s.epoch.start_step}`;
    if (key === this.epochKey) return;
    this.epochKey = key;
    this.appliedThrough = -1;
    this.trainedHeight = -1;
    this.healthCheckedHeight = -1;
    this.witnessedSteps = new Set();
    this.warmupSent = false;
    this.hashReported = false;
    // Momentum and the pending residual carry over into the next epoch, as the parameters do.
    this.forgetBefore(s.epoch.start_step);
  }

  /**
   * Drops held results and candidates of steps before `step`. Not a blanket clear: announces for the new
   * epoch's first round may already be here when a busy client first looks at the new epoch.
   */
  private forgetBefore(step: number): void {
    for (const [k, h] of this.held) if (h.result.step < step) this.held.delete(k);
    for (const k of this.candidates.keys())
      if (Number(k.slice(0, k.indexOf(':'))) < step) this.candidates.delete(k);
  }

  private async step(s: CoordinatorState): Promise<void> {
    switch (s.run_state) {
      case 'Uninitialized':
      case 'WaitingForMembers':
      case 'Paused':
        if (this.phase !== 'NotYetInitialized' && this.phase !== 'Resyncing') this.setPhase('Warmup', s);
        return;
      case 'Finished':
        return;
      case 'Warmup':
        if (!this.inEpoch(s)) return;
        this.resetEpoch(s);
        await this.ensureModel(s);
        this.setPhase('Warmup', s);
        if (!this.warmupSent) {
          this.warmupSent = true;
          await this.o.link.submitWitness({
            step: s.progress.step,
            proof: { position: 0, index: this.myClientIndex(s), witness: false },
            participantBloom: BloomFilter.forItems(1, 0.5, new Uint8Array(0)).toData(),
            broadcastBloom: BloomFilter.forItems(1, 0.5, new Uint8Array(0)).toData(),
            broadcastMerkle: new Uint8Array(32),
          });
        }
        return;
      case 'RoundTrain':
      case 'RoundWitness':
        if (!this.inEpoch(s) || this.desynced) return;
        if (this.paramsStep !== s.epoch.start_step) return this.leaveEpoch(s);
        this.resetEpoch(s);
        await this.round(s);
        return;
      case 'Cooldown':
        if (!this.inEpoch(s) || this.desynced) return;
        this.resetEpoch(s);
        // Later snapshots of the same Cooldown (joins, leaves) find the epoch's end already handled; the
        // parameters then belong to the next epoch's start step.
        if (this.hashReported) return;
        if (this.paramsStep !== s.epoch.start_step) return this.leaveEpoch(s);
        await this.cooldown(s);
        return;
    }
  }

  /**
   * In the epoch's roster without its parameters (a restart inside the relay's reconnect grace keeps the
   * slot): a member that cannot train or witness would only cost the others a timeout, so leave now and
   * come back, with the checkpoint, in the next epoch.
   */
  private async leaveEpoch(s: CoordinatorState): Promise<void> {
    await this.beginResync(
      `in epoch ${s.progress.epoch} (started at step ${s.epoch.start_step}) without its parameters; rejoining for the next epoch`,
    );
  }

  /** Called while no new state arrived: witnesses may now have everything they wait for. */
  private async poll(s: CoordinatorState): Promise<void> {
    if ((s.run_state === 'RoundTrain' || s.run_state === 'RoundWitness') && !this.desynced)
      if (this.inEpoch(s) && this.paramsStep === s.epoch.start_step) await this.maybeWitness(s);
  }

  private async ensureModel(s: CoordinatorState): Promise<void> {
    if (this.paramsStep === s.progress.step && !this.desynced) {
      this.emit({ type: 'model', source: 'kept', step: s.progress.step, hash: '' });
      return;
    }
    this.setPhase('Initializing', s);
    let params: ParameterMap;
    let source: 'init' | 'checkpoint';
    let via: string | undefined;
    if (s.progress.step === 1 && s.progress.epoch === 0) {
      params = this.o.initParams();
      source = 'init';
    } else {
      const ck = await this.loadCheckpoint(s.progress.step);
      params = ck.params;
      source = 'checkpoint';
      via = ck.via;
    }
    this.installParams(params);
    this.paramsStep = s.progress.step;
    this.desynced = false;
    this.emit({
      type: 'model',
      source,
      step: s.progress.step,
      hash: bytesToHex(parameterHash(params)),
      ...(via ? { via } : {}),
    });
  }

  private async loadCheckpoint(step: number): Promise<Checkpoint> {
    // The epoch's clients upload at Cooldown; a joiner may ask before it lands, so retry for a while.
    for (let attempt = 0; ; attempt++) {
      const ck = await this.o.checkpoints.load(step).catch((e: unknown) => {
        this.emit({ type: 'warning', message: `checkpoint: ${(e as Error).message}` });
        return null;
      });
      if (ck && (ck.step === step || ck.rolledBackFrom === step)) {
        const actual = parameterHash(ck.params);
        if (bytesToHex(actual) === bytesToHex(ck.paramHash)) {
          if (ck.step !== step)
            this.emit({
              type: 'warning',
              message: `the parameters of step ${step} were lost with the last clients of their epoch; continuing from the checkpoint of step ${ck.step}`,
            });
          return ck;
        }
        this.emit({
          type: 'warning',
          message: `checkpoint for step ${step} hashes to ${bytesToHex(actual)}, not ${bytesToHex(ck.paramHash)}: refused`,
        });
      }
      if (attempt >= 60) throw new Error(`no verified checkpoint for step ${step} after ${attempt} tries`);
      await sleep(500);
    }
  }

  private installParams(params: ParameterMap): void {
    const d = this.o.distro;
    for (const t of [...this.params, ...this.delta, ...this.scratch]) d.release(t);
    this.names = parameterOrder(params.keys());
    this.params = [];
    this.delta = [];
    this.scratch = [];
    for (const n of this.names) {
      const p = params.get(n) as Float32Array;
      const shape = this.shapeOf(n, p.length);
      this.params.push(d.tensor(shape, Float32Array.from(p)));
      // Joiners get no optimizer state (docs/protocol.md "Joiners, checkpoints and cold start"): momentum
      // restarts at zero.
      this.delta.push(d.tensor(shape));
      this.scratch.push(d.tensor(shape));
    }
    this.ownPrev = null;
  }

  private shapes = new Map<string, number[]>();

  /** Shapes come from the backend's first use; set them with `setShapes` (the shell knows the model). */
  setShapes(shapes: ReadonlyMap<string, readonly number[]>): void {
    for (const [n, s] of shapes) this.shapes.set(n, [...s]);
  }

  private shapeOf(name: string, length: number): number[] {
    const s = this.shapes.get(name);
    if (!s) return [length];
    let n = 1;
    for (const x of s) n *= x;
    if (n !== length) throw new Error(`parameter ${name}: ${length} values for shape [${s.join(', ')}]`);
    return s;
  }

  private lr(step: number, s: CoordinatorState): number {
    const window: [number, number] | undefined = s.epoch.cold_start_epoch
      ? [s.epoch.start_step, s.epoch.start_step + s.config.cold_start_warmup_steps]
      : undefined;
    return learningRate(this.schedule, Math.max(0, step)) * coldStartFactor(step, window);
  }

  private async round(s: CoordinatorState): Promise<void> {
    const round = currentRound(s);
    if (!round) return;
    this.setPhase(s.run_state === 'RoundTrain' ? 'Training' : 'Witness', s);
    if (round.height > this.trainedHeight) {
      // Apply everything up to h−2 first: training reads the parameters.
      await this.applyThrough(s, round.height - 2, round);
      // Applied rounds' results are never needed again (witnessing reads round h−1's); free them.
      this.forgetBefore(round.step - 3);
      await this.healthCheck(s, round);
      this.trainedHeight = round.height;
      if (s.run_state === 'RoundTrain') await this.train(s, round);
    }
    await this.maybeWitness(s);
  }

  /** Applies rounds appliedThrough+1 .. `height` (each with the lr of the round applying it). */
  private async applyThrough(s: CoordinatorState, height: number, applying: Round): Promise<void> {
    for (let h = this.appliedThrough + 1; h <= height; h++) {
      const r = roundAtHeight(s, h);
      if (!r) throw new ResyncNeeded(`round ${h} left the coordinator's ring before this client applied it`);
      const accepted = acceptedCommitments(s, h, (batch, clientIndex) =>
        this.candidatesFor(r.step, batch, s.epoch.clients[clientIndex]?.id ?? ''),
      );
      if (!accepted) throw new ResyncNeeded(`round ${h} cannot be judged: its witnesses are gone`);
      // Batch-id order: the same on every peer, whatever order results arrived in.
      const ordered = accepted
        .filter((a) => a.commitment !== null)
        .sort((a, b) => a.batch.start - b.batch.start);
      const results: TensorResult[][] = [];
      for (const a of ordered) {
        const held = await this.obtain(a.commitment as Uint8Array, s.epoch.clients[a.client_index]?.id ?? '');
        const assignee = s.epoch.clients[a.client_index]?.id ?? '';
        if (
          held &&
          (held.from !== assignee ||
            held.result.step !== r.step ||
            held.result.batch.start !== a.batch.start ||
            held.result.batch.end !== a.batch.end)
        )
          throw new ResyncNeeded(
            `accepted commitment of step ${r.step} names a result for another batch or sender`,
          );
        if (!held)
          throw new ResyncNeeded(
            `accepted result ${bytesToHex(a.commitment as Uint8Array).slice(0, 16)}… of step ${r.step} could not be fetched`,
          );
        results.push(held.result.tensors.map(fromWire));
      }
      applyResults(this.o.distro, this.params, results, {
        lr: this.lr(applying.step, s),
        weightDecay: this.distroConfig.weight_decay ?? 0,
      });
      await this.o.distro.finish();
      this.appliedThrough = h;
      this.stats.resultsApplied += results.length;
      this.emit({
        type: 'applied',
        step: r.step,
        height: h,
        results: results.length,
        skipped: accepted.length - ordered.length,
      });
    }
  }

  private candidatesFor(step: number, batch: BatchId, assignee: string): Uint8Array[] {
    const list = this.candidates.get(batchKey(step, batch)) ?? [];
    return list.filter((c) => c.from === assignee).map((c) => hexToBytes(c.commitment));
  }

  /** A verified result by commitment: held, else from peers, else from the relay, retried for a while. */
  private async obtain(commitment: Uint8Array, from: string): Promise<HeldResult | null> {
    const key = bytesToHex(commitment);
    const deadline = Date.now() + (this.o.fetchPatienceMs ?? 10_000);
    for (;;) {
      const have = this.held.get(key);
      if (have) return have;
      const got = await this.fetchOnce(commitment, from);
      if (got) return got;
      if (Date.now() >= deadline) return null;
      await sleep(250);
    }
  }

  /**
   * One attempt: peers first (a TrainingResult frame addressed by its commitment; `from` is the trainer the
   * signed announce or accepted candidate names), then the relay's stored SignedResult.
   */
  private async fetchOnce(commitment: Uint8Array, from: string): Promise<HeldResult | null> {
    const p2p = await this.o.peers?.fetch(commitment, [from]).catch(() => null);
    if (p2p) {
      const got = this.acceptTrainingFrame(p2p, commitment, from);
      if (got) {
        this.stats.bytesFromPeers += p2p.length;
        return got;
      }
    }
    const frame = await this.o.link.fetchResult(commitment).catch(() => null);
    return frame ? this.accept(frame, commitment) : null;
  }

  /** A TrainingResult frame fetched by commitment: kept if it hashes to `commitment`. */
  private acceptTrainingFrame(frame: Uint8Array, commitment: Uint8Array, from: string): HeldResult | null {
    try {
      if (bytesToHex(frameCommitment(frame)) !== bytesToHex(commitment)) return null;
      const result = decodeTrainingResult(frame);
      if (result.runId !== this.o.runId) return null;
      const held: HeldResult = { commitment, from, frame, result };
      this.held.set(bytesToHex(commitment), held);
      this.addCandidate(result.step, result.batch, bytesToHex(commitment), from);
      this.stats.bytesReceived += frame.length;
      return held;
    } catch {
      return null;
    }
  }

  /** Verifies a SignedResult frame and keeps it; null if it is not what `expected` commits to. */
  private accept(frame: Uint8Array, expected?: Uint8Array): HeldResult | null {
    try {
      const signed = decodeSignedResult(frame);
      const commitment = verifySignedResult(signed.envelope, signed.result);
      if (expected && bytesToHex(commitment) !== bytesToHex(expected)) return null;
      if (signed.result.runId !== this.o.runId) return null;
      const held: HeldResult = {
        commitment,
        from: bytesToHex(signed.envelope.from),
        frame,
        result: signed.result,
      };
      this.held.set(bytesToHex(commitment), held);
      this.addCandidate(signed.result.step, signed.result.batch, bytesToHex(commitment), held.from);
      this.stats.bytesReceived += frame.length;
      return held;
    } catch {
      return null;
    }
  }

  private addCandidate(step: number, batch: BatchId, commitment: string, from: string): void {
    const key = batchKey(step, batch);
    const list = this.candidates.get(key) ?? [];
    if (!list.some((c) => c.commitment === commitment)) list.push({ commitment, from });
    this.candidates.set(key, list);
  }

  /** An announcement: record the candidate and fetch its payload in the background. */
  private onAnnounce(a: Announce, via: 'relay' | 'peer'): void {
    try {
      verifyAnnounce(a);
    } catch {
      this.emit({ type: 'warning', message: `dropped an announce with a bad signature (via ${via})` });
      return;
    }
    if (a.runId !== this.o.runId) return;
    const from = bytesToHex(a.from);
    if (from === this.id) return;
    const commitment = bytesToHex(a.commitment);
    this.addCandidate(a.step, a.batch, commitment, from);
    if (this.held.has(commitment) || this.fetching.has(commitment)) return;
    this.fetching.add(commitment);
    void (async () => {
      for (let attempt = 0; attempt < 4 && !this.held.has(commitment); attempt++) {
        if (await this.fetchOnce(a.commitment, from)) break;
        await sleep(250 * 2 ** attempt);
      }
      this.fetching.delete(commitment);
      this.wake?.();
    })();
  }

  private async train(s: CoordinatorState, round: Round): Promise<void> {
    if (!round.training) return;
    const mine = roundAssignments(s, round).find((a) => a.id === this.id);
    if (!mine) return;
    const started = Date.now();
    const d = this.o.distro;
    const cfg = this.distroConfig;
    const lr = this.lr(round.step, s);
    const prevLr = this.lr(round.step - 1, s);
    if (s.epoch.cold_start_epoch && round.height === 0) for (const t of this.delta) d.scale(t, 0);

    const rows = mine.batch.end - mine.batch.start + 1;
    const tokens = await this.o.data.samples(mine.batch.start, mine.batch.end);

    const { loss, grads, release } = isResidentFor(this.o.backend, d)
      ? await this.residentGradients(this.o.backend, tokens, rows, prevLr)
      : await this.hostGradients(tokens, rows, prevLr);
    if (!Number.isFinite(loss)) {
      release();
      throw new Error(`step ${round.step}: loss is ${loss}`);
    }

    const own: TensorResult[] = [];
    try {
      // Clip by global norm (docs/protocol.md "Training step").
      const clip = cfg.clip_grad_norm ?? 0;
      if (clip > 0) {
        let sq = 0;
        for (const g of grads) sq += await d.sumOfSquares(g);
        const norm = Math.sqrt(sq);
        if (norm > clip) for (const g of grads) d.scale(g, clip / (norm + 1e-6));
      }

      // generate (B5): residual of the previous own result (one step late, as Psyche), momentum, compress.
      // Weight decay is not applied here: it is part of the exact apply every replica runs.
      for (let i = 0; i < this.names.length; i++) {
        const delta = this.delta[i] as DistroTensor;
        if (this.ownPrev) d.subtractResidual(delta, this.ownPrev[i] as TensorResult);
        d.momentum(delta, grads[i] as DistroTensor, cfg.compression_decay, lr);
        own.push(await d.compress(delta, cfg.compression_topk));
      }
    } finally {
      release();
    }
    // The unquantised result is what the residual subtracts (docs/protocol.md "Top-k and 1-bit signs").
    this.ownPrev = own;
    const sent = cfg.quantize_1bit ? own.map(quantize1bit) : own;

    this.trainerNonce++;
    const result: TrainingResult = {
      runId: this.o.runId,
      step: round.step,
      batch: { start: mine.batch.start, end: mine.batch.end },
      trainerNonce: this.trainerNonce,
      tensors: sent.map(toWire),
    };
    const envelope = signResult(this.o.secretKey, result);
    const frame = encodeSignedResult({ envelope, result });
    const commitment = envelope.commitment;
    const key = bytesToHex(commitment);
    this.held.set(key, { commitment, from: this.id, frame, result });
    this.addCandidate(round.step, result.batch, key, this.id);
    const announce = signAnnounce(this.o.secretKey, {
      runId: result.runId,
      step: result.step,
      batch: result.batch,
      commitment,
      // The size of the TrainingResult frame the commitment covers (what P2P blob fetches return).
      size: encodeTrainingResult(result).length,
    });
    // Peers first: the relay forwards the announce at once, and a peer asked before the blob exists would
    // answer "not found" and cost the asker a fallback round trip.
    await this.o.peers?.publish(announce, frame).catch((e: unknown) => {
      this.emit({ type: 'warning', message: `p2p publish failed (relay has it): ${(e as Error).message}` });
    });
    await this.o.link.submitResult(frame, announce);
    this.stats.bytesSent += frame.length;
    this.stats.resultsSent++;
    this.lastLoss = loss;
    this.emit({
      type: 'trained',
      epoch: s.progress.epoch,
      step: round.step,
      batch: mine.batch,
      loss,
      lr,
      bytes: frame.length,
      seconds: (Date.now() - started) / 1000,
    });
  }

  /**
   * Lookahead (docs/protocol.md "Training step"): the step trains on params − prev_lr·sign(delta), computed
   * into a scratch copy so nothing has to be undone afterwards (the in-place undo is not exact in floating
   * point).
   */
  private lookahead(prevLr: number): void {
    for (let i = 0; i < this.names.length; i++)
      this.o.distro.signStep(
        this.scratch[i] as DistroTensor,
        this.params[i] as DistroTensor,
        this.delta[i] as DistroTensor,
        prevLr,
      );
  }

  /** Gradients through host copies: the lookahead parameters are read back, the gradients uploaded. */
  private async hostGradients(tokens: Int32Array, rows: number, prevLr: number): Promise<Gradients> {
    const d = this.o.distro;
    const backend = this.o.backend;
    this.lookahead(prevLr);
    const look: ParameterMap = new Map();
    for (let i = 0; i < this.names.length; i++)
      look.set(this.names[i] as string, await d.read(this.scratch[i] as DistroTensor));
    await backend.loadParams(look);
    // Micro-batches: gradients are means over their rows, so accumulate weighted by row count.
    let loss = 0;
    const sums = new Map<string, Float32Array>();
    for (const { part, n } of microBatches(tokens, rows, backend.maxRows)) {
      const out = await backend.trainStep(part, n);
      loss += (out.loss * n) / rows;
      for (const name of this.names) {
        const g = out.grads.get(name);
        if (!g) throw new Error(`backend returned no gradient for ${name}`);
        let acc = sums.get(name);
        if (!acc) sums.set(name, (acc = new Float32Array(g.length)));
        for (let j = 0; j < g.length; j++) acc[j]! += (g[j] as number) * (n / rows);
      }
    }
    const grads = this.names.map((n, i) => d.tensor((this.params[i] as DistroTensor).shape, sums.get(n)));
    return { loss, grads, release: () => grads.forEach((g) => d.release(g)) };
  }

  /**
   * Gradients without host copies: the backend reads the lookahead parameters from the DisTrO tensors and
   * returns gradients as DisTrO tensors on the same device. One micro-batch hands its gradients over as they
   * are; several are summed on the device (weighted by rows, as above).
   */
  private async residentGradients(
    backend: ResidentTrainingBackend,
    tokens: Int32Array,
    rows: number,
    prevLr: number,
  ): Promise<Gradients> {
    const d = this.o.distro;
    this.lookahead(prevLr);
    await backend.loadParamTensors(new Map(this.names.map((n, i) => [n, this.scratch[i] as DistroTensor])));
    const pick = (out: ResidentStepOutput, name: string): DistroTensor => {
      const g = out.grads.get(name);
      if (!g) throw new Error(`backend returned no gradient for ${name}`);
      return g;
    };
    if (rows <= backend.maxRows) {
      const out = await backend.trainStepResident(tokens, rows);
      try {
        return { loss: out.loss, grads: this.names.map((n) => pick(out, n)), release: () => out.release() };
      } catch (e) {
        out.release();
        throw e;
      }
    }
    const sums = this.params.map((p) => d.tensor(p.shape));
    const release = () => sums.forEach((g) => d.release(g));
    let loss = 0;
    try {
      for (const { part, n } of microBatches(tokens, rows, backend.maxRows)) {
        const out = await backend.trainStepResident(part, n);
        try {
          loss += (out.loss * n) / rows;
          // momentum with decay 1 is acc + w·g: the accumulation, in the same kernel.
          this.names.forEach((name, i) => d.momentum(sums[i] as DistroTensor, pick(out, name), 1, n / rows));
          // The sums read the gradients in queue order before the backend's next step can reuse the buffers.
        } finally {
          out.release();
        }
      }
    } catch (e) {
      release();
      throw e;
    }
    return { loss, grads: sums, release };
  }

  /** Verified results this client holds for a round, first per batch (the one witnesses vote for). */
  private verifiedFor(s: CoordinatorState, round: Round): { items: HeldResult[]; complete: boolean } {
    const items: HeldResult[] = [];
    let complete = true;
    for (const a of roundAssignments(s, round)) {
      const list = this.candidates.get(batchKey(round.step, a.batch)) ?? [];
      const got = list
        .filter((c) => c.from === a.id)
        .map((c) => this.held.get(c.commitment))
        .find((h) => h !== undefined);
      if (got) items.push(got);
      else if (s.epoch.clients[a.client_index]?.state === 'Healthy') complete = false;
    }
    return { items, complete };
  }

  /**
   * Witness duty for the current round h: blooms of round h−1's verified results. Submitted as soon as
   * they are complete and this round's trainers have published (so an early quorum never cuts training
   * short), or when RoundWitness starts, whatever arrived by then.
   */
  private async maybeWitness(s: CoordinatorState): Promise<void> {
    const round = currentRound(s);
    if (!round || this.witnessedSteps.has(round.step)) return;
    const index = round.roster.indexOf(this.myClientIndex(s));
    if (index < 0 || !roundSelection(round).isWitness(index)) return;
    const prev = roundAtHeight(s, round.height - 1);
    const prevSet = prev ? this.verifiedFor(s, prev) : { items: [], complete: true };
    const curSet = this.verifiedFor(s, round);
    if (
      s.run_state === 'RoundTrain' &&
      !(prevSet.complete && curSet.complete && this.trainedHeight >= round.height)
    )
      return;
    this.witnessedSteps.add(round.step);
    const random = this.o.randomBytes ?? ((n: number) => crypto.getRandomValues(new Uint8Array(n)));
    const fpr = s.config.bloom_false_positive_rate;
    const expected = Math.max(round.roster.length, 1);
    const participant = BloomFilter.forItems(expected, fpr, random(16));
    const broadcast = BloomFilter.forItems(expected, fpr, random(16));
    for (const h of prevSet.items) {
      participant.add(participantItem(hexToBytes(h.from)));
      broadcast.add(h.commitment);
    }
    // Informational (docs/protocol.md "Witnesses and quorum"): a hash over the commitments in batch order.
    const merkle = sha256Concat(...prevSet.items.map((h) => h.commitment));
    await this.o.link.submitWitness({
      step: round.step,
      proof: roundSelection(round).witnessProof(index),
      participantBloom: participant.toData(),
      broadcastBloom: broadcast.toData(),
      broadcastMerkle: merkle,
      ...(this.lastLoss !== null ? { metadata: { loss: this.lastLoss, tokensPerSec: 0, bandwidth: 0 } } : {}),
    });
    this.emit({ type: 'witness', step: round.step, results: prevSet.items.length });
  }

  /** Witnesses of round h report round h−2 trainers whose results round h−1's witnesses did not see. */
  private async healthCheck(s: CoordinatorState, round: Round): Promise<void> {
    if (round.height < 2 || this.healthCheckedHeight >= round.height) return;
    this.healthCheckedHeight = round.height;
    const index = round.roster.indexOf(this.myClientIndex(s));
    if (index < 0 || !roundSelection(round).isWitness(index)) return;
    const judged = roundAtHeight(s, round.height - 2);
    const attesting = roundAtHeight(s, round.height - 1);
    if (!judged || !attesting) return;
    const blooms = attesting.witnesses.flatMap((w) =>
      w.participant_bloom ? [loadBloom(w.participant_bloom)] : [],
    );
    const reports: HealthReport[] = [];
    for (const a of roundAssignments(s, judged)) {
      if (s.epoch.clients[a.client_index]?.state !== 'Healthy') continue;
      if (isHealthy(participantItem(hexToBytes(a.id)), blooms, attesting.witness_count)) continue;
      reports.push({
        clientIndex: a.client_index,
        committeeProof: roundSelection(judged).committeeProof(a.index),
      });
    }
    if (reports.length === 0) return;
    await this.o.link.submitHealthCheck({ step: round.step, reports }).catch((e: unknown) => {
      this.emit({ type: 'warning', message: `health check refused: ${(e as Error).message}` });
    });
    this.emit({ type: 'healthCheck', step: round.step, reported: reports.length });
  }

  private async cooldown(s: CoordinatorState): Promise<void> {
    this.setPhase('Cooldown', s);
    if (this.hashReported) return;
    const last = currentRound(s);
    // Results of the last two rounds are never applied (drain rounds, or the data rewinds for them).
    if (last) await this.applyThrough(s, last.height - 2, last);
    this.hashReported = true;
    const params = await this.parameters();
    const hash = parameterHash(params);
    this.paramsStep = s.progress.step;
    this.emit({ type: 'paramHash', epoch: s.progress.epoch, step: s.progress.step, hash: bytesToHex(hash) });
    try {
      await this.o.link.reportParamHash(s.progress.epoch, s.progress.step, hash);
    } catch (e) {
      // The relay compares hashes; being in the minority means this replica diverged.
      if (/param_hash_mismatch/.test((e as Error).message)) throw new ResyncNeeded((e as Error).message);
      this.emit({ type: 'warning', message: `parameter hash report failed: ${(e as Error).message}` });
    }
    const ck: Checkpoint = { step: s.progress.step, epoch: s.progress.epoch, paramHash: hash, params };
    await this.o.peers?.shareCheckpoint?.(ck).catch(() => {});
    // One uploader per epoch: the first Healthy client of the epoch.
    const first = s.epoch.clients.find((c) => c.state === 'Healthy');
    if (first?.id === this.id && this.o.checkpoints.upload) void this.upload(ck);
  }

  /** In the background: the relay keeps an upload only once the epoch's majority hash exists. */
  private async upload(ck: Checkpoint): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.o.checkpoints.upload?.(ck);
        return;
      } catch (e) {
        if (attempt >= 10) {
          this.emit({ type: 'warning', message: `checkpoint upload failed: ${(e as Error).message}` });
          return;
        }
        await sleep(500 * attempt);
      }
    }
  }

  private async beginResync(reason: string): Promise<void> {
    this.desynced = true;
    this.paramsStep = null;
    this.stats.resyncs++;
    this.setPhase('Resyncing', this.latest);
    this.emit({ type: 'resync', reason });
    await this.o.link.rejoin(reason).catch((e: unknown) => {
      this.emit({ type: 'error', message: `rejoin failed: ${(e as Error).message}` });
    });
  }
}
