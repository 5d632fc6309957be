// PyTorch beside meshtrain: bench/torch/llama_ref.py runs the same Llama (same shapes, init and tokens, read
// from files this module writes) with torch.optim.AdamW, in a `python3` of the machine's own, when it has
// torch. Nothing here installs anything: without python3 or torch the report says so.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildTrainStep, parameterSpecs, PRESETS, type LlamaConfig } from '@meshtrain/model';
import type * as ort from 'onnxruntime-node';
import { createSession } from '../../apps/node-trainer/src/ort/session.ts';
import { runJsonChild } from './child-json.ts';
import { BENCH_ADAMW, type BenchCase } from './gpu-backends.ts';
import { trainFeeds, trainInputs, type TrainInputs } from './train-inputs.ts';

export type TorchInfo =
  | { available: true; python: string; script: string; version: string; cuda: boolean; device: string }
  | { available: false; reason: string };

/** The script's path: `explicit`, else beside this file in the repository, else under the working directory. */
export function torchScript(explicit?: string): string | null {
  const candidates = [
    explicit,
    fileURLToPath(new URL('../torch/llama_ref.py', import.meta.url)),
    resolve('bench/torch/llama_ref.py'),
  ];
  return candidates.find((p): p is string => p !== undefined && existsSync(p)) ?? null;
}

/**
 * The Python to run the reference with: `explicit`, else the first of `python3` on PATH and Debian's own
 * `/usr/bin/python3` (where `python3-torch` installs) that imports torch, else `python3`.
 */
export function torchPython(explicit?: string): string {
  if (explicit) return explicit;
  const candidates = ['python3', '/usr/bin/python3'];
  return (
    candidates.find((p) => spawnSync(p, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0) ??
    'python3'
  );
}

/** Whether `python` runs and imports torch, and on what device llama_ref.py will run. */
export async function probeTorch(python: string, script: string | null): Promise<TorchInfo> {
  if (!script)
    return { available: false, reason: 'bench/torch/llama_ref.py not found (pass --torch-script PATH)' };
  const r = await runJsonChild<{
    ok: boolean;
    torch?: string;
    cuda?: boolean;
    device?: string;
    error?: string;
  }>(python, [script, '--probe']);
  if (!r.ok) return { available: false, reason: `${python}: ${r.error}` };
  if (!r.value.ok || !r.value.torch)
    return { available: false, reason: r.value.error ?? 'torch not importable' };
  return {
    available: true,
    python,
    script,
    version: r.value.torch,
    cuda: r.value.cuda === true,
    device: r.value.device ?? 'unknown',
  };
}

/**
 * meshtrain's seed-0 parameters and the benchmark's token ids as raw little-endian files plus manifest.json
 * (shapes, names, files): what llama_ref.py reads, so both frameworks start from the same numbers.
 */
export async function writeTorchInputs(
  dir: string,
  c: Pick<BenchCase, 'preset' | 'batch' | 'seq'>,
  inputs: TrainInputs = trainInputs(PRESETS[c.preset], c.batch, c.seq),
) {
  const config = PRESETS[c.preset];
  const { params, tokens } = inputs;
  await mkdir(dir, { recursive: true });
  const parameters = [];
  for (const [i, spec] of parameterSpecs(config).entries()) {
    const file = `p${String(i).padStart(4, '0')}.f32`;
    const data = params.get(spec.name) as Float32Array;
    await writeFile(join(dir, file), new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    parameters.push({ name: spec.name, shape: spec.shape, file });
  }
  await writeFile(
    join(dir, 'tokens.i32'),
    new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength),
  );
  const manifest = {
    format: 'meshtrain-f32le-v1',
    config,
    batch: c.batch,
    seq: c.seq,
    parameters,
    tokens: { file: 'tokens.i32', dtype: 'int32', shape: [c.batch, c.seq + 1] },
  };
  await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 1));
}

export type TorchPrecision = 'f32' | 'bf16-autocast';

/** The JSON spec llama_ref.py reads. */
export function torchSpec(
  config: LlamaConfig,
  c: Pick<BenchCase, 'batch' | 'seq' | 'warmup' | 'steps'>,
  o: { phase: 'graph' | 'step'; precision: TorchPrecision; inputs?: string },
) {
  return {
    config,
    batch: c.batch,
    seq: c.seq,
    warmup: c.warmup,
    steps: c.steps,
    phase: o.phase,
    precision: o.precision,
    device: 'auto',
    optimizer: {
      lr: BENCH_ADAMW.lr,
      betas: [BENCH_ADAMW.beta1, BENCH_ADAMW.beta2],
      eps: BENCH_ADAMW.eps,
      weight_decay: BENCH_ADAMW.weightDecay,
      grad_clip: BENCH_ADAMW.gradClip,
    },
    ...(o.inputs ? { inputs: o.inputs } : {}),
  };
}

export interface TorchTimed {
  ok: true;
  device: string;
  step_ms: number[];
  setup_ms: number;
  first_step_ms: number;
  loss_first: number;
  loss_last: number;
  peak_rss_mb: number;
  /** torch.cuda.max_memory_allocated (null on the CPU). */
  peak_gpu_allocated_mb: number | null;
  threads: number;
}

/** Runs llama_ref.py with `spec` on stdin (`--check`: the loss of one batch, nothing trained). */
export function runTorch<T>(
  t: Extract<TorchInfo, { available: true }>,
  spec: object,
  mode: 'time' | 'check',
  tick?: () => void,
) {
  const args = [t.script, ...(mode === 'check' ? ['--check'] : []), '-'];
  return runJsonChild<T>(t.python, args, { input: JSON.stringify(spec), ...(tick ? { tick } : {}) });
}

/** meshtrain's float32 loss of `inputs` (the loss-only graph on the CPU EP): the other side of `--check`. */
export async function meshtrainLoss(
  config: LlamaConfig,
  inputs: TrainInputs,
  batch: number,
  seq: number,
): Promise<number> {
  const graph = buildTrainStep(config, {
    batchSize: batch,
    seqLen: seq,
    dtype: 'float32',
    withGradients: false,
  });
  const session = await createSession(graph.onnx, { device: 'cpu', dtype: 'float32' });
  try {
    const out = await session.run(trainFeeds(config, inputs, batch, seq));
    return Number((out.loss as ort.Tensor).data[0]);
  } finally {
    await session.release();
  }
}
