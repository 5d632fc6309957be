// Verifying (docs/protocol.md "Verification of work"): at the start of round h+1, before applying anything
// new, this replica holds exactly the parameters round h's trainers trained on. For each round-h result the
// coordinator's seed named it to verify, it recomputes the gradient on the trainer's batch and measures
//  - fingerprint agreement: the result's gradient sign bits against its own gradient at the same positions,
//  - update agreement: the result's transmitted coefficients against the DCT of its own gradient there,
// and reports the verdict core's thresholds give. It judges only the admitted result (the one peers apply).
// A SparseLoCo result is checked against the verifier's own rerun of its inner steps (sparseloco-verify.ts).
import {
  fingerprintAgreement,
  roundAdmitted,
  roundAtHeight,
  verificationPasses,
  verificationTasks,
  hexToBytes,
  type CoordinatorState,
  type Round,
  type VerificationTask,
} from '@meshtrain/core';
import type { DistroTensor } from '@meshtrain/distro';
import { fromWire } from '../convert.ts';
import type { ClientContext, EpochProgress } from './context.ts';
import { messageOf } from './errors.ts';
import { fingerprintValues } from './fingerprint.ts';
import { gradientsAt } from './gradients.ts';
import type { HeldResult } from './results-store.ts';
import { measureSparseLoCo } from './sparseloco-verify.ts';

export interface Measurements {
  fingerprintAgreement: number;
  updateAgreement: number;
}

export class VerifyPhase {
  private readonly ctx: ClientContext;

  constructor(ctx: ClientContext) {
    this.ctx = ctx;
  }

  /** Verifies this client's tasks on round `round.height − 1`, once per round (before any apply). */
  async run(s: CoordinatorState, round: Round, epoch: EpochProgress): Promise<void> {
    if (round.height < 1 || epoch.verifiedHeight >= round.height) return;
    epoch.verifiedHeight = round.height;
    const judged = roundAtHeight(s, round.height - 1);
    if (!judged) return;
    const mine = verificationTasks(s, judged, round).filter((t) => t.verifiers.includes(this.ctx.id));
    for (const task of mine) await this.verify(s, judged, task);
  }

  private async verify(s: CoordinatorState, judged: Round, task: VerificationTask): Promise<void> {
    const { ctx } = this;
    const hex = roundAdmitted(judged)[task.slot] ?? null;
    if (hex === null) return; // the host admitted nothing: there is nothing peers would apply
    const commitment = hexToBytes(hex);
    const held = await ctx.fetcher.obtain(commitment, task.trainer.id);
    if (!held) {
      ctx.emit({
        type: 'warning',
        message: `verify: result of step ${judged.step} not obtained; no verdict`,
      });
      return;
    }
    const m = await this.measure(s, judged, task, held);
    const pass = verificationPasses(m, ctx.optimizer.kind);
    ctx.emit({ type: 'verified', step: judged.step, trainer: task.trainer.id, pass, ...m });
    await ctx.o.link
      .submitVerdict({
        runId: ctx.o.runId,
        step: judged.step,
        batch: { start: task.trainer.batch.start, end: task.trainer.batch.end },
        commitment,
        pass,
        fingerprintAgreement: Math.min(1, Math.max(0, m.fingerprintAgreement)),
        updateAgreement: Math.min(1, Math.max(-1, m.updateAgreement)),
      })
      .catch((e: unknown) => ctx.emit({ type: 'warning', message: `verdict refused: ${messageOf(e)}` }));
  }

  /**
   * Recomputes the gradient on the trainer's batch at the current (shared) parameters and compares (a
   * SparseLoCo run: the trainer's inner steps, sparseloco-verify.ts).
   */
  async measure(
    s: CoordinatorState,
    judged: Round,
    task: VerificationTask,
    held: HeldResult,
  ): Promise<Measurements> {
    const { ctx } = this;
    const opt = ctx.optimizer;
    if (opt.kind === 'sparseloco')
      return measureSparseLoCo(ctx, opt.config, opt.state, s, judged, task, held);
    const d = ctx.o.distro;
    const { batch } = task.trainer;
    const rows = batch.end - batch.start + 1;
    const tokens = await ctx.o.data.samples(batch.start, batch.end);
    const { replica } = ctx;
    const at = replica.lookahead(0);
    const { grads, release } = await gradientsAt(d, ctx.o.backend, replica.names, at, tokens, rows);
    try {
      const fp = held.result.fingerprint;
      const own = await fingerprintValues(d, grads, judged.random_seed, task.slot);
      return {
        fingerprintAgreement: fp ? fingerprintAgreement(fp, own) : 0,
        updateAgreement: await this.updateAgreement(grads, held),
      };
    } finally {
      release();
    }
  }

  /**
   * Σ sign(value)·G / Σ |G| over every transmitted coefficient, G the DCT of this replica's gradient there: an
   * honest result (momentum built from gradients like this one) scores near 1, random signs near 0, a
   * sign-flipped result near −1.
   */
  private async updateAgreement(grads: readonly DistroTensor[], held: HeldResult): Promise<number> {
    const d = this.ctx.o.distro;
    let num = 0;
    let den = 0;
    for (let i = 0; i < grads.length; i++) {
      const wire = held.result.tensors[i];
      if (!wire) return 0;
      const r = fromWire(wire);
      const coef = await d.coefficientsAt(grads[i] as DistroTensor, r.indices, r.k);
      for (let j = 0; j < coef.length; j++) {
        const g = coef[j] as number;
        num += Math.sign(r.values[j] as number) * g;
        den += Math.abs(g);
      }
    }
    return den > 0 ? num / den : 0;
  }
}
