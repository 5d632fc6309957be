// The backend operations SparseLoCo adds to DistroBackend (both backends implement them; see backend.ts).
// Inner steps, error feedback, top-k and the residual are local to one peer: float32 arithmetic that may
// differ in the last bits between devices. `applyOuter` is the shared step and is bit-identical everywhere.
import type { DistroTensor } from '../backend.ts';
import type { TensorResult } from '../result.ts';
import type { AdamWScalars } from './adamw.ts';
import type { OuterAggregate, SparseDomain } from './outer.ts';

export interface SparseLoCoOps {
  /** dst ← src, bit for bit (e.g. local parameters ← the round-start parameters). */
  copy(dst: DistroTensor, src: DistroTensor): void;
  /** One AdamW step (adamw.ts) on param with its gradient and moment buffers m, v. */
  adamw(param: DistroTensor, grad: DistroTensor, m: DistroTensor, v: DistroTensor, s: AdamWScalars): void;
  /** Error feedback: ef ← fround(β·ef) + fround(start − local). */
  errorFeedback(ef: DistroTensor, start: DistroTensor, local: DistroTensor, beta: number): void;
  /**
   * The top-k of every chunk by |value| (ties to the lower index, ascending order, as `compress`): of the
   * chunk's DCT-II coefficients ('dct', = compress) or of its entries themselves ('raw').
   */
  selectTopk(t: DistroTensor, topk: number, domain: SparseDomain): Promise<TensorResult>;
  /**
   * `selectTopk` of every tensor, in order, with the same results; a GPU backend does it in one submit and one
   * readback (optional: callers fall back to one `selectTopk` per tensor).
   */
  selectTopkAll?(ts: readonly DistroTensor[], topk: number, domain: SparseDomain): Promise<TensorResult[]>;
  /** t ← t − r at r's entries (raw domain residual; the DCT domain uses subtractResidual). */
  subtractSparse(t: DistroTensor, r: TensorResult): void;
  /** p ← RN_f32(p − step·A) for the aggregate's parameters (outer.ts); bit-identical on every backend. */
  applyOuter(param: DistroTensor, agg: OuterAggregate, step: number): void;
  /**
   * The outer step straight from the peers' dequantised results (already checked against the layout):
   * `applyOuter` of their aggregate in `domain`, bit for bit, with the aggregation done by the backend (a GPU
   * backend does it on the device). Returns false, having changed nothing, when it cannot take these results;
   * the caller then aggregates on the host. Optional.
   */
  applyOuterResults?(
    param: DistroTensor,
    results: readonly TensorResult[],
    domain: SparseDomain,
    divideBy: 'senders' | 'results',
    step: number,
  ): boolean;
}
