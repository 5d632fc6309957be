// The one GPUDevice a browser trainer shares between onnxruntime-web and our WGSL. ORT's kernels and large
// parameter buffers need more than WebGPU's default limits, so ask for the adapter's maxima of the limits that
// matter, as ORT does when it creates a device itself (docs/architecture.md "Runtime notes").
export const COMPUTE_LIMITS = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBuffersPerShaderStage',
] as const;

/** A device with the adapter's maxima for COMPUTE_LIMITS; the label names it in Dawn's messages. */
export function requestComputeDevice(adapter: GPUAdapter, label: string): Promise<GPUDevice> {
  const requiredLimits: Record<string, number> = {};
  for (const k of COMPUTE_LIMITS) requiredLimits[k] = adapter.limits[k];
  return adapter.requestDevice({ label, requiredLimits });
}
