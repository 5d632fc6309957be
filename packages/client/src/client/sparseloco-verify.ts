// Verifying a SparseLoCo result (docs/protocol.md "Verification of work", "SparseLoCo rounds"). A round's
// first inner step starts at the shared parameters θ, so its gradient on the interval's first inner batch is
// what anyone can recompute: it is the fingerprint's gradient. The sent values come from H inner AdamW steps
// and an error-feedback buffer, both the trainer's private state; the verifier reruns the H inner steps on the
// trainer's inner batches from θ with fresh AdamW moments and compares the signs of the sent values with its
// own pseudo-gradient θ − θ_local there (`signAgreement`). bench/sparseloco-verify.ts measured this against
// the first step's gradient alone, which drifts towards 0 for honest results as the error feedback ages.
//
// Cost: one trainer's round of compute (H forward/backward passes) per verification, and two model-sized
// buffers for the fresh moments while it runs. The verifier's own θ_local is its scratch: training resets it
// from θ at the start of its own inner steps, which come after verification in the round.
import {
  fingerprintAgreement,
  innerBatches,
  type CoordinatorState,
  type Round,
  type SparseLoCoOptimizer,
  type VerificationTask,
} from '@meshtrain/core';
import {
  coefficientOffset,
  createAdamWState,
  innerAdamWStep,
  releaseAdamWState,
  resetLocal,
  tensorLayout,
  unpackCodes,
  type AdamWState,
  type DistroBackend,
  type DistroTensor,
  type QuantTensorResult,
  type SparseDomain,
} from '@meshtrain/distro';
import { quantFromWire } from '../convert.ts';
import { innerLearningRateAt, type ClientContext } from './context.ts';
import { fingerprintValues } from './fingerprint.ts';
import { gradientsAt } from './gradients.ts';
import type { HeldResult } from './results-store.ts';
import { innerStepOptions, type SparseLoCoState } from './sparseloco-state.ts';

/**
 * Reruns the verified trainer's inner steps from θ (the replica's parameters, which round `judged` trained
 * from) with fresh AdamW moments: the fingerprint agreement of the first step's gradient, and the sign
 * agreement of the sent values with the resulting pseudo-gradient.
 */
export async function measureSparseLoCo(
  ctx: ClientContext,
  config: SparseLoCoOptimizer,
  state: SparseLoCoState,
  s: CoordinatorState,
  judged: Round,
  task: VerificationTask,
  held: HeldResult,
): Promise<{ fingerprintAgreement: number; updateAgreement: number }> {
  const d = ctx.o.distro;
  const { replica } = ctx;
  const { local } = state.for(replica.params);
  const fresh = createAdamWState(d, local);
  try {
    resetLocal(d, local, replica.params);
    let own: Float32Array | null = null;
    for (const [h, b] of innerBatches(task.trainer.batch, config.inner_steps).entries()) {
      const lr = innerLearningRateAt(ctx.schedule, judged.step, h, config.inner_steps, s);
      const values = await rerunStep(
        ctx,
        config,
        local,
        fresh,
        b,
        lr,
        h === 0 ? judged.random_seed : null,
        task.slot,
      );
      own ??= values;
    }
    // The pseudo-gradient θ − θ_local, into the fresh first moments (no longer needed).
    fresh.m.forEach((m, i) => d.errorFeedback(m, replica.params[i]!, local[i]!, 0));
    const fp = held.result.fingerprint;
    return {
      fingerprintAgreement: fp && own ? fingerprintAgreement(fp, own) : 0,
      updateAgreement: await signAgreement(d, fresh.m, held.result.tensors.map(quantFromWire), config.domain),
    };
  } finally {
    releaseAdamWState(d, fresh);
  }
}

/** One rerun inner step; with `seed`, the fingerprint positions' gradient values (before clipping). */
async function rerunStep(
  ctx: ClientContext,
  config: SparseLoCoOptimizer,
  local: readonly DistroTensor[],
  adam: AdamWState,
  b: { start: number; end: number },
  lr: number,
  seed: string | null,
  slot: number,
): Promise<Float32Array | null> {
  const d = ctx.o.distro;
  const tokens = await ctx.o.data.samples(b.start, b.end);
  const { grads, release } = await gradientsAt(
    d,
    ctx.o.backend,
    ctx.replica.names,
    local,
    tokens,
    b.end - b.start + 1,
  );
  try {
    const values = seed === null ? null : await fingerprintValues(d, grads, seed, slot);
    await innerAdamWStep(d, local, grads, adam, innerStepOptions(config, lr));
    return values;
  } finally {
    release();
  }
}

/**
 * Σ s·|G| / Σ |G| over every sent entry, s = +1 where G and the entry's sign agree, −1 where they differ: how
 * well the signs of `sent` follow `reference` (one tensor per parameter, in variable order), weighted by the
 * reference's magnitude. G is the reference at the entry: the element itself ('raw') or the block's DCT-II
 * coefficient ('dct'). A sent entry's sign is its code's sign bit, read without dequantising.
 */
export async function signAgreement(
  d: DistroBackend,
  reference: readonly DistroTensor[],
  sent: readonly QuantTensorResult[],
  domain: SparseDomain,
): Promise<number> {
  let num = 0;
  let den = 0;
  for (const [i, q] of sent.entries()) {
    const ref = reference[i];
    if (!ref) return 0;
    const at = domain === 'dct' ? await d.coefficientsAt(ref, q.indices, q.k) : await rawAt(d, ref, q);
    const codes = unpackCodes(q.codes, q.bits, q.indices.length);
    for (let j = 0; j < at.length; j++) {
      const g = at[j] as number;
      const negative = ((codes[j] as number) & 1) === 1;
      num += negative === g < 0 ? Math.abs(g) : -Math.abs(g);
      den += Math.abs(g);
    }
  }
  return den > 0 ? num / den : 0;
}

/** The reference's elements at a raw-domain result's entries (in-block indices of its chunks, chunk-major). */
function rawAt(d: DistroBackend, t: DistroTensor, q: QuantTensorResult): Promise<Float32Array> {
  const l = tensorLayout(t.shape, d.chunk);
  const offsets = new Uint32Array(q.indices.length);
  for (let j = 0; j < offsets.length; j++)
    offsets[j] = coefficientOffset(l, Math.floor(j / q.k), q.indices[j] as number);
  return d.gather(t, offsets);
}
