import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CheckpointError,
  PRESETS,
  SafetensorsError,
  encodeSafetensors,
  initParameters,
  parameterSpecs,
} from '@meshtrain/model';
import { readCheckpoint, writeCheckpoint } from '../src/fsio/checkpoint.ts';

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'meshtrain-ckpt-'));
  dirs.push(d);
  return d;
}
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const sameBits = (a: Float32Array, b: Float32Array) =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

describe('checkpoint directories', () => {
  it('writes config.json + model.safetensors and reads them back bit-exactly', async () => {
    const dir = await tempDir();
    const config = PRESETS.micro;
    const params = initParameters(config, 11);
    const written = await writeCheckpoint(dir, config, params);
    expect(written.weightsPath).toBe(join(dir, 'model.safetensors'));
    const back = await readCheckpoint(dir);
    expect(back.config).toEqual(config);
    for (const [name, data] of params) expect(sameBits(back.params.get(name)!, data), name).toBe(true);
    const json = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    expect(json.architectures).toEqual(['LlamaForCausalLM']);
    expect(json.num_key_value_heads).toBe(2);
  });

  it('reads HF sharded checkpoints through model.safetensors.index.json', async () => {
    const src = await tempDir();
    const config = PRESETS.micro;
    const params = initParameters(config, 3);
    await writeCheckpoint(src, config, params);
    const dir = await tempDir();
    await writeFile(join(dir, 'config.json'), await readFile(join(src, 'config.json')));
    const specs = parameterSpecs(config);
    const halves = [specs.slice(0, 10), specs.slice(10)];
    const weightMap: Record<string, string> = {};
    for (const [k, half] of halves.entries()) {
      const file = `model-0000${k + 1}-of-00002.safetensors`;
      const tensors = new Map(half.map((s) => [s.name, { shape: s.shape, data: params.get(s.name)! }]));
      await writeFile(join(dir, file), encodeSafetensors(tensors, { format: 'pt' }));
      for (const s of half) weightMap[s.name] = file;
    }
    await writeFile(
      join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ metadata: {}, weight_map: weightMap }),
    );
    const back = await readCheckpoint(dir);
    for (const [name, data] of params) expect(sameBits(back.params.get(name)!, data), name).toBe(true);
  });

  it('reports missing and corrupt files with the path', async () => {
    const empty = await tempDir();
    await expect(readCheckpoint(empty)).rejects.toThrow(/config\.json: not found/);
    const dir = await tempDir();
    await writeCheckpoint(dir, PRESETS.micro, initParameters(PRESETS.micro, 1));
    const bytes = await readFile(join(dir, 'model.safetensors'));
    await writeFile(join(dir, 'model.safetensors'), bytes.subarray(0, bytes.length - 100));
    const err = await readCheckpoint(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SafetensorsError);
    expect((err as SafetensorsError).code).toBe('truncated');
    expect((err as Error).message).toContain(join(dir, 'model.safetensors'));
    await writeFile(join(dir, 'config.json'), JSON.stringify({ ...PRESETS.micro, num_hidden_layers: 2 }));
    await writeFile(join(dir, 'model.safetensors'), bytes);
    await expect(readCheckpoint(dir)).rejects.toBeInstanceOf(CheckpointError);
    await rm(join(dir, 'model.safetensors'));
    await expect(readCheckpoint(dir)).rejects.toThrow(/neither model\.safetensors nor/);
  });
});
