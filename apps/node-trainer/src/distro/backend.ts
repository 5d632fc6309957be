// `--backend cpu|webgpu` → a DistroBackend (webgpu on Dawn; SwiftShader where no GPU driver is set up).
import { createCpuBackend, createWebGpuBackend, type DistroBackend } from '@meshtrain/distro';
import { CliError } from '../command.ts';
import { dawnDevice } from '@meshtrain/distro/node';

export async function openBackend(
  name: string | undefined,
  chunk: number,
): Promise<{ backend: DistroBackend; close(): void }> {
  if (name === undefined || name === 'cpu') return { backend: createCpuBackend({ chunk }), close() {} };
  if (name !== 'webgpu') throw new CliError(`--backend: expected cpu or webgpu, got '${name}'`);
  const dawn = await dawnDevice();
  if (!dawn)
    throw new CliError(
      '--backend webgpu: no WebGPU adapter (install a Vulkan driver, or chromium for SwiftShader)',
      1,
    );
  const backend = createWebGpuBackend(dawn.device, { chunk, description: dawn.description });
  return {
    backend,
    close() {
      backend.destroy();
      dawn.device.destroy();
    },
  };
}
