// bench:quality's `sparseloco` method: the flags map onto the embedded default run (SparseLoCo) with --steps
// counted in inner steps, its bytes are compared with H fp32 gradients per result, AdamW trains exactly the
// inner steps' global batches, and a whole micro-preset run trains through the real clients and coordinator.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  assignBatches,
  DEFAULT_RUN_TOML,
  innerBatches,
  parseRunConfig,
  type BatchId,
  type RunConfig,
} from '@meshtrain/core';
import { ByteTokenizer, modelConfigForRun, parameterCount } from '@meshtrain/model';
import { prepareShards } from '@meshtrain/model/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  equalBatches,
  FP32_BYTES,
  globalBatches,
  innerStepBatches,
  peerTraffic,
  plannedBatches,
  sameBatches,
} from '../../../bench/lib/quality-accounting.ts';
import { baseRunFor, parseQualityFlags, sparseLoCoRunFor } from '../../../bench/lib/quality-config.ts';
import {
  METHODS,
  sparseLoCoVariants,
  type MethodContext,
  type MethodResult,
} from '../../../bench/lib/quality-methods.ts';
import { SharedOrt } from '../../../bench/lib/shared-ort.ts';
import { Progress } from '../src/progress/index.ts';
import { localDataSource } from '../src/net/local-data.ts';

/** The run's SparseLoCo table (it must be one). */
function sparseLoCoOf(run: RunConfig) {
  const opt = run.model.LLM.optimizer;
  if (!('SparseLoCo' in opt)) throw new Error('not a SparseLoCo run');
  return opt.SparseLoCo;
}
/** The optimizer table of the (first) run the sparseloco method trains for `argv`. */
const optimizerOf = (argv: string[]) =>
  sparseLoCoOf(sparseLoCoVariants({ flags: parseQualityFlags(argv) })[0]!.run);

describe('bench:quality sparseloco: flags → the default run', () => {
  it('the default flags train the embedded default run itself: 300 inner steps are 60 rounds of 5', () => {
    const flags = parseQualityFlags(['--method', 'adamw,sparseloco']);
    expect(flags.steps).toBe(300);
    expect(sparseLoCoRunFor(flags)).toEqual(parseRunConfig(DEFAULT_RUN_TOML).config);
  });

  it('--steps counts inner steps, --inner-steps sets H, and a partial round is refused', () => {
    const run = sparseLoCoRunFor(
      parseQualityFlags([
        '--method',
        'sparseloco',
        '--steps',
        '24',
        '--inner-steps',
        '3',
        '--preset',
        'micro',
      ]),
    );
    expect(run.config.total_steps).toBe(8);
    expect(sparseLoCoOf(run).inner_steps).toBe(3);
    // The inner schedule spans every inner step (docs/protocol.md "SparseLoCo rounds").
    expect(run.model.LLM.lr_schedule).toMatchObject({ Cosine: { total_steps: 24, warmup_steps: 20 } });
    expect(() => parseQualityFlags(['--method', 'sparseloco', '--steps', '302'])).toThrow(/multiple of 5/);
    expect(() =>
      parseQualityFlags(['--method', 'adamw,sparseloco', '--steps', '300', '--inner-steps', '7']),
    ).toThrow(/--steps 300.*multiple of 7/);
    // DisTrO alone has no rounds of H steps to fill.
    expect(parseQualityFlags(['--method', 'distro', '--steps', '302']).steps).toBe(302);
  });

  it('--lr is the inner peak, --topk, --chunk and --bits set the optimizer table (bits 1..8)', async () => {
    expect(
      optimizerOf(['--method', 'sparseloco', '--bits', '4', '--chunk', '32', '--topk', '16']),
    ).toMatchObject({
      quantization_bits: 4,
      compression_chunk: 32,
      compression_topk: 16,
      inner_steps: 5,
    });
    expect(() => parseQualityFlags(['--method', 'sparseloco', '--bits', '9'])).toThrow(/1\.\.8/);
    expect(() => parseQualityFlags(['--method', 'sparseloco', '--bits', '32'])).toThrow(/1\.\.8/);
    expect(() => parseQualityFlags(['--method', 'sparseloco,distro', '--bits', '4'])).toThrow(/1 or 32/);
    expect(parseQualityFlags(['--method', 'distro', '--bits', '32']).bits).toBe(32);
    // The variants the method trains: one per --topk × --lr, validated by core's parser.
    const flags = parseQualityFlags(['--method', 'sparseloco', '--lr', '1e-3,4e-3', '--topk', '8']);
    const runs = sparseLoCoVariants({ flags });
    expect(runs.map((v) => v.settings.topk)).toEqual([8, 8]);
    const cosine = runs.map(
      (v) => (v.run.model.LLM.lr_schedule as { Cosine: { base_lr: number; final_lr: number } }).Cosine,
    );
    expect(cosine[0]?.base_lr).toBeCloseTo(1e-3, 15);
    expect(cosine[0]?.final_lr).toBeCloseTo(1e-4, 15);
    expect(cosine[1]?.base_lr).toBeCloseTo(4e-3, 15);
    expect(runs[0]?.settings).toMatchObject({ rounds: 60, steps: 300, inner_steps: 5, bits: 1, chunk: 64 });
    // distro still trains its DisTrO variant: the two methods share only the shape.
    expect('Distro' in baseRunFor(flags).model.LLM.optimizer).toBe(true);
  });
});

describe('bench:quality sparseloco: accounting and order', () => {
  /** What 4 trainers train in `rounds` SparseLoCo rounds of H × 64 samples, as core assigns them. */
  function rounds(n: number, h: number) {
    const out: { step: number; batch: BatchId }[] = [];
    for (let r = 0; r < n; r++) {
      const seed = ((r + 7) * 2654435761).toString(16).padStart(16, '0');
      for (const a of assignBatches(['a', 'b', 'c', 'd'], seed, r * 64 * h, 64 * h))
        out.push({ step: r + 1, batch: a.batch });
    }
    return out;
  }

  it('a result stands for H fp32 gradients; its tokens are all H inner batches', () => {
    const t = peerTraffic(
      [
        { step: 1, batch: { start: 0, end: 79 }, bytes: 20_000, innerSteps: 5 },
        { step: 2, batch: { start: 400, end: 479 }, bytes: 20_400, innerSteps: 5 },
      ],
      128,
      1_082_496,
    );
    expect(t.optimizer_steps).toBe(10);
    expect(t.tokens).toBe(160 * 128);
    expect(t.bytes_per_token).toBeCloseTo(40_400 / (160 * 128), 12);
    expect(t.ratio_vs_fp32).toBeCloseTo((FP32_BYTES * 1_082_496 * 10) / 40_400, 9);
  });

  it("AdamW's step h of a round is the union of the trainers' h-th inner batches", () => {
    const h = 5;
    const trained = rounds(3, h);
    const order = innerStepBatches(trained, h);
    expect(order).toHaveLength(15);
    expect(order.every((b) => b.length === 64)).toBe(true);
    for (let r = 0; r < 3; r++)
      for (let i = 0; i < h; i++) {
        const want = trained
          .filter((t) => t.step === r + 1)
          .flatMap((t) => {
            const b = innerBatches(t.batch, h)[i] as BatchId;
            return Array.from({ length: b.end - b.start + 1 }, (_, j) => b.start + j);
          })
          .sort((x, y) => x - y);
        expect(order[r * h + i]).toEqual(want);
      }
    // Not the round's samples cut in consecutive slices: each trainer's interval is spread over the H steps.
    expect(order[0]).not.toEqual(Array.from({ length: 64 }, (_, j) => j));
    // Every round read H × 64 consecutive samples: the plan, counted in rounds.
    const ramp = {
      global_batch_size_start: 64,
      global_batch_size_end: 64,
      global_batch_size_warmup_tokens: 0,
      max_seq_len: 128,
      inner_steps: h,
    };
    expect(sameBatches(globalBatches(trained), plannedBatches(ramp, 3))).toBe(true);
    expect(plannedBatches(ramp, 2)[1]).toEqual(Array.from({ length: 320 }, (_, j) => 320 + j));
    expect(innerStepBatches(trained, 1)).toEqual(globalBatches(trained));
  });

  it('steps of unequal size are re-cut for AdamW, keeping the sample sequence', () => {
    const same = equalBatches(
      [
        [1, 2],
        [3, 4],
      ],
      2,
    );
    expect(same).toEqual({
      batches: [
        [1, 2],
        [3, 4],
      ],
      recut: false,
      dropped: 0,
    });
    expect(equalBatches([[1, 2, 3], [4], [5, 6, 7]], 2)).toEqual({
      batches: [
        [1, 2],
        [3, 4],
        [5, 6],
      ],
      recut: true,
      dropped: 1,
    });
  });
});

describe('bench:quality sparseloco: a micro run through the real clients', () => {
  let root: string;
  let ort: SharedOrt | null = null;
  const results: MethodResult[] = [];
  const logged: string[] = [];
  let parameters = 0;
  const H = 4;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'meshtrain-quality-sparseloco-'));
    const docs = Array.from({ length: 24 }, (_, d) => {
      const text = Array.from({ length: 600 }, (_, i) =>
        String.fromCharCode(97 + ((i * 7 + d * 5) % 26)),
      ).join('');
      return { id: `d${d}`, bytes: text.length, load: () => text };
    });
    const dataDir = join(root, 'data');
    await prepareShards(docs, dataDir, {
      tokenizer: new ByteTokenizer(),
      tokenBytes: 2,
      valFraction: 0.2,
      source: 'test',
    });
    // 5 rounds of H = 4 inner steps of 8 sequences, 2 peers (4 each per inner step).
    const flags = parseQualityFlags([
      '--method',
      'sparseloco,adamw',
      '--preset',
      'micro',
      '--peers',
      '2',
      '--steps',
      String(5 * H),
      '--inner-steps',
      String(H),
      '--batch-size',
      '8',
      '--seq-len',
      '16',
      '--eval-every',
      '4',
      '--threads',
      '1',
    ]);
    const base = baseRunFor(flags);
    const model = modelConfigForRun(base);
    const data = await localDataSource(dataDir, flags.seqLen, base.model.LLM.data_location);
    const heldOut = [{ tokens: data.dataset.val.batch([0, 1, 2, 3]), rows: 4 }];
    ort = new SharedOrt(model, flags.seqLen, base.meshtrain.micro_batch_size, {
      intraOpThreads: 1,
      spinning: false,
    });
    parameters = parameterCount(model);
    const ctx: MethodContext = {
      flags,
      base,
      model,
      parameters,
      dataDir,
      data,
      trainSamples: data.dataset.train.index.sampleCount,
      sampleOrder: data.order,
      heldOut,
      first16: heldOut,
      ort,
      recordedOrder: null,
      progress: (label, total) => new Progress(label, total, { stream: { isTTY: false, write: () => true } }),
      log: (line) => logged.push(line),
    };
    for (const name of ['sparseloco', 'adamw']) results.push(...(await METHODS[name]!.run(ctx)));
  }, 120_000);

  afterAll(async () => {
    await ort?.dispose();
    await rm(root, { recursive: true, force: true });
  });

  it('finishes with identical replicas and counts inner steps', () => {
    const s = results.find((r) => r.method === 'sparseloco') as MethodResult;
    expect(s.protocol).toMatchObject({ errors: [], resyncs: 0, replicas_identical: true });
    // The last round is the run's drain: 4 trained rounds of H inner steps.
    expect(s.trained_steps).toBe(4 * H);
    expect(s.settings).toMatchObject({ inner_steps: H, rounds: 5, steps: 5 * H });
    // Evaluations at applied inner steps (every 4), the last one at everything trained.
    expect(s.curve.map((c) => c.step)).toEqual([0, 4, 8, 12, 16]);
    expect(s.curve.at(-1)?.held_out_loss).toBe(s.held_out_loss);
    expect(s.held_out_loss).toBeLessThan(s.curve[0]!.held_out_loss);
    expect(s.data_order).toEqual({ source: 'network run', matches_plan: true, steps: 4 * H });
  });

  it('AdamW trains the same tokens in the same steps', () => {
    const s = results.find((r) => r.method === 'sparseloco') as MethodResult;
    const a = results.find((r) => r.method === 'adamw') as MethodResult;
    expect(a.trained_steps).toBe(s.trained_steps);
    expect(a.tokens_trained).toBe(s.tokens_trained);
    expect(s.tokens_trained).toBe(4 * H * 8 * 16);
    expect(a.data_order).toMatchObject({ source: 'network run', matches_plan: true, recut: false });
    expect(a.settings.data_order).toMatch(/the sparseloco run's global batches/);
  });

  it('bytes per token: a result stands for H fp32 gradients, far below them', () => {
    const s = results.find((r) => r.method === 'sparseloco') as MethodResult;
    const a = results.find((r) => r.method === 'adamw') as MethodResult;
    for (const p of s.peers ?? []) {
      expect(p.optimizer_steps).toBe(p.results * H);
      expect(p.ratio_vs_fp32).toBeCloseTo((FP32_BYTES * parameters * p.optimizer_steps) / p.bytes_sent, 9);
    }
    // The micro model's tensors are mostly smaller than a 64 × 64 chunk, so top-32 keeps a larger share
    // of them than at the default size: hundreds of times under fp32, not the tiny preset's ~1000.
    expect(s.ratio_vs_fp32).toBeGreaterThan(100);
    expect(s.ratio_vs_fp32).toBeLessThan(2000);
    // Against AdamW's fp32 data parallel per token: the same factor (every peer trains equal shares here).
    expect(a.bytes_per_token_per_peer / s.bytes_per_token_per_peer / s.ratio_vs_fp32).toBeCloseTo(1, 2);
  });
});
