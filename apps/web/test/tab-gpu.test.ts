// The tab's GPU (worker/tab-gpu.ts) trains through the shared resident backend module
// (@meshtrain/client/webgpu-training, the class node-trainer's `--device webgpu` uses too), here on a Dawn
// adapter in Node (SwiftShader) instead of a browser's: one graph-captured resident step moves only the token
// ids up and the loss down, and dispose releases the device.
import { create, globals } from 'webgpu';
import { compressionChunkOf, DEFAULT_RUN_TOML, parseRunConfig } from '@meshtrain/core';
import { WebGpuTrainingBackend } from '@meshtrain/client/webgpu-training';
import { initParameters, parameterSpecs, PRESETS } from '@meshtrain/model';
import { describe, expect, it } from 'vitest';
import type { DeviceProbe } from '../src/worker/protocol.ts';
import { openTabGpu } from '../src/worker/tab-gpu.ts';

const SEQ = 16;
const ROWS = 2;

describe('tab GPU', () => {
  it('trains resident through the shared backend class', async () => {
    if (!process.env.VK_ICD_FILENAMES)
      process.env.VK_ICD_FILENAMES = '/usr/lib/chromium/vk_swiftshader_icd.json';
    Object.assign(globalThis, globals);
    const gpu = create([]);
    // onnxruntime-web looks for navigator.gpu, as a browser has it.
    const nav = globalThis.navigator as Navigator & { gpu?: GPU };
    if (!nav.gpu) Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true });
    const adapter = await gpu.requestAdapter();
    expect(adapter).not.toBeNull();
    const toml = DEFAULT_RUN_TOML.replace(/^preset = .*$/m, 'preset = "micro"').replace(
      /^max_seq_len = .*$/m,
      `max_seq_len = ${SEQ}`,
    );
    const run = parseRunConfig(toml).config;
    const probe = {
      adapter: { vendor: 'test', architecture: '', device: '', description: 'dawn', isFallbackAdapter: true },
      microBatch: ROWS,
    } as DeviceProbe;
    let lost = false;
    const errors: string[] = [];
    const tab = await openTabGpu(adapter as GPUAdapter, probe, run, PRESETS.micro, {
      onError: (m) => errors.push(m),
      onLost: () => (lost = true),
      gate: async () => {},
      onStep: () => {},
    });
    expect(tab.backend).toBeInstanceOf(WebGpuTrainingBackend);
    expect(tab.distro.chunk).toBe(compressionChunkOf(run.model.LLM.optimizer));

    const init = initParameters(PRESETS.micro, 1);
    const params = new Map(
      parameterSpecs(PRESETS.micro).map((p) => [p.name, tab.distro.tensor(p.shape, init.get(p.name))]),
    );
    await tab.backend.loadParamTensors(params);
    const tokens = Int32Array.from({ length: ROWS * (SEQ + 1) }, (_, k) => (k * 5 + 1) % 256);
    const out = await tab.backend.trainStepResident(tokens, ROWS);
    expect(Number.isFinite(out.loss)).toBe(true);
    expect(out.grads.size).toBe(params.size);
    out.release();
    expect(tab.backend.stats).toMatchObject({
      hostParamBytes: 0,
      hostGradientBytes: 0,
      uploadBytes: tokens.byteLength,
      downloadBytes: 4,
      residentSteps: 1,
      capturedSteps: 1,
    });
    await tab.dispose();
    expect(errors).toEqual([]);
    expect(lost).toBe(false);
  }, 300_000);
});
