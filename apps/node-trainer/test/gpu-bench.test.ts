// bench:gpu's parts that must be right before they meet a GPU: kernel runs counted from a real ORT profile
// (one step, not two), bench/torch/llama_ref.py's reading of the spec and of the parameter files meshtrain
// writes (the same names and shapes as parameterSpecs, without torch), and, where `python3` (or
// MESHTRAIN_PYTHON) has torch, PyTorch's loss at step 0 equal to ORT's on the same inputs.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildTrainStep, parameterCount, parameterSpecs, PRESETS, type PresetName } from '@meshtrain/model';
import { afterAll, describe, expect, it } from 'vitest';
import {
  meshtrainLoss,
  probeTorch,
  runTorch,
  torchPython,
  torchSpec,
  writeTorchInputs,
} from '../../../bench/lib/torch-ref.ts';
import { sensitiveInputs, trainFeeds, trainInputs } from '../../../bench/lib/train-inputs.ts';
import { summarizeGpuTime } from '../../../bench/lib/gpu-time.ts';
import { countLastRun, kernelRunsPerStep, profileStep } from '../src/ort/dispatches.ts';

const SCRIPT = fileURLToPath(new URL('../../../bench/torch/llama_ref.py', import.meta.url));
const PYTHON = torchPython(process.env.MESHTRAIN_PYTHON);
const hasPython = spawnSync(PYTHON, ['-c', 'pass']).status === 0;
const dir = mkdtempSync(join(tmpdir(), 'meshtrain-gpu-bench-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function llamaRef(args: string[], input = '') {
  const r = spawnSync(PYTHON, [SCRIPT, ...args], { input, encoding: 'utf8' });
  return { status: r.status, out: JSON.parse(r.stdout.trim()) as Record<string, unknown> };
}

describe('kernel runs per step', () => {
  it('counts only the last model_run of a profile, by op type', () => {
    const node = (ts: number, op: string, name = `n${ts}_kernel_time`) => ({
      cat: 'Node',
      name,
      ts,
      dur: 1,
      args: { op_name: op },
    });
    const events = [
      { cat: 'Session', name: 'model_run', ts: 0, dur: 100 },
      node(10, 'MatMul'),
      node(20, 'Add'),
      { cat: 'Session', name: 'model_run', ts: 200, dur: 100 },
      node(210, 'MatMul'),
      node(220, 'MatMul'),
      node(230, 'Add', 'n230_fence_before'),
      node(240, 'Softmax'),
    ];
    expect(countLastRun(events).kernels).toEqual({ total: 3, byOp: { MatMul: 2, Softmax: 1 } });
    expect(() => countLastRun([node(1, 'Add')])).toThrow(/model_run/);
  });

  it("one micro train step on the CPU EP: a Softmax per layer and the loss's, its one Log, every run by op", async () => {
    const config = PRESETS.micro;
    const graph = buildTrainStep(config, { batchSize: 2, seqLen: 8, dtype: 'float32' });
    const feeds = trainFeeds(config, trainInputs(config, 2, 8), 2, 8);
    const runs = await kernelRunsPerStep(graph.onnx, feeds, { device: 'cpu' });
    expect(runs.byOp.Softmax).toBe(config.num_hidden_layers + 1);
    expect(runs.byOp.Log).toBe(1);
    expect(Object.values(runs.byOp).reduce((a, b) => a + b, 0)).toBe(runs.total);
    expect(runs.total).toBeGreaterThan(100);
  });
});

describe("a step's GPU time", () => {
  it('sums matmul time and rates it by the FLOPs given', () => {
    const t = summarizeGpuTime({ totalUs: 5000, byOpUs: { Add: 1000, Gemm: 3000, MatMul: 1000 } }, 8e9);
    expect(t).toEqual({
      total_ms: 5,
      matmul_ms: 4,
      matmul_share: 0.8,
      matmul_gflop: 8,
      matmul_gflop_per_s: 2000,
      by_op_ms: { Gemm: 3, Add: 1, MatMul: 1 },
    });
    expect(Object.keys(t.by_op_ms)).toEqual(['Gemm', 'Add', 'MatMul']);
    expect(summarizeGpuTime({ totalUs: 0, byOpUs: {} }, 1e9).matmul_gflop_per_s).toBeNull();
  });

  it('one micro train step on the WebGPU EP: every dispatching op GPU-timed, its matmuls among them', async () => {
    const config = PRESETS.micro;
    const graph = buildTrainStep(config, { batchSize: 2, seqLen: 8, dtype: 'float32' });
    const feeds = trainFeeds(config, trainInputs(config, 2, 8), 2, 8);
    const p = await profileStep(graph.onnx, feeds, { device: 'webgpu' });
    if (!p.gpu) throw new Error('no GPU time on WebGPU');
    expect(Object.keys(p.gpu.byOpUs).sort()).toEqual(Object.keys(p.runs.byOp).sort());
    const t = summarizeGpuTime(p.gpu, graph.matmulFlops);
    expect(t.matmul_ms).toBeGreaterThan(0);
    expect(t.matmul_share).toBeLessThan(1);
    expect(t.matmul_gflop_per_s).toBeGreaterThan(0);
  });
});

describe.skipIf(!hasPython)('bench/torch/llama_ref.py without torch', () => {
  for (const preset of ['micro', 'tiny', '20m', '125m'] as PresetName[])
    it(`--validate: ${preset}'s parameters have meshtrain's names, order and shapes`, () => {
      const spec = torchSpec(
        PRESETS[preset],
        { batch: 2, seq: 16, warmup: 1, steps: 2 },
        {
          phase: 'step',
          precision: 'f32',
        },
      );
      const { status, out } = llamaRef(['--validate', '-'], JSON.stringify(spec));
      expect(status).toBe(0);
      expect(out.parameters).toEqual(parameterSpecs(PRESETS[preset]));
      expect(out.parameter_count).toBe(parameterCount(PRESETS[preset]));
      expect((out.spec as { optimizer: unknown }).optimizer).toEqual(spec.optimizer);
    });

  it('--validate reads the files meshtrain writes and refuses ones that do not fit the spec', async () => {
    const inputs = join(dir, 'micro');
    await writeTorchInputs(inputs, { preset: 'micro', batch: 2, seq: 8 });
    const spec = (batch: number) =>
      JSON.stringify(
        torchSpec(
          PRESETS.micro,
          { batch, seq: 8, warmup: 0, steps: 1 },
          { phase: 'graph', precision: 'f32', inputs },
        ),
      );
    expect(llamaRef(['--validate', spec(2)]).status).toBe(0);
    const wrongBatch = llamaRef(['--validate', spec(3)]);
    expect(wrongBatch.status).toBe(1);
    expect(wrongBatch.out.error).toMatch(/tokens/);
    const manifest = join(inputs, 'manifest.json');
    const m = JSON.parse(readFileSync(manifest, 'utf8')) as { parameters: { shape: number[] }[] };
    (m.parameters[0] as { shape: number[] }).shape = [1, 1];
    writeFileSync(manifest, JSON.stringify(m));
    expect(llamaRef(['--validate', spec(2)]).out.error).toMatch(/names or shapes/);
  });

  it('rejects a spec it cannot run, naming the field', () => {
    const spec = torchSpec(
      PRESETS.micro,
      { batch: 2, seq: 100, warmup: 0, steps: 1 },
      {
        phase: 'step',
        precision: 'f32',
      },
    );
    const r = llamaRef(['--validate', JSON.stringify(spec)]);
    expect(r.status).toBe(1);
    expect(r.out.error).toMatch(/seq: 100 exceeds max_position_embeddings/);
  });
});

describe('PyTorch beside ORT', async () => {
  const torch = await probeTorch(PYTHON, SCRIPT);
  it.skipIf(!torch.available)("PyTorch's float32 loss equals the CPU EP's within 1e-5", async () => {
    if (!torch.available) return;
    for (const preset of ['micro', 'tiny'] as PresetName[]) {
      const config = PRESETS[preset];
      const inputs = sensitiveInputs(config, 2, 16);
      const dirOf = join(dir, `check-${preset}`);
      await writeTorchInputs(dirOf, { preset, batch: 2, seq: 16 }, inputs);
      const ortLoss = await meshtrainLoss(config, inputs, 2, 16);
      const spec = torchSpec(
        config,
        { batch: 2, seq: 16, warmup: 0, steps: 1 },
        {
          phase: 'graph',
          precision: 'f32',
          inputs: dirOf,
        },
      );
      const r = await runTorch<{ loss: number }>(torch, spec, 'check');
      expect(r.ok).toBe(true);
      if (r.ok) expect(Math.abs(r.value.loss - ortLoss) / ortLoss).toBeLessThan(1e-5);
    }
  });
});
