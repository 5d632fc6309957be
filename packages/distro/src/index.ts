// @meshtrain/distro: DisTrO compression and apply, one API over a CPU reference and WGSL on any GPUDevice.
// It knows nothing about peers or rounds: it takes tensors and arrays of results.
export * from './layout.ts';
export * from './dct.ts';
export * from './int-basis.ts';
export * from './result.ts';
export * from './topk.ts';
export * from './aggregate.ts';
export * from './exact-update.ts';
export * from './backend.ts';
export * from './apply.ts';
export * from './optimizer.ts';
export * from './clip.ts';
export * from './sparseloco/index.ts';
export { createCpuBackend } from './cpu/backend.ts';
export {
  createWebGpuBackend,
  type GpuStats,
  type WebGpuBackendOptions,
  type WebGpuDistroBackend,
} from './gpu/backend.ts';
export { planSegments, type Segment } from './gpu/segments.ts';
export { COMPUTE_LIMITS, requestComputeDevice } from './gpu/device.ts';
