// `baseline --device webgpu`: the whole AdamW step on the resident GPU (onnxruntime-web's train step, clipping
// and AdamW in DisTrO's WGSL on one Dawn device, SwiftShader here) follows the host's AdamW over onnxruntime-node
// on the CPU step by step (float32 kernels, so close rather than bit-identical), and the held-out loss falls.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ByteTokenizer, PRESETS } from '@meshtrain/model';
import { prepareShards } from '@meshtrain/model/node';
import { runBaseline, TRAIN_DEFAULTS, type BaselineOptions } from '../src/commands/baseline.ts';

let root: string | undefined;
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe('baseline on the resident GPU', () => {
  it('tracks the host AdamW and lowers the held-out loss', async () => {
    root = await mkdtemp(join(tmpdir(), 'meshtrain-baseline-gpu-'));
    const data = join(root, 'data');
    const words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'house', 'big', 'red'];
    const docs = Array.from({ length: 20 }, (_, d) => {
      const text = Array.from(
        { length: 200 },
        (_, i) => words[(i * 7 + d * 3 + ((i * i) % 5)) % words.length],
      ).join(' ');
      return { id: `d${d}`, bytes: text.length, load: () => `${text}.` };
    });
    await prepareShards(docs, data, {
      tokenizer: new ByteTokenizer(),
      tokenBytes: 2,
      valFraction: 0.1,
      source: 'test',
    });
    const o = (device: 'cpu' | 'webgpu'): BaselineOptions => ({
      ...TRAIN_DEFAULTS,
      preset: 'micro',
      config: PRESETS.micro,
      device,
      steps: 6,
      batchSize: 2,
      seqLen: 16,
      lr: 1e-2,
      warmupSteps: 1,
      gradClip: 1,
      seed: 1,
      evalEvery: 6,
      evalBatches: 1,
    });
    const cpu = await runBaseline(o('cpu'), data);
    const gpu = await runBaseline(o('webgpu'), data);
    expect(gpu.result.train_loss).toHaveLength(6);
    gpu.result.train_loss.forEach((l, i) => expect(l).toBeCloseTo(cpu.result.train_loss[i]!, 2));
    expect(gpu.result.final_val_loss).toBeLessThan(gpu.result.evals[0]!.val_loss);
    expect(gpu.result.final_val_loss).toBeCloseTo(cpu.result.final_val_loss, 2);
  }, 600_000);
});
