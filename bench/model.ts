// bench:model — throughput and memory of the train-step graph (forward + backward, loss and every gradient)
// per onnxruntime-node backend. Each case runs in its own child process so its peak RSS is its own.
// Prints one JSON object on stdout (progress on stderr). `--json` prints nothing else.
//
//   npm run -s bench:model -- --json [--seconds S] [--only cpu|webgpu]
import { fileURLToPath } from 'node:url';
import { PRESETS, type PresetName, buildTrainStep, parameterCount } from '@meshtrain/model';
import { configureWebgpu, createSession, type Device } from '../apps/node-trainer/src/ort/session.ts';
import { machineInfo, mb, peakRssBytes, runJsonChild } from './lib/child-json.ts';
import { trainFeeds, trainInputs } from './lib/train-inputs.ts';

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

async function runCase(c: Case, seconds: number): Promise<CaseResult> {
  const config = PRESETS[c.preset];
  const rss0 = process.memoryUsage().rss;
  const graph = buildTrainStep(config, { batchSize: c.batch, seqLen: c.seq, dtype: 'float32' });
  const feeds = trainFeeds(config, trainInputs(config, c.batch, c.seq), c.batch, c.seq);

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
  const peak = peakRssBytes();
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
    const child = await runJsonChild<CaseResult>(process.execPath, [
      fileURLToPath(import.meta.url),
      '--case',
      JSON.stringify(c),
      '--seconds',
      String(seconds),
    ]);
    if (child.ok) {
      const r = child.value;
      results.push(r);
      if (!quiet)
        process.stderr.write(
          `${r.tokens_per_s} tok/s, ${r.step_ms_median} ms/step, peak RSS ${r.peak_rss_mb} MB\n`,
        );
    } else {
      results.push({ ...c, error: child.error });
      if (!quiet) process.stderr.write(`failed: ${child.error}\n`);
    }
  }
  const report = {
    bench: 'model',
    what: 'train step (forward + backward: loss and all gradients), float32, median wall time per step',
    machine: machineInfo(),
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
