// The client state machine (docs/protocol.md "Client state machine"), driven by the coordinator states the
// relay sends.
//
//   NotYetInitialized ─(Warmup, self in epoch)→ Initializing ─(model loaded)→ Warmup
//   Warmup ─RoundTrain→ Training ─RoundWitness→ Witness ─RoundTrain→ Training … ─Cooldown→ Cooldown ─→ Warmup
//
// Every round of height h: (0) verifiers check the sampled results of round h−1 (docs/protocol.md
// "Verification of work") on the parameters those trainers trained on; (1) apply the accepted results of
// round h−2 (docs/protocol.md "The two-round apply lag"), in batch-id order, with packages/distro's exact
// integer aggregate + apply, so every replica stays bit-identical — rebuilding first without a cheat confirmed
// since; (2) witnesses report trainers of round h−2 whose results did not get through (health checks);
// (3) trainers fetch their batch, run the train step (on a lookahead copy unless the run verifies),
// DisTrO-compress, commit, sign and publish; (4) witnesses of round h attest the round h−1 results they
// verified (one bit per result slot). At every epoch end the client hashes its parameters.
//
// Divergence is never silent. A result is applied only if core's acceptedCommitments names it (a quorum of
// the next round's witnesses saw exactly that commitment). If an accepted payload cannot be fetched from the
// local store, peers or the relay, or a round needed for apply fell out of the coordinator's ring, the client
// stops contributing, rejoins and loads the next epoch's checkpoint (verified by its hash) instead of
// training on a copy that differs from everyone else's.
//
// One async driver processes states one at a time, always the newest: work (training, fetching) can take
// longer than a phase, and acting on a stale state is harmless because every action names its round.
//
// This file is the dispatcher: it takes in states, announces and results, runs the driver and hands each state
// to its phase (client/warmup.ts, train.ts, witness.ts, cooldown.ts; the apply step in client/apply.ts).
import {
  bytesToHex,
  currentRound,
  hexToBytes,
  roundAdmitted,
  roundAssignments,
  runLrSchedule,
  verifyAnnounce,
  type Announce,
  type CoordinatorState,
} from '@meshtrain/core';
import type { ParameterMap } from './interfaces.ts';
import { applyThrough, appliesAtOnce, settleThrough } from './client/apply.ts';
import { EpochProgress, isHealthyMember, type ClientContext } from './client/context.ts';
import { CooldownPhase } from './client/cooldown.ts';
import { POLL_INTERVAL_MS } from './client/defaults.ts';
import { messageOf, ResyncNeeded } from './client/errors.ts';
import { clientOptimizerOf } from './client/optimizer.ts';
import { Replica } from './client/replica.ts';
import { ResultFetcher } from './client/result-fetcher.ts';
import { ResultsStore } from './client/results-store.ts';
import { ThroughputMeter } from './client/throughput.ts';
import { TrainPhase } from './client/train.ts';
import type { ClientOptions, ClientPhase, ClientStats } from './client/types.ts';
import { WarmupPhase } from './client/warmup.ts';
import { VerifyPhase } from './client/verify.ts';
import { WitnessPhase } from './client/witness.ts';

export type { ClientEvent, ClientOptions, ClientPhase, ClientStats } from './client/types.ts';
export { PARAM_HASH_MISMATCH, ResyncNeeded } from './client/errors.ts';

const realSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Client {
  phase: ClientPhase = 'NotYetInitialized';
  readonly stats: ClientStats = {
    bytesSent: 0,
    bytesReceived: 0,
    bytesFromPeers: 0,
    resultsSent: 0,
    resultsApplied: 0,
    resyncs: 0,
  };

  private readonly ctx: ClientContext;
  private readonly warmup: WarmupPhase;
  private readonly trainer: TrainPhase;
  private readonly witness: WitnessPhase;
  private readonly cooldown: CooldownPhase;
  private readonly verifier: VerifyPhase;
  private epoch = new EpochProgress('');
  private latest: CoordinatorState | null = null;
  private wake: (() => void) | null = null;
  private stopped = false;
  /** The epoch this client last joined again for (registerAgain). */
  private registeredForEpoch = -1;
  /** Admitted records already turned into prefetches (a round's record is a new array after each admission). */
  private readonly seenAdmitted = new WeakSet<readonly (string | null)[]>();
  /** Commitments (hex) prefetched because the state admitted them, by round step. */
  private readonly prefetchedAdmitted = new Map<number, Set<string>>();

  constructor(options: ClientOptions) {
    const optimizer = clientOptimizerOf(options.run, options.distro);
    const now = options.now ?? (() => Date.now());
    const sleep = options.sleep ?? realSleep;
    const results = new ResultsStore();
    const fetcher = new ResultFetcher({
      runId: options.runId,
      store: results,
      link: options.link,
      peers: options.peers,
      stats: this.stats,
      now,
      sleep,
      timings: options.fetchPatienceMs !== undefined ? { patienceMs: options.fetchPatienceMs } : {},
      onSettled: () => this.wake?.(),
    });
    this.ctx = {
      o: options,
      id: options.link.clientId,
      optimizer,
      schedule: runLrSchedule(options.run),
      now,
      sleep,
      stats: this.stats,
      replica: new Replica(options.distro, { momentum: optimizer.kind === 'distro' }),
      results,
      fetcher,
      meter: new ThroughputMeter(now()),
      emit: (e) => options.onEvent?.(e),
      setPhase: (phase, s) => this.setPhase(phase, s),
      latest: () => this.latest,
    };
    this.warmup = new WarmupPhase(this.ctx);
    this.trainer = new TrainPhase(this.ctx);
    this.witness = new WitnessPhase(this.ctx, () => this.trainer.lastLoss);
    this.cooldown = new CooldownPhase(this.ctx);
    this.verifier = new VerifyPhase(this.ctx);

    options.link.onState((s) => {
      this.latest = s;
      this.prefetchAdmitted(s);
      this.wake?.();
    });
    options.link.onAnnounce((a) => this.onAnnounce(a, 'relay'));
    options.link.onResult?.((frame) => {
      if (fetcher.acceptSigned(frame)) this.wake?.();
    });
    options.peers?.onAnnounce?.((a) => this.onAnnounce(a, 'peer'));
  }

  /** The loss of this client's last train step (null before the first). */
  get lastLoss(): number | null {
    return this.trainer.lastLoss;
  }

  /**
   * Runs until `stop()` or the run finishes, then until its background checkpoint uploads ended (see
   * CooldownPhase.end), so that nothing of the client is left running when it resolves.
   */
  async run(): Promise<void> {
    let seen: CoordinatorState | null = null;
    while (!this.stopped) {
      const s = this.latest;
      if (!s || s === seen) {
        await this.idle();
        if (s && s === seen && !this.stopped) await this.guarded(() => this.poll(s));
        continue;
      }
      seen = s;
      await this.guarded(() => this.step(s));
      if (s.run_state === 'Finished') {
        this.setPhase('Stopped', s);
        break;
      }
    }
    this.cooldown.end(this.stopped ? 'stopped' : 'finished');
    await this.cooldown.settled();
  }

  stop(): void {
    this.stopped = true;
    this.cooldown.end('stopped');
    this.wake?.();
  }

  /** Current parameters (host copies), in name order. */
  parameters(): Promise<ParameterMap> {
    return this.ctx.replica.read();
  }

  parameterHash(): Promise<Uint8Array> {
    return this.ctx.replica.hash();
  }

  /** Shapes come from the backend's first use; set them with `setShapes` (the shell knows the model). */
  setShapes(shapes: ReadonlyMap<string, readonly number[]>): void {
    this.ctx.replica.setShapes(shapes);
  }

  private setPhase(phase: ClientPhase, s: CoordinatorState | null): void {
    if (this.phase === phase) return;
    this.phase = phase;
    this.ctx.emit({ type: 'phase', phase, epoch: s?.progress.epoch ?? 0, step: s?.progress.step ?? 0 });
  }

  /** Waits for a new state, a new result, `stop()`, or the poll interval, whichever comes first. */
  private async idle(): Promise<void> {
    await new Promise<void>((r) => {
      this.wake = r;
      // Re-check periodically: witnesses wait for results that arrive without a new state.
      void this.ctx.sleep(POLL_INTERVAL_MS).then(r);
    });
    this.wake = null;
  }

  /**
   * Runs one piece of work; a divergence starts a re-sync, any other failure is reported. Work that fails
   * after `stop()` is not reported: shells close the link and release the backend with the stop, so what was
   * in flight fails because it was asked to end.
   */
  private async guarded(work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (err) {
      if (this.stopped) return;
      if (err instanceof ResyncNeeded) await this.beginResync(err.message);
      else this.ctx.emit({ type: 'error', message: (err as Error).stack ?? String(err) });
    }
  }

  /** The member may act in the state's epoch: Healthy in it, and not diverged. */
  private contributing(s: CoordinatorState): boolean {
    return isHealthyMember(s, this.ctx.id) && !this.ctx.replica.diverged;
  }

  private async step(s: CoordinatorState): Promise<void> {
    const { replica } = this.ctx;
    switch (s.run_state) {
      case 'WaitingForMembers':
        await this.registerAgain(s);
        if (this.phase !== 'NotYetInitialized' && this.phase !== 'Resyncing') this.setPhase('Warmup', s);
        return;
      case 'Uninitialized':
      case 'Paused':
        if (this.phase !== 'NotYetInitialized' && this.phase !== 'Resyncing') this.setPhase('Warmup', s);
        return;
      case 'Finished':
        return;
      case 'Warmup':
        if (!isHealthyMember(s, this.ctx.id)) return;
        this.enterEpoch(s);
        return this.warmup.run(s, this.epoch);
      case 'RoundTrain':
      case 'RoundWitness':
        if (!this.contributing(s)) return;
        if (!replica.holdsEpochStart(s.epoch.start_step)) return this.leaveEpoch(s);
        this.enterEpoch(s);
        return this.round(s);
      case 'Cooldown':
        if (!this.contributing(s)) return;
        this.enterEpoch(s);
        // Later snapshots of the same Cooldown (joins, leaves) find the epoch's end already handled; the
        // parameters then belong to the next epoch's start step.
        if (this.epoch.hashReported) return;
        if (!replica.holdsEpochStart(s.epoch.start_step)) return this.leaveEpoch(s);
        return this.cooldown.run(s, this.epoch);
    }
  }

  /**
   * A client the last epoch dropped (a silent witness in a round that missed quorum, or accused by a witness
   * quorum) is no longer a member: while the run waits for members it joins again, once per epoch, as
   * Psyche's clients re-join at every WaitingForMembers. An ejected client is banned and does not try.
   */
  private async registerAgain(s: CoordinatorState): Promise<void> {
    const id = this.ctx.id;
    if (s.members.some((m) => m.id === id) || s.ejected.includes(id)) return;
    if (this.registeredForEpoch === s.progress.epoch) return;
    this.registeredForEpoch = s.progress.epoch;
    this.ctx.emit({ type: 'warning', message: `not a member of epoch ${s.progress.epoch}: joining again` });
    await this.ctx.o.link.rejoin('not a member after the last epoch').catch((e: unknown) => {
      this.ctx.emit({ type: 'error', message: `rejoin failed: ${messageOf(e)}` });
    });
  }

  /** Starts the bookkeeping of the state's epoch unless it is the current one. */
  private enterEpoch(s: CoordinatorState): void {
    const key = EpochProgress.keyOf(s);
    if (key === this.epoch.key) return;
    this.epoch = new EpochProgress(key);
    // Momentum and the pending residual carry over into the next epoch, as the parameters do.
    this.ctx.results.forgetBefore(s.epoch.start_step);
  }

  /** A round: apply (through h−2, or h−1 at once), health checks, train (RoundTrain), then witness when ready. */
  private async round(s: CoordinatorState): Promise<void> {
    const round = currentRound(s);
    if (!round) return;
    this.setPhase(s.run_state === 'RoundTrain' ? 'Training' : 'Witness', s);
    const epoch = this.epoch;
    if (round.height > epoch.trainedHeight) {
      // Verify round h−1's sampled results first: until h−2 is applied the parameters are exactly those its
      // trainers trained on.
      await this.verifier.run(s, round, epoch);
      // Apply everything up to h−2 next (SparseLoCo: settle h−2, apply h−1 at once): training reads them.
      if (appliesAtOnce(this.ctx))
        await settleThrough(this.ctx, epoch, s, round.height - 2, round.height - 1, round);
      else await applyThrough(this.ctx, epoch, s, round.height - 2, round);
      // Applied rounds' results are never needed again (witnessing reads round h−1's); free them.
      this.ctx.results.forgetBefore(round.step - 3);
      await this.witness.healthCheck(s, round, epoch);
      epoch.trainedHeight = round.height;
      if (s.run_state === 'RoundTrain') await this.trainer.run(s, round);
    }
    await this.witness.maybeWitness(s, epoch);
  }

  /** Called while no new state arrived: witnesses may now have everything they wait for. */
  private async poll(s: CoordinatorState): Promise<void> {
    if (s.run_state !== 'RoundTrain' && s.run_state !== 'RoundWitness') return;
    if (this.contributing(s) && this.ctx.replica.holdsEpochStart(s.epoch.start_step))
      await this.witness.maybeWitness(s, this.epoch);
  }

  /**
   * In the epoch's roster without its parameters (a restart inside the relay's reconnect grace keeps the
   * slot): a member that cannot train or witness would only cost the others a timeout, so leave now and
   * come back, with the checkpoint, in the next epoch.
   */
  private leaveEpoch(s: CoordinatorState): Promise<void> {
    return this.beginResync(
      `in epoch ${s.progress.epoch} (started at step ${s.epoch.start_step}) without its parameters; rejoining for the next epoch`,
    );
  }

  private async beginResync(reason: string): Promise<void> {
    this.ctx.replica.invalidate();
    this.stats.resyncs++;
    this.setPhase('Resyncing', this.latest);
    this.ctx.emit({ type: 'resync', reason });
    await this.ctx.o.link.rejoin(reason).catch((e: unknown) => {
      this.ctx.emit({ type: 'error', message: `rejoin failed: ${messageOf(e)}` });
    });
  }

  /**
   * Results the coordinator admitted (its record names each one's commitment and trainer): fetched in the
   * background as soon as they are admitted — from peers with the trainer as the hint, else the relay — so
   * they are at hand to witness, verify and apply. The relay sends no announces; the state is the list.
   */
  private prefetchAdmitted(s: CoordinatorState): void {
    if (s.run_state !== 'RoundTrain' && s.run_state !== 'RoundWitness') return;
    for (const round of s.epoch.rounds) {
      const admitted = roundAdmitted(round);
      if (admitted.length === 0 || this.seenAdmitted.has(admitted)) continue;
      this.seenAdmitted.add(admitted);
      let done = this.prefetchedAdmitted.get(round.step);
      if (!done) this.prefetchedAdmitted.set(round.step, (done = new Set()));
      const assignments = roundAssignments(s, round);
      admitted.forEach((hex, slot) => {
        const a = assignments[slot];
        if (hex === null || !a || a.id === this.ctx.id || done.has(hex)) return;
        done.add(hex);
        const commitment = hexToBytes(hex);
        this.ctx.results.addCandidate(round.step, a.batch, commitment, a.id);
        this.ctx.fetcher.prefetch(commitment, a.id);
      });
    }
    // Steps the ring no longer holds are never fetched again.
    const oldest = Math.min(...s.epoch.rounds.map((r) => r.step));
    for (const step of this.prefetchedAdmitted.keys())
      if (step < oldest) this.prefetchedAdmitted.delete(step);
  }

  /** An announcement: record the candidate and fetch its payload in the background. */
  private onAnnounce(a: Announce, via: 'relay' | 'peer'): void {
    try {
      verifyAnnounce(a);
    } catch {
      this.ctx.emit({ type: 'warning', message: `dropped an announce with a bad signature (via ${via})` });
      return;
    }
    if (a.runId !== this.ctx.o.runId) return;
    const from = bytesToHex(a.from);
    if (from === this.ctx.id) return;
    this.ctx.results.addCandidate(a.step, a.batch, a.commitment, from);
    this.ctx.fetcher.prefetch(a.commitment, from);
  }
}
