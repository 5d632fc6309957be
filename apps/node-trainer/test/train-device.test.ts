// `train --device auto`: CUDA when installed, else WebGPU only on a hardware adapter, else CPU, each with a
// reason; and the --gpu-memory micro-batch rule.
import { describe, expect, it } from 'vitest';
import { PRESETS } from '@meshtrain/model';
import {
  memoryShape,
  parseMemory,
  probeWebgpuAdapter,
  rowsForMemory,
  selectDevice,
} from '../src/backend/device.ts';

const hardware = async () => ({ name: 'nvidia ampere NVIDIA A10', software: false });
const swiftshader = async () => ({ name: 'google swiftshader SwiftShader driver 5.0.0', software: true });

describe('device selection', () => {
  it('prefers CUDA, then a hardware WebGPU adapter, and refuses software adapters for CPU', async () => {
    expect((await selectDevice('auto', { cuda: () => true, webgpu: hardware })).device).toBe('cuda');
    const gpu = await selectDevice('auto', { cuda: () => false, webgpu: hardware });
    expect(gpu).toMatchObject({ device: 'webgpu', adapter: 'nvidia ampere NVIDIA A10' });
    const soft = await selectDevice('auto', { cuda: () => false, webgpu: swiftshader });
    expect(soft.device).toBe('cpu');
    expect(soft.reason).toMatch(/software rasteriser/);
    const none = await selectDevice('auto', { cuda: () => false, webgpu: async () => null });
    expect(none).toMatchObject({ device: 'cpu', reason: 'auto: no CUDA provider and no WebGPU adapter' });
  });

  it('honours explicit requests and says what is missing', async () => {
    await expect(selectDevice('cuda', { cuda: () => false })).rejects.toThrow(
      /ONNXRUNTIME_NODE_INSTALL=cuda12/,
    );
    expect((await selectDevice('cpu')).device).toBe('cpu');
    const forced = await selectDevice('webgpu', { webgpu: swiftshader });
    expect(forced.device).toBe('webgpu');
    expect(forced.reason).toMatch(/software adapter/);
  });

  it("classifies this machine's real adapter (SwiftShader here: CPU)", async () => {
    const probe = await probeWebgpuAdapter();
    const choice = await selectDevice('auto');
    if (probe === null) expect(choice.device).not.toBe('webgpu');
    else if (probe.software) expect(choice.device).not.toBe('webgpu');
    else expect(['cuda', 'webgpu']).toContain(choice.device);
  }, 30_000);

  it('sizes micro-batches from --gpu-memory', () => {
    expect(parseMemory('6G')).toBe(6 * 2 ** 30);
    expect(parseMemory('512MiB')).toBe(512 * 2 ** 20);
    expect(() => parseMemory('lots')).toThrow(/--gpu-memory/);
    const shape = memoryShape(PRESETS.tiny, 128);
    const small = rowsForMemory(64 * 2 ** 20, shape, 256);
    const big = rowsForMemory(6 * 2 ** 30, shape, 256);
    expect(small).toBeGreaterThanOrEqual(1);
    expect(big).toBeGreaterThan(small);
    expect(rowsForMemory(2 ** 40, shape, 16)).toBe(16);
  });
});
