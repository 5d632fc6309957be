// bench:model — throughput and memory of the train-step graph (forward + backward, loss and every gradient)
// per onnxruntime-node backend. Each case runs in its own child process so its peak RSS is its own.
// Prints one JSON object on stdout (progress on stderr). `--json` prints nothing else.
//
//   npm run -s bench:model -- --json [--seconds S] [--only cpu|webgpu]
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import {
  PRESETS,
  type PresetName,
  buildTrainStep,
  initParameters,
  parameterCount,
  parameterSpecs,
} from '@meshtrain/model';
import {
  configureWebgpu,
  createSession,
  floatTensor,
  type Device,
} from '../apps/node-trainer/src/ort/session.ts';

interface Case {
  device: Device;
  preset: PresetName;
  batch: number;
  seq: number;
}

// Software WebGPU runs ~0.4 GFLOP/s (docs/architecture.md "Runtime notes"): keep its cases small enough to
// finish in seconds.
const CASES: Case[] = [
  { device: 'cpu', preset: 'micro', batch: 8, seq: 64 },
  { device: 'cpu', preset: 'tiny', batch: 8, seq: 128 },
  { device: 'cpu', preset: '20m', batch: 2, seq: 256 },
  { device: 'webgpu', preset: 'micro', batch: 1, seq: 32 },
  { device: 'webgpu', preset: 'tiny', batch: 1, seq: 32 },
];

interface CaseResult extends Case {
  dtype: 'float32';
  parameters: number;
  tokens_per_step: number;
  steps_timed: number;
  step_ms_median: number;
  tokens_per_s: number;
  session_create_ms: number;
  first_step_ms: number;
  peak_rss_mb: number;
  rss_delta_mb: number;
  onnx_bytes: number;
  graph_nodes: number;
}

const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

async function runCase(c: Case, seconds: number): Promise<CaseResult> {
  const config = PRESETS[c.preset];
  const rss0 = process.memoryUsage().rss;
  const graph = buildTrainStep(config, { batchSize: c.batch, seqLen: c.seq, dtype: 'float32' });
  const params = initParameters(config, 0);
  const feeds: Record<string, ort.Tensor> = {};
  for (const p of parameterSpecs(config))
    feeds[p.name] = floatTensor('float32', params.get(p.name) ?? [], p.shape);
  const ids = Int32Array.from({ length: c.batch * (c.seq + 1) }, (_, i) => (i * 7919) % config.vocab_size);
  feeds.tokens = new ort.Tensor('int32', ids, [c.batch, c.seq + 1]);

  let t = performance.now();
  const session = await createSession(graph.onnx, { device: c.device, dtype: 'float32' });
  const sessionMs = performance.now() - t;
  t = performance.now();
  const first = await session.run(feeds);
  const firstMs = performance.now() - t;
  if (!Number.isFinite(Number(first.loss?.data[0]))) throw new Error('non-finite loss');
  const times: number[] = [];
  const until = performance.now() + seconds * 1000;
  while (times.length < 3 || (performance.now() < until && times.length < 50)) {
    t = performance.now();
    await session.run(feeds);
    times.push(performance.now() - t);
  }
  await session.release();
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? NaN;
  const peak = process.resourceUsage().maxRSS * 1024; // kB → bytes
  return {
    ...c,
    dtype: 'float32',
    parameters: parameterCount(config),
    tokens_per_step: c.batch * c.seq,
    steps_timed: times.length,
    step_ms_median: Math.round(median * 10) / 10,
    tokens_per_s: Math.round((c.batch * c.seq * 1000) / median),
    session_create_ms: Math.round(sessionMs),
    first_step_ms: Math.round(firstMs),
    peak_rss_mb: mb(peak),
    rss_delta_mb: mb(peak - rss0),
    onnx_bytes: graph.onnx.length,
    graph_nodes: Object.values(graph.ops).reduce((a, b) => a + b, 0),
  };
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

if (arg('case') !== undefined) {
  // Child mode: one case, its result as JSON on stdout.
  const c = JSON.parse(arg('case') ?? '{}') as Case;
  const result = await runCase(c, Number(arg('seconds') ?? 3));
  process.stdout.write(JSON.stringify(result));
} else {
  const quiet = process.argv.includes('--json');
  const seconds = Number(arg('seconds') ?? 3);
  const only = arg('only');
  const webgpu = configureWebgpu();
  const results: (CaseResult | (Case & { error: string }))[] = [];
  for (const c of CASES) {
    if (only && c.device !== only) continue;
    if (c.device === 'webgpu' && !webgpu.icd) {
      results.push({ ...c, error: 'no Vulkan ICD for Dawn (set VK_ICD_FILENAMES)' });
      continue;
    }
    if (!quiet) process.stderr.write(`bench:model ${c.device} ${c.preset} B=${c.batch} T=${c.seq} … `);
    const child = spawnSync(
      process.execPath,
      [fileURLToPath(import.meta.url), '--case', JSON.stringify(c), '--seconds', String(seconds)],
      { encoding: 'utf8', env: process.env, maxBuffer: 1 << 24 },
    );
    try {
      const r = JSON.parse(child.stdout) as CaseResult;
      results.push(r);
      if (!quiet)
        process.stderr.write(
          `${r.tokens_per_s} tok/s, ${r.step_ms_median} ms/step, peak RSS ${r.peak_rss_mb} MB\n`,
        );
    } catch {
      const error = (child.stderr || `exit ${child.status}`).trim().split('\n').slice(-3).join(' | ');
      results.push({ ...c, error });
      if (!quiet) process.stderr.write(`failed: ${error}\n`);
    }
  }
  const report = {
    bench: 'model',
    what: 'train step (forward + backward: loss and all gradients), float32, median wall time per step',
    machine: {
      cpus: cpus().length,
      cpu_model: cpus()[0]?.model ?? 'unknown',
      node: process.versions.node,
      onnxruntime: ort.env.versions.node ?? '1.30.0',
    },
    backends: {
      cpu: 'onnxruntime-node CPUExecutionProvider',
      webgpu: webgpu.icd
        ? `onnxruntime-node WebGpuExecutionProvider on ${webgpu.software ? 'SwiftShader (software Vulkan on the CPU: placement/numerics only, not GPU speed)' : webgpu.icd}`
        : 'unavailable',
    },
    results,
    pytorch_ratio: 'pending: needs an NVIDIA GPU (see packages/model/README.md "Benchmarks")',
  };
  process.stdout.write(`${JSON.stringify(report, null, quiet ? 0 : 2)}\n`);
}
