// bench:gpu — what a GPU's worth of training costs each backend, per preset: tokens/s of the train-step graph
// alone and of the whole step (optimizer included), host↔device bytes and kernel runs per step, on WebGPU the
// step's GPU time per op and its matmuls' FLOP/s, peak host RSS and GPU memory; with --torch, the same model,
// batch and AdamW in PyTorch on the same machine, its loss at step 0 checked against meshtrain's, and the
// ratios. Each phase of each case runs in a child process of its
// own. Prints one JSON object on stdout (progress on stderr; `--json` prints nothing else).
//
//   npm run -s bench:gpu -- --json [--preset tiny,20m,125m] [--backend resident-webgpu,ort-node-webgpu,ort-node-cpu]
//     [--batch B] [--seq T] [--warmup W] [--steps N] [--threads N] [--no-dispatches] [--quick]
//     [--torch [--python python3] [--torch-script bench/torch/llama_ref.py]]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parameterCount, PRESETS, type PresetName } from '@meshtrain/model';
import { probeWebgpuAdapter } from '../apps/node-trainer/src/backend/device.ts';
import { configureWebgpu } from '../apps/node-trainer/src/ort/session.ts';
import { machineInfo, mb, peakRssBytes, runJsonChild } from './lib/child-json.ts';
import {
  BACKENDS,
  BENCH_ADAMW,
  type BenchCase,
  type HostDeviceBytes,
  type StepRuns,
  type Timed,
} from './lib/gpu-backends.ts';
import { gpuMemorySampler, nvidiaGpuName } from './lib/gpu-memory.ts';
import { summarizeGpuTime } from './lib/gpu-time.ts';
import { sensitiveInputs } from './lib/train-inputs.ts';
import {
  meshtrainLoss,
  probeTorch,
  runTorch,
  torchPython,
  torchScript,
  torchSpec,
  writeTorchInputs,
  type TorchInfo,
  type TorchPrecision,
  type TorchTimed,
} from './lib/torch-ref.ts';

/** The shapes issue 20's H100 table was measured at. */
const DEFAULT_SHAPES: Record<string, { batch: number; seq: number }> = {
  tiny: { batch: 64, seq: 128 },
  '20m': { batch: 16, seq: 256 },
  '125m': { batch: 8, seq: 512 },
};
/** `--quick`: small enough for SwiftShader (~0.4 GFLOP/s) to finish in minutes. */
const QUICK = { presets: ['tiny'], batch: 1, seq: 32, warmup: 1, steps: 2 };
/** Relative difference within which PyTorch's step-0 loss must equal meshtrain's. */
const LOSS_TOLERANCE = 1e-4;

type Phase = 'graph' | 'step' | 'dispatches';
type ChildJob = { kind: 'probe' } | { kind: 'phase'; backend: string; phase: Phase; case: BenchCase };

async function runChildJob(job: ChildJob): Promise<object> {
  if (job.kind === 'probe') return { adapter: await probeWebgpuAdapter() };
  const backend = BACKENDS[job.backend];
  const run = backend?.[job.phase];
  if (!run) throw new Error(`backend ${job.backend} has no ${job.phase} phase`);
  const result = await run(job.case);
  return { ...result, peak_rss_mb: mb(peakRssBytes()) };
}

const { values: flags } = parseArgs({
  options: {
    preset: { type: 'string' },
    backend: { type: 'string' },
    batch: { type: 'string' },
    seq: { type: 'string' },
    warmup: { type: 'string' },
    steps: { type: 'string' },
    threads: { type: 'string' },
    'no-dispatches': { type: 'boolean' },
    quick: { type: 'boolean' },
    torch: { type: 'boolean' },
    python: { type: 'string' },
    'torch-script': { type: 'string' },
    json: { type: 'boolean' },
    child: { type: 'string' },
    help: { type: 'boolean' },
  },
});

function int(name: string, value: string | undefined, fallback: number, min: number): number {
  const n = value === undefined ? fallback : Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name}: an integer ≥ ${min}, got '${value}'`);
  return n;
}

function list(value: string | undefined, fallback: string[], allowed: string[], name: string): string[] {
  const items = value === undefined ? fallback : value.split(',').filter(Boolean);
  for (const i of items)
    if (!allowed.includes(i)) throw new Error(`--${name}: ${i} is not one of ${allowed.join(', ')}`);
  return items;
}

interface PhaseSummary {
  tokens_per_s: number;
  step_ms_median: number;
  steps_timed: number;
  first_step_ms: number;
  setup_ms: number;
  loss_first: number;
  loss_last: number;
  peak_rss_mb: number;
  /** nvidia-smi's device memory in use above what it was before the child started, MiB. */
  gpu_memory_peak_mib: number | null;
  host_device_bytes_per_step?: HostDeviceBytes | null;
  /** torch.cuda.max_memory_allocated. */
  torch_cuda_allocated_peak_mb?: number | null;
}

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

function summarize(
  t: Omit<Timed, 'host_device_bytes'>,
  tokensPerStep: number,
  peakRss: number,
  gpuMemory: number | null,
): PhaseSummary {
  const sorted = [...t.step_ms].sort((a, b) => a - b);
  const total = t.step_ms.reduce((a, b) => a + b, 0);
  const tps = (tokensPerStep * t.step_ms.length * 1000) / total;
  return {
    // Software WebGPU trains a few tokens a second: keep two decimals there.
    tokens_per_s: round(tps, tps >= 100 ? 0 : 2),
    step_ms_median: round(sorted[Math.floor(sorted.length / 2)] ?? NaN),
    steps_timed: t.step_ms.length,
    first_step_ms: Math.round(t.first_step_ms),
    setup_ms: Math.round(t.setup_ms),
    loss_first: t.loss_first,
    loss_last: t.loss_last,
    peak_rss_mb: round(peakRss),
    gpu_memory_peak_mib: gpuMemory,
  };
}

const quiet = flags.json === true;
const say = (line: string) => {
  if (!quiet) process.stderr.write(`${line}\n`);
};
const self = fileURLToPath(import.meta.url);

/** Runs `job` in a child, sampling GPU memory meanwhile when `gpu`. */
async function inChild<T>(job: ChildJob, gpu: boolean) {
  const sampler = gpu ? gpuMemorySampler() : null;
  const r = await runJsonChild<T>(process.execPath, [self, '--child', JSON.stringify(job)], {
    ...(sampler ? { tick: () => sampler.sample() } : {}),
  });
  return { r, gpuMemory: sampler?.peakMiB() ?? null };
}

type BackendReport = Record<string, unknown> & {
  graph?: PhaseSummary | { error: string };
  step?: PhaseSummary | { error: string };
};

async function measureBackend(name: string, c: BenchCase, skipDispatches: boolean): Promise<BackendReport> {
  const backend = BACKENDS[name];
  if (!backend) throw new Error(`no backend ${name}`);
  const tokensPerStep = c.batch * c.seq;
  const out: BackendReport = {};
  for (const phase of ['graph', 'step', 'dispatches'] as const) {
    if (!backend[phase] || (phase === 'dispatches' && skipDispatches)) continue;
    const started = performance.now();
    const { r, gpuMemory } = await inChild<(Timed | StepRuns) & { peak_rss_mb: number }>(
      { kind: 'phase', backend: name, phase, case: c },
      backend.gpu,
    );
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    if (!r.ok) {
      out[phase === 'dispatches' ? 'dispatches_per_step' : phase] = { error: r.error };
      say(`  ${name} ${phase}: failed (${seconds} s): ${r.error}`);
    } else if (phase === 'dispatches') {
      const { runs, gpu, matmulFlops } = r.value as StepRuns;
      out.dispatches_per_step = { total: runs.total, by_op: runs.byOp };
      say(`  ${name} dispatches: ${runs.total} kernel runs per step (${seconds} s)`);
      if (gpu) {
        const t = summarizeGpuTime(gpu, matmulFlops);
        out.gpu_time_per_step = t;
        say(
          `  ${name} GPU time: ${t.total_ms} ms per step, matmuls ${t.matmul_ms} ms at ${t.matmul_gflop_per_s} GFLOP/s`,
        );
      }
    } else {
      const t = r.value as Timed & { peak_rss_mb: number };
      const s = summarize(t, tokensPerStep, t.peak_rss_mb, gpuMemory);
      out[phase] = { ...s, host_device_bytes_per_step: t.host_device_bytes };
      say(`  ${name} ${phase}: ${s.tokens_per_s} tok/s, ${s.step_ms_median} ms/step (${seconds} s)`);
    }
  }
  return out;
}

type TorchReady = Extract<TorchInfo, { available: true }>;

async function measureTorch(t: TorchReady, c: BenchCase, backends: Record<string, BackendReport>) {
  const config = PRESETS[c.preset];
  const tokensPerStep = c.batch * c.seq;
  const dir = await mkdtemp(join(tmpdir(), 'meshtrain-bench-gpu-'));
  try {
    await writeTorchInputs(dir, c);
    const out: Record<string, unknown> = {};
    const check = await runTorch<{ loss: number; device: string }>(
      t,
      torchSpec(config, c, { phase: 'graph', precision: 'f32', inputs: dir }),
      'check',
    );
    const meshtrain: Record<string, number> = {};
    for (const [name, b] of Object.entries(backends)) {
      const phase = b.graph && 'loss_first' in b.graph ? b.graph : b.step;
      if (phase && 'loss_first' in phase) meshtrain[name] = phase.loss_first;
    }
    if (check.ok) {
      const diffs = Object.values(meshtrain).map(
        (l) => Math.abs(l - check.value.loss) / Math.abs(check.value.loss),
      );
      const worst = diffs.length ? Math.max(...diffs) : null;
      out.loss_check = {
        what: `float32 loss at step 0 (meshtrain's seed-0 init, the same tokens): PyTorch against each backend's first step, relative tolerance ${LOSS_TOLERANCE}`,
        torch: check.value.loss,
        meshtrain,
        max_relative_difference: worst,
        ok: worst !== null && worst <= LOSS_TOLERANCE,
      };
      say(`  torch loss check: ${check.value.loss} vs ${JSON.stringify(meshtrain)}`);
    } else out.loss_check = { error: check.error };

    out.math_check = await mathCheck(t, c, join(dir, 'math'));

    const precisions: TorchPrecision[] = t.cuda ? ['f32', 'bf16-autocast'] : ['f32'];
    for (const precision of precisions) {
      const phases: Record<string, PhaseSummary | { error: string }> = {};
      for (const phase of ['graph', 'step'] as const) {
        const sampler = t.cuda ? gpuMemorySampler() : null;
        const r = await runTorch<TorchTimed>(
          t,
          torchSpec(config, c, { phase, precision, inputs: dir }),
          'time',
          sampler ? () => sampler.sample() : undefined,
        );
        if (!r.ok) {
          phases[phase] = { error: r.error };
          say(`  torch ${precision} ${phase}: failed: ${r.error}`);
          continue;
        }
        const s = summarize(r.value, tokensPerStep, r.value.peak_rss_mb, sampler?.peakMiB() ?? null);
        phases[phase] = {
          ...s,
          torch_cuda_allocated_peak_mb:
            r.value.peak_gpu_allocated_mb === null ? null : round(r.value.peak_gpu_allocated_mb),
        };
        say(`  torch ${precision} ${phase}: ${s.tokens_per_s} tok/s, ${s.step_ms_median} ms/step`);
      }
      out[precision] = phases;
    }
    if (!t.cuda) out['bf16-autocast'] = { skipped: 'no CUDA device: bf16 autocast is measured on CUDA only' };
    const torchF32 = out.f32 as Record<string, PhaseSummary | { error: string }>;
    out.after_steps_check = afterSteps(backends, torchF32.step, c.warmup + c.steps);
    out.ratio_to_torch_f32 = ratios(backends, torchF32);
    return out;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Both frameworks' float32 loss of the same small batch at `sensitiveInputs` (RoPE, mask, KV heads all count). */
async function mathCheck(t: TorchReady, c: BenchCase, dir: string) {
  const config = PRESETS[c.preset];
  const shape = { preset: c.preset, batch: 2, seq: Math.min(16, config.max_position_embeddings) };
  const inputs = sensitiveInputs(config, shape.batch, shape.seq);
  await writeTorchInputs(dir, shape, inputs);
  const mine = await meshtrainLoss(config, inputs, shape.batch, shape.seq);
  const spec = torchSpec(
    config,
    { ...shape, warmup: 0, steps: 1 },
    { phase: 'graph', precision: 'f32', inputs: dir },
  );
  const r = await runTorch<{ loss: number }>(t, spec, 'check');
  if (!r.ok) return { error: r.error };
  const diff = Math.abs(r.value.loss - mine) / Math.abs(mine);
  say(`  torch math check: ${r.value.loss} vs ${mine} (CPU EP)`);
  return {
    what: `float32 loss of ${shape.batch}×${shape.seq} tokens with meshtrain's init, matrices ×25 (attention far from uniform): PyTorch against onnxruntime-node's CPU EP, relative tolerance ${LOSS_TOLERANCE}`,
    torch: r.value.loss,
    meshtrain: mine,
    relative_difference: diff,
    ok: diff <= LOSS_TOLERANCE,
  };
}

/**
 * The whole step's loss after the same number of AdamW steps on the same batch in both frameworks: equal
 * (to float32 rounding, which the updates amplify) only if the optimizers' hyperparameters and order agree.
 */
function afterSteps(
  backends: Record<string, BackendReport>,
  torch: PhaseSummary | { error: string } | undefined,
  steps: number,
) {
  if (!torch || !('loss_last' in torch)) return { error: 'no PyTorch whole-step run' };
  const meshtrain: Record<string, number> = {};
  for (const [name, b] of Object.entries(backends))
    if (b.step && 'loss_last' in b.step) meshtrain[name] = b.step.loss_last;
  const diffs = Object.values(meshtrain).map(
    (l) => Math.abs(l - torch.loss_last) / Math.abs(torch.loss_last),
  );
  return {
    what: `loss of the last whole step after ${steps - 1} AdamW steps on the same batch (informational: float32 rounding differs)`,
    torch: torch.loss_last,
    meshtrain,
    max_relative_difference: diffs.length ? Math.max(...diffs) : null,
  };
}

/** meshtrain's tokens/s over PyTorch f32's, whole step against whole step and graph against graph. */
function ratios(
  backends: Record<string, BackendReport>,
  torch: Record<string, PhaseSummary | { error: string }>,
): Record<string, Record<string, number | null>> {
  const tps = (p: unknown) =>
    p && typeof p === 'object' && 'tokens_per_s' in p ? (p as PhaseSummary).tokens_per_s : null;
  const out: Record<string, Record<string, number | null>> = {};
  for (const [name, b] of Object.entries(backends)) {
    const r: Record<string, number | null> = {};
    for (const phase of ['step', 'graph'] as const) {
      const mine = tps(b[phase]);
      const theirs = tps(torch[phase]);
      r[phase] = mine !== null && theirs ? round(mine / theirs, 4) : null;
    }
    out[name] = r;
  }
  return out;
}

async function main() {
  const quick = flags.quick === true;
  const presets = list(
    flags.preset,
    quick ? QUICK.presets : Object.keys(DEFAULT_SHAPES),
    Object.keys(PRESETS),
    'preset',
  );
  const backends = list(flags.backend, Object.keys(BACKENDS), Object.keys(BACKENDS), 'backend');
  const warmup = int('warmup', flags.warmup, quick ? QUICK.warmup : 3, 0);
  const steps = int('steps', flags.steps, quick ? QUICK.steps : 10, 1);
  const threads = flags.threads === undefined ? undefined : int('threads', flags.threads, 0, 1);

  const webgpu = configureWebgpu();
  const wantsGpu = backends.some((b) => BACKENDS[b]?.gpu);
  const probe = wantsGpu
    ? await inChild<{ adapter: { name: string; software: boolean } | null }>({ kind: 'probe' }, false)
    : null;
  const adapter = probe?.r.ok ? probe.r.value.adapter : null;
  const nvidia = nvidiaGpuName();
  let torch: TorchInfo | null = null;
  if (flags.torch) {
    torch = await probeTorch(
      torchPython(flags.python ?? process.env.MESHTRAIN_PYTHON),
      torchScript(flags['torch-script']),
    );
    say(torch.available ? `torch ${torch.version} on ${torch.device}` : `torch unavailable: ${torch.reason}`);
  }

  const results = [];
  for (const preset of presets as PresetName[]) {
    const config = PRESETS[preset];
    const shape = DEFAULT_SHAPES[preset] ?? { batch: 8, seq: Math.min(128, config.max_position_embeddings) };
    const c: BenchCase = {
      preset,
      batch: int('batch', flags.batch, quick ? QUICK.batch : shape.batch, 1),
      seq: int('seq', flags.seq, quick ? QUICK.seq : shape.seq, 1),
      warmup,
      steps,
      ...(threads !== undefined ? { threads } : {}),
    };
    if (c.seq > config.max_position_embeddings)
      throw new Error(`--seq ${c.seq} exceeds ${preset}'s max_position_embeddings`);
    say(`bench:gpu ${preset} B=${c.batch} T=${c.seq}, ${warmup} warmup + ${steps} timed steps`);
    const measured: Record<string, BackendReport> = {};
    for (const name of backends) {
      if (BACKENDS[name]?.gpu && !adapter) {
        measured[name] = { error: 'no WebGPU adapter (is a Vulkan driver installed? VK_ICD_FILENAMES)' };
        continue;
      }
      measured[name] = await measureBackend(name, c, flags['no-dispatches'] === true);
    }
    results.push({
      preset,
      parameters: parameterCount(config),
      batch: c.batch,
      seq: c.seq,
      tokens_per_step: c.batch * c.seq,
      backends: measured,
      ...(torch?.available ? { torch: await measureTorch(torch, c, measured) } : {}),
    });
  }

  const report = {
    bench: 'gpu',
    what:
      'train step per backend, float32: `graph` = the train-step graph alone (forward + backward, loss and every ' +
      'gradient), `step` = the whole training step (graph, gradient clipping, AdamW); tokens/s over the timed ' +
      'steps after the warmup steps (steady state); each phase in its own process',
    machine: {
      ...machineInfo(),
      webgpu_adapter: adapter
        ? `${adapter.name}${adapter.software ? ' (software: placement and numerics only, not GPU speed)' : ''}`
        : null,
      vulkan_icd: webgpu.icd,
      nvidia_gpu: nvidia,
    },
    settings: {
      warmup_steps: warmup,
      timed_steps: steps,
      quick,
      adamw: { ...BENCH_ADAMW, lr_schedule: 'constant', weight_decay_on: 'matrices, not RMSNorm gains' },
      inputs: "meshtrain's seed-0 initialisation; token ids (i · 7919) mod vocab",
      gpu_memory:
        'gpu_memory_peak_mib: nvidia-smi device memory in use during the child above before it (driver context included); null without nvidia-smi',
      host_device_bytes:
        'bytes of host tensors bound to and fetched from the session per step (null on the CPU EP: the host is the device)',
      gpu_time:
        "gpu_time_per_step: GPU time of the profiled step's dispatches (ORT's timestamp queries, onnxruntime-node's WebGPU EP, the same WGSL programs as onnxruntime-web's), per op; matmul_gflop_per_s = the graph's MatMul/Gemm FLOPs (2·m·n·k) over their GPU time",
    },
    backends: Object.fromEntries(backends.map((b) => [b, BACKENDS[b]?.description])),
    torch: torch ?? { available: false, reason: 'not requested (--torch)' },
    results,
  };
  process.stdout.write(`${JSON.stringify(report, null, quiet ? 0 : 2)}\n`);
}

if (flags.help) {
  process.stdout.write(
    'npm run -s bench:gpu -- [--json] [--quick] [--preset tiny,20m,125m] [--backend ' +
      `${Object.keys(BACKENDS).join(',')}] [--batch B] [--seq T] [--warmup W] [--steps N] [--threads N] ` +
      '[--no-dispatches] [--torch [--python PYTHON] [--torch-script PATH]]\n' +
      `defaults: ${Object.entries(DEFAULT_SHAPES)
        .map(([p, s]) => `${p} ${s.batch}×${s.seq}`)
        .join(', ')}, 3 warmup + 10 timed steps; --quick: tiny 1×32, 1 + 2 steps\n`,
  );
} else if (flags.child !== undefined) {
  // Child mode: one job, its result as one JSON object on stdout. Exits explicitly: Dawn's threads may keep
  // the process alive after its last session is released.
  process.stdout.write(JSON.stringify(await runChildJob(JSON.parse(flags.child) as ChildJob)));
  process.exit(0);
} else {
  await main();
  process.exit(0);
}
