// Training (docs/protocol.md "Training step"): a trainer of the round fetches its batch, runs the train step
// on the lookahead parameters (the shared parameters in a verified run), takes the gradient fingerprint when
// the run verifies, clips the gradients by global norm, folds them into the momentum after subtracting the
// previous own result's residual and compresses it, then signs, commits and publishes the result. Weight
// decay is not applied here: it is part of the exact apply every replica runs. A SparseLoCo run's round
// (H inner steps, error feedback, n-bit top-k) is sparseloco-train.ts; signing and publishing are shared.
import {
  encodeSignedResult,
  encodeTrainingResult,
  fingerprintOf,
  verificationActive,
  roundAssignments,
  signAnnounce,
  signResult,
  type CoordinatorState,
  type DistroResult,
  type Round,
  type RoundAssignment,
  type TrainingResult,
} from '@meshtrain/core';
import { clipByGlobalNorm, quantize1bit, type DistroTensor, type TensorResult } from '@meshtrain/distro';
import { toWire } from '../convert.ts';
import { learningRateAt, type ClientContext } from './context.ts';
import { messageOf } from './errors.ts';
import { fingerprintValues } from './fingerprint.ts';
import { gradientsAt } from './gradients.ts';
import { distroConfigOf } from './optimizer.ts';
import { trainSparseLoCoRound } from './sparseloco-train.ts';

export class TrainPhase {
  /** The loss of this client's last train step (null before the first). */
  lastLoss: number | null = null;
  private readonly ctx: ClientContext;
  /** Numbers this client's results (never reused: a result for the same batch after a restart differs). */
  private nonce = 0;

  constructor(ctx: ClientContext) {
    this.ctx = ctx;
  }

  /** Trains this client's batch of `round`, if it has one. */
  async run(s: CoordinatorState, round: Round): Promise<void> {
    if (!round.training) return;
    const assignments = roundAssignments(s, round);
    const slot = assignments.findIndex((a) => a.id === this.ctx.id);
    const mine = assignments[slot];
    if (!mine) return;
    const { ctx } = this;
    const started = ctx.now();
    // A verified run trains at the round's shared parameters, which verifiers can reproduce
    // (docs/protocol.md "Verification of work").
    const verified = verificationActive(s);
    const opt = ctx.optimizer;
    const trained =
      opt.kind === 'sparseloco'
        ? await trainSparseLoCoRound(ctx, opt.config, opt.state, s, round, mine, slot, verified)
        : await this.distroRound(s, round, mine, slot, verified);
    const bytes = await this.publish(round, mine, trained.tensors, trained.fingerprint);
    this.lastLoss = trained.loss;
    ctx.emit({
      type: 'trained',
      epoch: s.progress.epoch,
      step: round.step,
      batch: mine.batch,
      loss: trained.loss,
      lr: trained.lr,
      bytes,
      seconds: (ctx.now() - started) / 1000,
      innerSteps: trained.innerSteps,
    });
  }

  /**
   * DisTrO's round: one train step on the lookahead parameters (the shared ones in a verified run: Psyche's
   * lookahead, params − prev_lr·sign(delta), depends on this client's private momentum), the fingerprint,
   * then clip, residual, momentum, compress.
   */
  private async distroRound(
    s: CoordinatorState,
    round: Round,
    mine: RoundAssignment,
    slot: number,
    verified: boolean,
  ): Promise<{
    loss: number;
    lr: number;
    tensors: DistroResult[];
    fingerprint?: Uint8Array;
    innerSteps: number;
  }> {
    const { ctx } = this;
    const d = ctx.o.distro;
    const lr = learningRateAt(ctx.schedule, round.step, s);
    const prevLr = verified ? 0 : learningRateAt(ctx.schedule, round.step - 1, s);
    if (s.epoch.cold_start_epoch && round.height === 0) {
      for (const t of ctx.replica.delta) d.scale(t, 0);
      // The last result's residual belongs to the momentum just zeroed: subtracting it from the fresh one
      // would send the negation of that result, against the gradient (verifiers fail it).
      ctx.replica.ownPrev = null;
    }

    const rows = mine.batch.end - mine.batch.start + 1;
    const tokens = await ctx.o.data.samples(mine.batch.start, mine.batch.end);
    const computeStarted = ctx.now();
    const { replica } = ctx;
    const at = replica.lookahead(prevLr);
    const { loss, grads, release } = await gradientsAt(d, ctx.o.backend, replica.names, at, tokens, rows);
    if (!Number.isFinite(loss)) {
      release();
      throw new Error(`step ${round.step}: loss is ${loss}`);
    }
    let own: TensorResult[];
    let fingerprint: Uint8Array | undefined;
    try {
      // Before clipping: the verifier's gradient is not clipped either.
      if (verified) fingerprint = fingerprintOf(await fingerprintValues(d, grads, round.random_seed, slot));
      own = await this.compress(grads, lr);
    } finally {
      release();
    }
    // Each row is seqLen + 1 ids: seqLen inputs, each predicting the next id.
    ctx.meter.recordTrainStep(tokens.length - rows, ctx.now() - computeStarted);
    const sent = distroConfigOf(ctx.optimizer).quantize_1bit ? own.map(quantize1bit) : own;
    return { loss, lr, tensors: sent.map(toWire), innerSteps: 1, ...(fingerprint ? { fingerprint } : {}) };
  }

  /** Clip, residual, momentum, compress: the result before quantisation, one TensorResult per parameter. */
  private async compress(grads: DistroTensor[], lr: number): Promise<TensorResult[]> {
    const { ctx } = this;
    const d = ctx.o.distro;
    const cfg = distroConfigOf(ctx.optimizer);
    const clip = cfg.clip_grad_norm ?? 0;
    if (clip > 0) await clipByGlobalNorm(d, grads, clip);
    const { replica } = ctx;
    const own: TensorResult[] = [];
    // The residual of the previous own result is subtracted one step late, as Psyche does.
    for (let i = 0; i < replica.names.length; i++) {
      const delta = replica.delta[i] as DistroTensor;
      if (replica.ownPrev) d.subtractResidual(delta, replica.ownPrev[i] as TensorResult);
      d.momentum(delta, grads[i] as DistroTensor, cfg.compression_decay, lr);
    }
    // One readback for the whole step where the backend batches it.
    if (d.compressAll) own.push(...(await d.compressAll(replica.delta, cfg.compression_topk)));
    else for (const delta of replica.delta) own.push(await d.compress(delta, cfg.compression_topk));
    // The unquantised result is what the residual subtracts (docs/protocol.md "Top-k and 1-bit signs").
    replica.ownPrev = own;
    return own;
  }

  /** Signs and publishes the result (peers first, then the relay); returns the frame's size. */
  private async publish(
    round: Round,
    mine: RoundAssignment,
    tensors: DistroResult[],
    fingerprint: Uint8Array | undefined,
  ): Promise<number> {
    const { ctx } = this;
    this.nonce++;
    const result: TrainingResult = {
      runId: ctx.o.runId,
      step: round.step,
      batch: { start: mine.batch.start, end: mine.batch.end },
      trainerNonce: this.nonce,
      tensors,
      ...(fingerprint ? { fingerprint } : {}),
    };
    const envelope = signResult(ctx.o.secretKey, result);
    const frame = encodeSignedResult({ envelope, result });
    const commitment = envelope.commitment;
    ctx.results.hold({ commitment, from: ctx.id, frame, result });
    const announce = signAnnounce(ctx.o.secretKey, {
      runId: result.runId,
      step: result.step,
      batch: result.batch,
      commitment,
      // The size of the TrainingResult frame the commitment covers (what P2P blob fetches return).
      size: encodeTrainingResult(result).length,
    });
    // Peers first: the result is admitted into the state as soon as the relay has it, and a peer asked before
    // the blob exists would answer "not found" and cost the asker a fallback round trip.
    await ctx.o.peers?.publish(announce, frame).catch((e: unknown) => {
      ctx.emit({ type: 'warning', message: `p2p publish failed (relay has it): ${messageOf(e)}` });
    });
    await ctx.o.link.submitResult(frame, announce);
    ctx.stats.bytesSent += frame.length;
    ctx.stats.resultsSent++;
    return frame.length;
  }
}
