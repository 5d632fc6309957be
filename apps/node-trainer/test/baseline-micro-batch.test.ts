// baseline's gradient accumulation: a batch trained as equal micro-batches is the same AdamW run as the batch
// in one ORT run, up to float rounding (the mean of equal micro-batch means is the batch mean), on the real
// CPU EP; and the micro-batch must divide the batch.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ByteTokenizer, PRESETS } from '@meshtrain/model';
import { prepareShards } from '@meshtrain/model/node';
import { microBatchOf, runBaseline, TRAIN_DEFAULTS, type BaselineOptions } from '../src/commands/baseline.ts';

let root: string | undefined;
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

async function dataset(): Promise<string> {
  root = await mkdtemp(join(tmpdir(), 'meshtrain-micro-batch-'));
  const dir = join(root, 'data');
  const words = ['a', 'small', 'cat', 'saw', 'the', 'red', 'dog', 'run', 'home', 'and', 'sat'];
  const docs = Array.from({ length: 30 }, (_, d) => {
    const text = Array.from({ length: 200 }, (_, i) => words[(i * 5 + d * 7 + ((i * i) % 3)) % 11]).join(' ');
    return { id: `d${d}`, bytes: text.length, load: () => `${text}.` };
  });
  await prepareShards(docs, dir, {
    tokenizer: new ByteTokenizer(),
    tokenBytes: 2,
    valFraction: 0.1,
    source: 'test',
  });
  return dir;
}

describe('baseline micro-batches', () => {
  it('trains the same run as the whole batch, up to rounding', async () => {
    const data = await dataset();
    const o: BaselineOptions = {
      ...TRAIN_DEFAULTS,
      preset: 'micro',
      config: PRESETS.micro,
      device: 'cpu',
      steps: 4,
      batchSize: 8,
      seqLen: 32,
      lr: 1e-2,
      warmupSteps: 1,
      gradClip: 1.0,
      seed: 3,
      evalEvery: 2,
      evalBatches: 2,
    };
    const whole = await runBaseline(o, data);
    const quarters = await runBaseline({ ...o, microBatch: 2 }, data);
    expect(whole.result.micro_batch).toBe(8);
    expect(quarters.result.micro_batch).toBe(2);
    quarters.result.train_loss.forEach((l, i) =>
      expect(l).toBeCloseTo(whole.result.train_loss[i] as number, 4),
    );
    quarters.result.evals.forEach((e, i) =>
      expect(e.val_loss).toBeCloseTo(whole.result.evals[i]?.val_loss as number, 4),
    );
    // Training moved the parameters, and both runs moved them the same way: the runs' difference is small
    // against the movement, in L2 over every parameter (AdamW turns float32 rounding in a near-zero gradient
    // into a full lr-sized step for that entry, so a per-entry maximum says little).
    let moved = 0;
    let apart = 0;
    const init = (await runBaseline({ ...o, steps: 1, lr: 1e-12 }, data)).params;
    for (const [name, p] of whole.params) {
      const q = quarters.params.get(name) as Float32Array;
      const p0 = init.get(name) as Float32Array;
      for (let i = 0; i < p.length; i++) {
        moved += ((p[i] as number) - (p0[i] as number)) ** 2;
        apart += ((p[i] as number) - (q[i] as number)) ** 2;
      }
    }
    expect(Math.sqrt(moved)).toBeGreaterThan(1);
    expect(Math.sqrt(apart)).toBeLessThan(Math.sqrt(moved) / 1000);
  }, 120_000);

  it('takes only divisors of the batch', () => {
    expect(microBatchOf({ batchSize: 8 })).toBe(8);
    expect(microBatchOf({ batchSize: 8, microBatch: 4 })).toBe(4);
    expect(() => microBatchOf({ batchSize: 8, microBatch: 3 })).toThrow(/divisor/);
    expect(() => microBatchOf({ batchSize: 8, microBatch: 0 })).toThrow(/divisor/);
  });
});
