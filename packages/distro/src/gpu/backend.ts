// WGSL backend over any GPUDevice (the browser shares onnxruntime-web's; Node uses Dawn). Tensors are lists of
// segments (gpu/segments.ts) so no binding exceeds the device's limits; every kernel runs per segment. The
// shared device state (pipelines, kept buffers, readbacks) is gpu/context.ts; the operations live in modules of
// their own: storage.ts (tensors in and out), elementwise-ops.ts, select.ts (compress, top-k), gather.ts,
// decode.ts (residual, apply) and sparseloco.ts.
import type { DistroBackend, DistroTensor } from '../backend.ts';
import { tensorLayout } from '../layout.ts';
import type { TensorResult } from '../result.ts';
import type { SparseDomain } from '../sparseloco/outer.ts';
import { GpuContext, type GpuStats } from './context.ts';
import { applyAggregated, applyResultsOnDevice, subtractResidual } from './decode.ts';
import { momentum, scale, signStep, sumOfSquares, sumsOfSquares } from './elementwise-ops.ts';
import { coefficientsAt, gatherElements } from './gather.ts';
import { selectMany } from './select.ts';
import { gpuSparseLoCoOps } from './sparseloco.ts';
import {
  bufferOf,
  newTensor,
  readTensor,
  releaseTensor,
  wrapBuffer,
  writeTensor,
  type TensorPlan,
} from './storage.ts';

export type { GpuStats } from './context.ts';

export interface WebGpuBackendOptions {
  chunk: number;
  /** Overrides the device's maxStorageBufferBindingSize (tests use tiny values to exercise splitting). */
  maxBindingBytes?: number;
  /** Shown in bench output, e.g. the adapter name; "software adapter" is appended when known. */
  description?: string;
}

export interface WebGpuDistroBackend extends DistroBackend {
  /** The device every tensor of this backend lives on. */
  readonly device: GPUDevice;
  /**
   * Bytes copied from the GPU to the host so far: `readbackBytes` by kernels (compressed results, norm partial
   * sums), `tensorReadBytes` by `read` (whole tensors, e.g. parameters hashed at an epoch end).
   */
  readonly stats: GpuStats;
  /** An external buffer (e.g. onnxruntime-web's) as a tensor; its segments are aligned ranges of it. */
  wrap(buffer: GPUBuffer, shape: readonly number[]): DistroTensor;
  /**
   * The tensor as one contiguous float32 buffer at offset 0 (what another library, e.g. onnxruntime-web,
   * binds as an input). A single-segment tensor is returned as is; a split one is copied, on the GPU, into a
   * new buffer that the caller destroys once the work reading it is submitted (`temporary`).
   */
  bufferOf(t: DistroTensor): { buffer: GPUBuffer; temporary: boolean };
  /**
   * `compress` of every tensor, in order, with the same results: one submit and one host↔GPU round trip for
   * the whole list (a step's parameters) instead of one per tensor.
   */
  compressAll(deltas: readonly DistroTensor[], topk: number): Promise<TensorResult[]>;
}

export function createWebGpuBackend(device: GPUDevice, options: WebGpuBackendOptions): WebGpuDistroBackend {
  const chunk = options.chunk;
  tensorLayout([1], chunk);
  const plan: TensorPlan = {
    chunk,
    maxBinding: Math.min(
      options.maxBindingBytes ?? Infinity,
      device.limits.maxStorageBufferBindingSize,
      device.limits.maxBufferSize,
    ),
  };
  const ctx = new GpuContext(device);
  const selectTopk = async (t: DistroTensor, topk: number, domain: SparseDomain): Promise<TensorResult> =>
    (await selectMany(ctx, [t], topk, domain))[0] as TensorResult;
  return {
    kind: 'webgpu',
    description: options.description ?? 'WebGPU',
    chunk,
    device,
    stats: ctx.stats,
    tensor: (shape, data) => newTensor(ctx, plan, shape, data),
    wrap: (buffer, shape) => wrapBuffer(ctx, plan, buffer, shape),
    bufferOf: (t) => bufferOf(ctx, t),
    read: (t) => readTensor(ctx, t),
    gather: (t, offsets) => gatherElements(ctx, t, offsets),
    coefficientsAt: (t, indices, k) => coefficientsAt(ctx, t, indices, k),
    write: (t, data) => writeTensor(ctx, t, data),
    release: releaseTensor,
    momentum: (delta, grad, decay, lr) => momentum(ctx, delta, grad, decay, lr),
    sumOfSquares: (t) => sumOfSquares(ctx, t),
    sumsOfSquares: (ts) => sumsOfSquares(ctx, ts),
    scale: (t, factor) => scale(ctx, t, factor),
    signStep: (out, params, delta, lr) => signStep(ctx, out, params, delta, lr),
    compress: (delta, topk) => selectTopk(delta, topk, 'dct'),
    compressAll: (deltas, topk) => selectMany(ctx, deltas, topk, 'dct'),
    selectTopk,
    selectTopkAll: (ts, topk, domain) => selectMany(ctx, ts, topk, domain),
    subtractResidual: (delta, own) => subtractResidual(ctx, delta, own),
    applyAggregated: (param, agg, u) => applyAggregated(ctx, param, agg, u),
    applyResults: (param, results, u) => applyResultsOnDevice(ctx, param, results, u),
    ...gpuSparseLoCoOps(ctx),
    finish: () => device.queue.onSubmittedWorkDone(),
    destroy: () => ctx.destroy(),
  };
}
