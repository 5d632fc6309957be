// node-trainer's resident GPU: one Dawn GPUDevice (npm `webgpu`) shared by onnxruntime-web's WebGPU EP and
// DisTrO's WGSL backend, through the same backend module the browser tab trains with
// (@meshtrain/client/webgpu-training). Parameters, gradients and optimizer state stay on that device; per step
// only token ids go up and the loss comes down.
import { createWebGpuBackend, type DistroTensor, type WebGpuDistroBackend } from '@meshtrain/distro';
import type { LlamaConfig } from '@meshtrain/model';
import { createTrainingDevice, WebGpuTrainingBackend } from '@meshtrain/client/webgpu-training';
import { create, globals } from 'webgpu';
import { configureWebgpu } from '../ort/session.ts';

export interface NodeGpuOptions {
  config: LlamaConfig;
  seqLen: number;
  /** Micro-batch: rows per train-step run. */
  maxRows: number;
  /** The run's compression chunk (DisTrO's block side). */
  chunk: number;
  /** ORT's graph capture on resident steps (default true; falls back with a log line where refused). */
  graphCapture?: boolean;
  /** Flags for the Dawn instance (npm `webgpu`'s `create`); default DAWN_FLAGS. */
  dawnFlags?: string[];
  log?: (line: string) => void;
}

export interface NodeGpu {
  device: GPUDevice;
  distro: WebGpuDistroBackend;
  backend: WebGpuTrainingBackend;
  /** The adapter in words. */
  adapter: string;
  /** Releases the sessions, the DisTrO backend and the device (the same as `backend.dispose()`). */
  dispose(): Promise<void>;
}

/**
 * Dawn without robustness (bounds clamping of every storage access), as onnxruntime-node's own WebGPU EP
 * creates its device: ORT's kernels and ours stay in bounds, and the clamping cost a micro train step on
 * SwiftShader about a fifth of its time. Zero-initialised buffers and workgroup memory are kept: DisTrO's
 * moments and sums rely on them.
 */
export const DAWN_FLAGS = ['enable-dawn-features=disable_robustness'];

// Dawn's instance must outlive everything made from it: collected, its threads die under the device. One
// per set of flags serves every device the process opens (probe steps open several).
const instances: unknown[] = [];
const dawnByFlags = new Map<string, GPU>();

function dawnInstance(flags: string[]): GPU {
  const key = flags.join('\n');
  let gpu = dawnByFlags.get(key);
  if (!gpu) {
    gpu = create(flags);
    dawnByFlags.set(key, gpu);
  }
  return gpu;
}

/**
 * onnxruntime-web looks for `navigator.gpu` before it takes the device it is handed; Node has a navigator
 * without one, so the Dawn instance is installed there (once per process).
 */
function installNavigatorGpu(gpu: GPU): void {
  const nav = globalThis.navigator as Navigator & { gpu?: GPU };
  if (nav.gpu) return;
  Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true });
}

/** Opens the device, DisTrO's WGSL backend and the resident training backend on it. */
export async function openNodeGpu(o: NodeGpuOptions): Promise<NodeGpu> {
  configureWebgpu();
  Object.assign(globalThis, globals);
  const gpu = dawnInstance(o.dawnFlags ?? DAWN_FLAGS);
  installNavigatorGpu(gpu);
  const adapterObject = await gpu.requestAdapter();
  if (!adapterObject) throw new Error('no WebGPU adapter: is a Vulkan driver installed (VK_ICD_FILENAMES)?');
  instances.push(adapterObject);
  const info = adapterObject.info;
  const adapter =
    [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ') ||
    'unknown adapter';
  const device = await createTrainingDevice(adapterObject);
  const distro = createWebGpuBackend(device, { chunk: o.chunk, description: adapter });
  let released = false;
  const backend = new WebGpuTrainingBackend({
    config: o.config,
    seqLen: o.seqLen,
    device,
    distro,
    maxRows: o.maxRows,
    description: `onnxruntime-web webgpu (${adapter})`,
    ...(o.graphCapture !== undefined ? { graphCapture: o.graphCapture } : {}),
    ...(o.log ? { log: o.log } : {}),
    onDispose: () => {
      if (released) return;
      released = true;
      distro.destroy();
      device.destroy();
    },
  });
  return { device, distro, backend, adapter, dispose: () => backend.dispose() };
}

/** Host parameters as tensors on the resident device, in the shapes the backend's graph gives them. */
export function residentParameters(
  gpu: Pick<NodeGpu, 'backend' | 'distro'>,
  params: ReadonlyMap<string, Float32Array>,
): Map<string, DistroTensor> {
  return new Map(
    [...params].map(([name, data]) => {
      const shape = gpu.backend.shapes.get(name);
      if (!shape) throw new Error(`the model has no parameter ${name}`);
      return [name, gpu.distro.tensor(shape, data)];
    }),
  );
}
