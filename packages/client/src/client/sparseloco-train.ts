// A SparseLoCo trainer's round (docs/protocol.md "SparseLoCo rounds"): from the round's shared parameters θ,
// H inner AdamW steps on the H consecutive inner batches of its interval (core's innerBatches; each inner
// step's lr from the schedule at core's innerScheduleStep), then the pseudo-gradient θ − θ_local into the
// error-feedback buffer, its top-k per chunk quantised to the run's bits, and the residual kept. Everything but
// the sent result is this peer's own state (sparseloco-state.ts). On a resident backend the inner steps, the
// error feedback and the top-k run on the device; only the sparse result (and, in a verified run, the
// fingerprint's 2,048 values) is read back.
//
// sparseLoCoSend reads θ as the round's start. The client's driver applies results only between rounds (verify,
// apply through h−2, then train, one after the other), so θ cannot change during the inner steps and needs no
// copy; Replica.version checks that it did not.
import {
  fingerprintOf,
  innerBatches,
  type CoordinatorState,
  type DistroResult,
  type Round,
  type RoundAssignment,
  type SparseLoCoOptimizer,
} from '@meshtrain/core';
import { innerAdamWStep, resetLocal, sparseLoCoSend } from '@meshtrain/distro';
import { quantToWire } from '../convert.ts';
import { innerLearningRateAt, type ClientContext } from './context.ts';
import { fingerprintValues } from './fingerprint.ts';
import { gradientsAt } from './gradients.ts';
import { innerStepOptions, type SparseLoCoState, type SparseLoCoTensors } from './sparseloco-state.ts';

export interface SparseLoCoRound {
  /** Mean loss over the inner steps' rows. */
  loss: number;
  /** The first inner step's learning rate. */
  lr: number;
  tensors: DistroResult[];
  /** The first inner step's gradient fingerprint (verified runs). */
  fingerprint?: Uint8Array;
  /** Inner steps taken: H, or the interval's sample count when that is smaller. */
  innerSteps: number;
}

/** Trains `mine` of `round` as H inner steps and returns what to send. */
export async function trainSparseLoCoRound(
  ctx: ClientContext,
  config: SparseLoCoOptimizer,
  state: SparseLoCoState,
  s: CoordinatorState,
  round: Round,
  mine: RoundAssignment,
  slot: number,
  verified: boolean,
): Promise<SparseLoCoRound> {
  const { replica } = ctx;
  const d = ctx.o.distro;
  // A cold-start epoch forgets the optimizer state, as DisTrO zeroes its momentum.
  if (s.epoch.cold_start_epoch && round.height === 0) state.reset();
  const version = replica.version;
  const t = state.for(replica.params);
  resetLocal(d, t.local, replica.params);
  const inner = innerBatches(mine.batch, config.inner_steps);
  let loss = 0;
  let rows = 0;
  let fingerprint: Uint8Array | undefined;
  for (const [h, b] of inner.entries()) {
    const lr = innerLearningRateAt(ctx.schedule, round.step, h, config.inner_steps, s);
    const n = b.end - b.start + 1;
    const step = await innerStep(ctx, config, t, b, lr, verified && h === 0 ? { round, slot } : null);
    if (!Number.isFinite(step.loss))
      throw new Error(`step ${round.step}, inner step ${h}: loss is ${step.loss}`);
    fingerprint ??= step.fingerprint;
    loss += step.loss * n;
    rows += n;
  }
  if (replica.version !== version)
    throw new Error(`the parameters changed during the inner steps of step ${round.step}`);
  const sent = await sparseLoCoSend(d, replica.params, t.local, t.ef, {
    beta: config.error_decay,
    topk: config.compression_topk,
    bits: config.quantization_bits,
    domain: config.domain,
  });
  await d.finish();
  return {
    loss: rows > 0 ? loss / rows : NaN,
    lr: innerLearningRateAt(ctx.schedule, round.step, 0, config.inner_steps, s),
    tensors: sent.map(quantToWire),
    innerSteps: inner.length,
    ...(fingerprint ? { fingerprint } : {}),
  };
}

/**
 * One inner step on batch `b` at θ_local: forward/backward, the fingerprint of its gradient when asked (the
 * first inner step, at θ itself, before clipping — what a verifier recomputes), then AdamW.
 */
async function innerStep(
  ctx: ClientContext,
  config: SparseLoCoOptimizer,
  t: SparseLoCoTensors,
  b: { start: number; end: number },
  lr: number,
  fingerprintFor: { round: Round; slot: number } | null,
): Promise<{ loss: number; fingerprint?: Uint8Array }> {
  const d = ctx.o.distro;
  const rows = b.end - b.start + 1;
  const tokens = await ctx.o.data.samples(b.start, b.end);
  const started = ctx.now();
  const { loss, grads, release } = await gradientsAt(
    d,
    ctx.o.backend,
    ctx.replica.names,
    t.local,
    tokens,
    rows,
  );
  try {
    const fingerprint = fingerprintFor
      ? fingerprintOf(
          await fingerprintValues(d, grads, fingerprintFor.round.random_seed, fingerprintFor.slot),
        )
      : undefined;
    await innerAdamWStep(d, t.local, grads, t.adam, innerStepOptions(config, lr));
    // Each row is seqLen + 1 ids: seqLen inputs, each predicting the next id.
    ctx.meter.recordTrainStep(tokens.length - rows, ctx.now() - started);
    return fingerprint ? { loss, fingerprint } : { loss };
  } finally {
    release();
  }
}
