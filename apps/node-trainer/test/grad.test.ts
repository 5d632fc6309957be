// `node-trainer grad` end to end on micro: a real checkpoint directory and batch file, the CLI in a child
// process, its stdout and its gradients file checked against the independent float64 reference and across
// devices/dtypes.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRESETS, decodeSafetensors, parameterSpecs, tensorToFloat32 } from '@meshtrain/model';
import { afterAll, describe, expect, it } from 'vitest';
import { randomParams, randomTokens, relL2, webgpuAvailable } from '../../../packages/model/test/ort-util.ts';
import { referenceLlama } from '../../../packages/model/test/reference-llama.ts';
import { writeCheckpoint } from '../src/fsio/checkpoint.ts';

const BIN = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));
const config = PRESETS.micro;
const dir = mkdtempSync(join(tmpdir(), 'meshtrain-grad-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Weights are stored as F32, so the reference uses the same float32-rounded values.
const params = new Map([...randomParams(config, 5)].map(([k, v]) => [k, Float32Array.from(v)]));
const tokens = randomTokens(config, 2, 9, 6);
const batchFile = join(dir, 'batch.json');
writeFileSync(batchFile, JSON.stringify({ tokens }));
const ready = writeCheckpoint(join(dir, 'model'), config, params);

function grad(device: string, dtype: string, out: string) {
  const r = spawnSync(
    process.execPath,
    [
      BIN,
      'grad',
      '--model',
      join(dir, 'model'),
      '--batch',
      batchFile,
      '--device',
      device,
      '--dtype',
      dtype,
      '--out',
      join(dir, out),
    ],
    { encoding: 'utf8' },
  );
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function readGrads(file: string): Map<string, Float32Array> {
  const { tensors } = decodeSafetensors(readFileSync(join(dir, file)));
  return new Map([...tensors].map(([name, t]) => [name, tensorToFloat32(name, t)]));
}

describe('node-trainer grad (micro)', () => {
  it('float64 on the CPU: loss equals the plain-loop HF Llama reference; one gradient per parameter', async () => {
    await ready;
    const r = grad('cpu', 'float64', 'g64.safetensors');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const { loss } = JSON.parse(r.stdout) as { loss: number };
    const ref = referenceLlama(config, (n) => Float64Array.from(params.get(n) ?? []), tokens);
    expect(Math.abs(loss - ref.loss) / ref.loss).toBeLessThan(1e-10);
    const grads = readGrads('g64.safetensors');
    expect([...grads.keys()].sort()).toEqual(parameterSpecs(config).map((p) => p.name));
    for (const p of parameterSpecs(config))
      expect(grads.get(p.name)?.length).toBe(p.shape.reduce((a, b) => a * b, 1));
  });

  it('float32 on the CPU agrees with float64 to 1e-4 per tensor', async () => {
    await ready;
    const r = grad('cpu', 'float32', 'g32.safetensors');
    expect(r.status).toBe(0);
    const g64 = readGrads('g64.safetensors');
    const g32 = readGrads('g32.safetensors');
    for (const [name, g] of g64) expect(relL2(g32.get(name) ?? [], g), name).toBeLessThan(1e-4);
  });

  it.skipIf(!webgpuAvailable())('float32 on WebGPU agrees with float64 to 1e-4 per tensor', async () => {
    await ready;
    const r = grad('webgpu', 'float32', 'gw.safetensors');
    // (stderr may carry the Vulkan loader's XDG_RUNTIME_DIR notice, so only the exit code and stdout count.)
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toHaveProperty('loss');
    const g64 = readGrads('g64.safetensors');
    const gw = readGrads('gw.safetensors');
    for (const [name, g] of g64) expect(relL2(gw.get(name) ?? [], g), name).toBeLessThan(1e-4);
  });

  it('rejects float64 on WebGPU and out-of-vocabulary ids with a usage error', async () => {
    await ready;
    const r = grad('webgpu', 'float64', 'x.safetensors');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/float64 needs --device cpu/);
    writeFileSync(batchFile, JSON.stringify({ tokens: [[1, 2, 999]] }));
    const bad = grad('cpu', 'float32', 'x.safetensors');
    writeFileSync(batchFile, JSON.stringify({ tokens }));
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/tokens\[0\]\[2\] = 999/);
  });
});
