// One SparseLoCo peer's round, composed from backend operations (the client drives it; see the README):
//
//   round start: θ (shared, identical on every replica), θ_local = copy of θ (resetLocal)
//   H times:     grads of a batch at θ_local → innerAdamWStep(θ_local)          (AdamW state stays local)
//   send:        ef ← β·ef + (θ − θ_local); per chunk top-k of ef; n-bit quantise; ef −= what was sent
//   apply:       outerStep(θ, accepted results of all peers)                     (bit-identical everywhere)
//   next round:  resetLocal(θ_local ← θ)
//
// Everything but the outer step is local to the peer and may differ in the last bits between devices.
import type { DistroBackend, DistroTensor } from '../backend.ts';
import { clipByGlobalNorm } from '../clip.ts';
import { adamwScalars, type InnerAdamWOptions } from './adamw.ts';
import type { SparseDomain } from './outer.ts';
import { dequantizeResult, quantizeResult, type QuantTensorResult } from './quantize.ts';

/** AdamW moments of every parameter and the number of steps taken; one per peer, never sent. */
export interface AdamWState {
  readonly m: readonly DistroTensor[];
  readonly v: readonly DistroTensor[];
  step: number;
}

export function createAdamWState(be: DistroBackend, params: readonly DistroTensor[]): AdamWState {
  return { m: params.map((p) => be.tensor(p.shape)), v: params.map((p) => be.tensor(p.shape)), step: 0 };
}

export function releaseAdamWState(be: DistroBackend, state: AdamWState): void {
  for (const t of [...state.m, ...state.v]) be.release(t);
}

/** θ_local ← θ for every tensor (the start of a round). */
export function resetLocal(
  be: DistroBackend,
  local: readonly DistroTensor[],
  start: readonly DistroTensor[],
): void {
  local.forEach((t, i) => be.copy(t, start[i]!));
}

export interface InnerStepOptions extends InnerAdamWOptions {
  /** Clip the gradients to this global L2 norm first (as torch's clip_grad_norm_); off when absent or ≤ 0. */
  clipGradNorm?: number;
}

/**
 * One local AdamW step on `local` with `grads` (gradients of the loss at `local`), clipping by global norm
 * first when asked. Returns the gradient norm before clipping.
 */
export async function innerAdamWStep(
  be: DistroBackend,
  local: readonly DistroTensor[],
  grads: readonly DistroTensor[],
  state: AdamWState,
  o: InnerStepOptions,
): Promise<{ gradNorm: number }> {
  const gradNorm = await clipByGlobalNorm(be, grads, o.clipGradNorm);
  const s = adamwScalars(o, state.step + 1);
  local.forEach((p, i) => be.adamw(p, grads[i]!, state.m[i]!, state.v[i]!, s));
  state.step += 1;
  return { gradNorm };
}

export interface SparseLoCoSendOptions {
  /** Decay β of the error-feedback buffer (SparseLoCo: 0.95). */
  beta: number;
  /** Entries per chunk (SparseLoCo at chunk 64: 64 of each 4 096). */
  topk: number;
  /** Bits per entry, 1..8 (SparseLoCo: 2). */
  bits: number;
  /** Top-k over DCT coefficients or raw entries; the run decides, every peer uses the same. */
  domain: SparseDomain;
}

/**
 * The peer's contribution of a round: ef ← β·ef + (start − local), per chunk the top-k of ef quantised to
 * `bits`, and ef ← ef − dequantised(sent) in f32 (in the DCT domain through the float IDCT of the sent
 * coefficients). Returns one result per tensor, ready for the wire (core's valueKind 2).
 */
export async function sparseLoCoSend(
  be: DistroBackend,
  start: readonly DistroTensor[],
  local: readonly DistroTensor[],
  ef: readonly DistroTensor[],
  o: SparseLoCoSendOptions,
): Promise<QuantTensorResult[]> {
  for (const [i, e] of ef.entries()) be.errorFeedback(e, start[i]!, local[i]!, o.beta);
  // Every tensor's selection at once where the backend batches it: one readback per round instead of one each.
  const picked = be.selectTopkAll
    ? await be.selectTopkAll(ef, o.topk, o.domain)
    : await Promise.all(ef.map((e) => be.selectTopk(e, o.topk, o.domain)));
  const out: QuantTensorResult[] = [];
  for (const [i, e] of ef.entries()) {
    const q = quantizeResult(picked[i]!, o.bits);
    const sent = dequantizeResult(q);
    if (o.domain === 'dct') be.subtractResidual(e, sent);
    else be.subtractSparse(e, sent);
    out.push(q);
  }
  return out;
}
