// The one API both backends implement. Callers pick a backend (CPU reference or WGSL on any GPUDevice) and
// drive it with the same calls; tensors are opaque handles owned by the backend that made them.
import type { AggregatedTensor } from './aggregate.ts';
import type { UpdateScalars } from './exact-update.ts';
import type { TensorResult } from './result.ts';
import type { SparseLoCoOps } from './sparseloco/ops.ts';

export interface DistroTensor {
  readonly shape: readonly number[];
  readonly size: number;
}

/** DisTrO's operations below, SparseLoCo's in SparseLoCoOps (sparseloco/ops.ts). */
export interface DistroBackend extends SparseLoCoOps {
  readonly kind: 'cpu' | 'webgpu';
  /** Human-readable device description (adapter name, "software adapter" where it is one). */
  readonly description: string;
  /**
   * The run's compression chunk (docs/protocol.md "Chunk choice"); fixed per backend because it decides the
   * block layout.
   */
  readonly chunk: number;
  tensor(shape: readonly number[], data?: Float32Array): DistroTensor;
  read(t: DistroTensor): Promise<Float32Array>;
  /** The entries of `t` at `offsets` (flat, row-major), in order: a few values, without reading the tensor. */
  gather(t: DistroTensor, offsets: Uint32Array): Promise<Float32Array>;
  write(t: DistroTensor, data: Float32Array): void;
  release(t: DistroTensor): void;
  /** delta ← decay·delta + lr·grad (two separately rounded float32 steps, as Psyche does them). */
  momentum(delta: DistroTensor, grad: DistroTensor, decay: number, lr: number): void;
  /** Σ x² (float64 on the host over per-segment partial sums), for clipping by global norm. */
  sumOfSquares(t: DistroTensor): Promise<number>;
  /** `sumOfSquares` of each tensor, the same numbers; a GPU backend reads them back in one round trip. */
  sumsOfSquares(ts: readonly DistroTensor[]): Promise<number[]>;
  /** t ← factor·t. */
  scale(t: DistroTensor, factor: number): void;
  /** out ← params − lr·sign(delta): Psyche's lookahead, written to a scratch tensor so nothing is undone. */
  signStep(out: DistroTensor, params: DistroTensor, delta: DistroTensor, lr: number): void;
  /** Chunked DCT-II of `delta`, then the top-k coefficients of every chunk by |value|. */
  compress(delta: DistroTensor, topk: number): Promise<TensorResult>;
  /**
   * `compress` of every tensor, in order, with the same results; a GPU backend does it in one submit and one
   * readback instead of one per tensor (optional: callers fall back to `compress` per tensor).
   */
  compressAll?(deltas: readonly DistroTensor[], topk: number): Promise<TensorResult[]>;
  /**
   * The chunked DCT-II coefficients of `t` at `k` in-block indices per block (`indices`: blocks × k, chunk-grid
   * order, as a result lists them): what a verifier compares a result's coefficients with, without reading
   * the whole transform back.
   */
  coefficientsAt(t: DistroTensor, indices: Uint32Array, k: number): Promise<Float32Array>;
  /** delta ← delta − decode(own), with `own` the peer's unquantised result. */
  subtractResidual(delta: DistroTensor, own: TensorResult): void;
  /** p ← RN(p·factor − step·sign(IDCT(mean))) with the exact integer decode; bit-identical on every backend. */
  applyAggregated(param: DistroTensor, agg: AggregatedTensor, u: UpdateScalars): void;
  /**
   * `applyAggregated` of the peers' results (already checked: `checkAggregateInputs`), bit for bit, with the
   * aggregation done by the backend (a GPU backend does it on the device). Returns false, having changed
   * nothing, when it cannot take these results; the caller then aggregates on the host. Optional.
   */
  applyResults?(param: DistroTensor, results: readonly TensorResult[], u: UpdateScalars): boolean;
  /** Resolves when all queued work is done. */
  finish(): Promise<void>;
  destroy(): void;
}
