// This tab's GPU as the trainer uses it: one GPUDevice, DisTrO's WGSL backend and onnxruntime-web's train
// step on that same device, so parameters and gradients stay in GPU buffers between steps.
import { compressionChunkOf, type RunConfig } from '@meshtrain/core';
import { createWebGpuBackend } from '@meshtrain/distro';
import type { WebGpuDistroBackend } from '@meshtrain/distro';
import type { LlamaConfig } from '@meshtrain/model';
import type { DeviceProbe } from './protocol.ts';
import { createTrainingDevice, WebGpuTrainingBackend } from '@meshtrain/client/webgpu-training';

export interface TabGpu {
  device: GPUDevice;
  distro: WebGpuDistroBackend;
  backend: WebGpuTrainingBackend;
  /** The adapter in words (vendor, architecture, description). */
  adapterName: string;
  dispose(): Promise<void>;
}

export interface TabGpuHooks {
  /** A WebGPU validation or out-of-memory error nobody caught. */
  onError(message: string): void;
  /** The device was lost (not by `dispose`). */
  onLost(message: string): void;
  /** Awaited before every train step (the volunteer's throttle). */
  gate(): Promise<void>;
  /** Each train step: its time and the sequences it trained on. */
  onStep(ms: number, rows: number): void;
}

export function adapterNameOf(probe: DeviceProbe): string {
  const a = probe.adapter;
  return [a.vendor, a.architecture, a.description].filter((s) => s !== '').join(' ') || 'unnamed adapter';
}

/** Opens the device and both backends for `config` (a DisTrO or SparseLoCo run: tabs train nothing else). */
export async function openTabGpu(
  adapter: GPUAdapter,
  probe: DeviceProbe,
  config: RunConfig,
  model: LlamaConfig,
  hooks: TabGpuHooks,
): Promise<TabGpu> {
  const chunk = compressionChunkOf(config.model.LLM.optimizer);
  if (chunk === null)
    throw new Error('this run uses neither DisTrO nor SparseLoCo; browser tabs train those runs only');
  const adapterName = adapterNameOf(probe);
  const device = await createTrainingDevice(adapter);
  device.addEventListener('uncapturederror', (ev) =>
    hooks.onError((ev as GPUUncapturedErrorEvent).error.message),
  );
  void device.lost.then((info) => {
    if (info.reason !== 'destroyed') hooks.onLost(info.message);
  });
  // DisTrO's WGSL on ORT's own device: parameters, optimizer state (DisTrO's momentum, or SparseLoCo's local
  // parameters, error feedback and AdamW moments) and gradients never leave the GPU between steps.
  const distro = createWebGpuBackend(device, {
    chunk,
    description: adapterName,
  });
  const backend = new WebGpuTrainingBackend({
    config: model,
    seqLen: config.model.LLM.max_seq_len,
    device,
    distro,
    maxRows: probe.microBatch,
    description: `onnxruntime-web webgpu (${adapterName})`,
    // Graph capture is the default; a device that refuses it trains uncaptured, and the console says so.
    log: (line) => console.warn(line),
    gate: () => hooks.gate(),
    onStep: (ms, rows) => hooks.onStep(ms, rows),
  });
  return {
    device,
    distro,
    backend,
    adapterName,
    async dispose() {
      await backend.dispose();
      distro.destroy();
      device.destroy();
    },
  };
}
