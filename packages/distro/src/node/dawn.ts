// A Dawn GPUDevice in Node (npm `webgpu`): what node-trainer, tests and benches run DisTrO on. SwiftShader's Vulkan ICD
// is used when no GPU driver is configured. Node-only, hence its own entry point (`@meshtrain/distro/node`).
import { existsSync } from 'node:fs';
import { create, globals } from 'webgpu';

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';

export interface Dawn {
  device: GPUDevice;
  description: string;
  software: boolean;
}

// The Dawn instance must outlive every device made from it: if the GC collects it, its worker threads die
// under the device and the process crashes (futex / mutex errors) at some later, random point.
const instances: unknown[] = [];

export async function dawnDevice(): Promise<Dawn | undefined> {
  if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER)) process.env.VK_ICD_FILENAMES = SWIFTSHADER;
  Object.assign(globalThis, globals);
  const gpu = create([]);
  instances.push(gpu);
  const adapter = await gpu.requestAdapter();
  instances.push(adapter);
  if (!adapter) return undefined;
  const info = adapter.info;
  const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
  const software =
    /swiftshader|llvmpipe|lavapipe/i.test(name) ||
    (info as { isFallbackAdapter?: boolean }).isFallbackAdapter === true;
  const device = await adapter.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
      maxStorageBuffersPerShaderStage: Math.min(8, adapter.limits.maxStorageBuffersPerShaderStage),
    },
  });
  return {
    device,
    description: `${name || 'unknown adapter'}${software ? ' (software adapter)' : ''}`,
    software,
  };
}
