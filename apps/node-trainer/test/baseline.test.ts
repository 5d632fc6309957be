// A short baseline on the `micro` preset over a small prepared dataset: checks the command's contract
// (JSON only on stdout with --json, summary on stderr, curve shape) and that AdamW actually lowers the
// held-out loss. The full acceptance run (`--preset tiny --steps 300`) is too slow for unit tests.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ByteTokenizer } from '@meshtrain/model';
import type { BaselineResult } from '../src/commands/baseline.ts';
import { prepareShards } from '@meshtrain/model/node';

const bin = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));
let root: string | undefined;
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe('node-trainer baseline', () => {
  it('trains micro for a few steps, prints one JSON document, and the held-out loss falls', async () => {
    root = await mkdtemp(join(tmpdir(), 'meshtrain-baseline-'));
    const data = join(root, 'data');
    // 40 short documents of simple English-like text; 10% held out by document.
    const words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'house', 'big', 'red'];
    const docs = Array.from({ length: 40 }, (_, d) => {
      const text = Array.from(
        { length: 300 },
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

    const args = [
      bin,
      'baseline',
      '--preset',
      'micro',
      '--steps',
      '12',
      '--batch-size',
      '8',
      '--seq-len',
      '32',
    ];
    args.push(
      '--lr',
      '1e-2',
      '--warmup',
      '2',
      '--eval-every',
      '6',
      '--eval-batches',
      '2',
      '--data',
      data,
      '--out',
      join(root, 'ckpt'),
      '--json',
    );
    const { stdout, stderr, code } = await new Promise<{ stdout: string; stderr: string; code: number }>(
      (resolve) =>
        execFile(process.execPath, args, (err, stdout, stderr) =>
          resolve({ stdout, stderr, code: err ? 1 : 0 }),
        ),
    );
    expect(code, stderr).toBe(0);
    const result = JSON.parse(stdout) as BaselineResult; // nothing but JSON on stdout
    expect(result.train_loss).toHaveLength(12);
    expect(result.evals.map((e) => e.step)).toEqual([0, 6, 12]);
    expect(result.evals[0]!.val_loss).toBeGreaterThan(5); // ≈ ln 256 at init
    expect(result.final_val_loss).toBeLessThan(result.evals[0]!.val_loss - 1);
    expect(result.tokens_per_step).toBe(8 * 32);
    expect(result.tokens_per_second).toBeGreaterThan(0);
    expect(stderr).toMatch(/baseline micro: held-out loss .* in [\d.]+s total/);

    // node-trainer eval scores the written checkpoint on the same held-out batches: the same loss.
    const evaluated = await new Promise<{ stdout: string; code: number; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [bin, 'eval', '--checkpoint', join(root!, 'ckpt'), '--batch-size', '8', '--seq-len', '32'].concat([
          '--eval-batches',
          '2',
          '--data',
          data,
          '--json',
        ]),
        (err, stdout, stderr) => resolve({ stdout, stderr, code: err ? 1 : 0 }),
      ),
    );
    expect(evaluated.code, evaluated.stderr).toBe(0);
    const ev = JSON.parse(evaluated.stdout) as { held_out_loss: number; tokens: number };
    expect(ev.held_out_loss).toBeCloseTo(result.final_val_loss, 5);
    expect(ev.tokens).toBe(2 * 8 * 32);
  });
});
