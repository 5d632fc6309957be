// DisTrO benchmark: bytes one trainer sends per step for each model preset (encoded with core's wire codec,
// exactly the frame peers exchange), the ratio to sending fp32 gradients, and compress/apply throughput per
// backend in GB/s of float32 parameters. The WebGPU figures are also given as a fraction of the same device's
// buffer-to-buffer copy bandwidth for a buffer of the tensor's size, measured in the same run (the practical
// memory-bound ceiling), with the dispatches, submits, readbacks (mapAsync) and buffers one call issues.
// `apply` is a whole round's apply of `reps` peers' results, their aggregation included (on the device where
// the backend does it, else on the host); `apply_host_aggregate` the same with the host's aggregation on such
// a backend; `apply_device` the backend's decode and update alone on a pre-built aggregate. `outer_raw` is
// SparseLoCo's outer step as the default run takes it (raw domain, top-`--outer-topk` at 2 bits, `reps`
// peers): the whole call, results checked and decoded on the host, aggregated on the device on WebGPU;
// `outer_raw_host_aggregate` the same aggregated on the host. Prints exactly one JSON object with --json:
//   {"presets":{"tiny":{"params","bytes_per_step","ratio_vs_fp32"},…},"backends":{"cpu":{…},"webgpu":{…}}}
// Usage: npm run -s bench:distro -- --json [--chunk 64] [--topk 8] [--float-values] [--backends cpu,webgpu]
//   [--shape 512,512] [--reps 2] [--step tiny] [--outer-topk 64]
import {
  encodeTrainingResult,
  packSigns as packWireSigns,
  type DistroResult,
} from '../packages/core/src/index.ts';
import {
  aggregateTensor,
  applyResults,
  createCpuBackend,
  createWebGpuBackend,
  outerStep,
  quantize1bit,
  quantizeResult,
  tensorLayout,
  updateScalars,
  type DistroBackend,
  type DistroTensor,
  type QuantTensorResult,
  type TensorResult,
  type WebGpuDistroBackend,
} from '../packages/distro/src/index.ts';
import { parameterCount, parameterSpecs, PRESETS, type PresetName } from '../packages/model/src/index.ts';
import { dawnDevice } from '@meshtrain/distro/node';

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const CHUNK = Number(flag('chunk') ?? 64);
const TOPK = Number(flag('topk') ?? 8);
const ONE_BIT = !process.argv.includes('--float-values');
const BACKENDS = (flag('backends') ?? 'cpu,webgpu').split(',');
const JSON_OUT = process.argv.includes('--json');
/** The benchmarked tensor, e.g. `--shape 256,256` on a software adapter (default 512×512 there, 8192×8192 on a GPU). */
const SHAPE = flag('shape')?.split(',').map(Number);
const REPS = flag('reps') === undefined ? undefined : Number(flag('reps'));
/** Entries per chunk of the SparseLoCo results `outer_raw` applies (the default run's 64). */
const OUTER_TOPK = Number(flag('outer-topk') ?? 64);
/** With `--step tiny` (any preset): a whole step's compression per tensor and with compressAll. */
const STEP = flag('step') as PresetName | undefined;
const log = (msg: string): void => {
  if (!JSON_OUT) console.error(msg);
};

/** Bytes of one TrainingResult frame for `preset`: the exact layout with placeholder indices and values. */
function bytesPerStep(preset: PresetName): number {
  const tensors: DistroResult[] = parameterSpecs(PRESETS[preset]).map((s) => {
    const l = tensorLayout(s.shape, CHUNK);
    const k = Math.min(TOPK, l.totalk);
    const n = l.blocks * k;
    const indices =
      l.totalk <= 256 ? new Uint8Array(n) : l.totalk <= 65536 ? new Uint16Array(n) : new Uint32Array(n);
    for (let i = 0; i < n; i++) indices[i] = i % k; // distinct within each chunk, as top-k gives
    const values = new Float32Array(n).fill(1);
    return {
      xshape: [...l.xshape],
      totalk: l.totalk,
      indices,
      values: ONE_BIT ? packWireSigns(values) : { kind: 'f32', values },
    };
  });
  const frame = encodeTrainingResult(
    { runId: 'bench-run', step: 1000, batch: { start: 123_456, end: 123_471 }, trainerNonce: 1000, tensors },
    {
      maxFrameBytes: 2 ** 31,
      maxTensors: 1 << 16,
      maxElements: 2 ** 31,
      maxStringBytes: 4096,
      maxClients: 1,
    },
  );
  return frame.length;
}

const seeded = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648 - 0.5;
};

type Counts = Record<string, number>;
/** The WGSL backend's work counters (dispatches, submits, readbacks, buffers created) as a snapshot. */
function counters(be: DistroBackend): Counts | undefined {
  const s = (be as Partial<WebGpuDistroBackend>).stats;
  return s ? { ...s } : undefined;
}
function diff(after: Counts | undefined, before: Counts | undefined): Counts | undefined {
  if (!after || !before) return undefined;
  const keys = ['dispatches', 'submits', 'readbacks', 'buffersCreated'];
  return Object.fromEntries(keys.map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)]));
}

async function throughput(
  be: DistroBackend,
  shape: number[],
  reps: number,
): Promise<Record<string, number | Counts | undefined>> {
  const n = shape.reduce((a, b) => a * b, 1);
  const rnd = seeded(1);
  const data = Float32Array.from({ length: n }, rnd);
  const delta = be.tensor(shape, data);
  const params = be.tensor(shape, data);
  const probe = be.tensor([4]);
  await be.compress(delta, TOPK); // warm-up: pipelines, basis tables
  let c0 = counters(be);
  await be.compress(delta, TOPK);
  const compressCounts = diff(counters(be), c0);
  let t = performance.now();
  const peers: TensorResult[][] = [];
  for (let i = 0; i < reps; i++) {
    const r = await be.compress(delta, TOPK);
    peers.push([ONE_BIT ? quantize1bit(r) : r]);
  }
  const compress = (performance.now() - t) / reps;
  const applyMs = async (b: DistroBackend): Promise<number> => {
    applyResults(b, [params], peers.slice(0, 1), { lr: 1e-4 }); // warm-up: pipelines, kept buffers
    await be.read(probe);
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) applyResults(b, [params], peers, { lr: 1e-4, weightDecay: 0.1 }); // `reps` peers per round
    await be.read(probe); // queue order: this read completes after every apply above
    await be.finish();
    return (performance.now() - t0) / reps;
  };
  const apply = await applyMs(be);
  const applyHost = be.applyResults ? await applyMs({ ...be, applyResults: undefined }) : undefined;
  // The device part alone: the host's integer aggregation of the peers' results done once beforehand.
  const agg = aggregateTensor(
    tensorLayout(shape, be.chunk),
    peers.map((p) => p[0] as TensorResult),
  );
  const u = updateScalars(1e-4, 0.1);
  c0 = counters(be);
  be.applyAggregated(params, agg, u);
  await be.finish();
  const applyCounts = diff(counters(be), c0);
  await be.read(probe);
  t = performance.now();
  for (let i = 0; i < reps; i++) be.applyAggregated(params, agg, u);
  await be.read(probe);
  await be.finish();
  const applyKernel = (performance.now() - t) / reps;
  const outer = await outerRawMs(be, shape, params, probe, reps);
  for (const x of [delta, params, probe]) be.release(x);
  const gbps = (ms: number): number => +((n * 4) / (ms * 1e6)).toPrecision(3);
  log(
    `${be.description}: ${n} params, compress ${compress.toFixed(1)} ms, apply (${reps} peers) ${apply.toFixed(1)} ms, of which on the device ${applyKernel.toFixed(1)} ms`,
  );
  return {
    compress_gbps: gbps(compress),
    apply_gbps: gbps(apply),
    apply_device_gbps: gbps(applyKernel),
    compress_ms: +compress.toFixed(3),
    apply_ms: +apply.toFixed(3),
    apply_device_ms: +applyKernel.toFixed(3),
    per_compress: compressCounts,
    per_apply: applyCounts,
    ...(applyHost === undefined
      ? {}
      : { apply_host_aggregate_gbps: gbps(applyHost), apply_host_aggregate_ms: +applyHost.toFixed(3) }),
    outer_raw_gbps: gbps(outer.ms),
    outer_raw_ms: +outer.ms.toFixed(3),
    ...(outer.hostMs === undefined
      ? {}
      : {
          outer_raw_host_aggregate_gbps: gbps(outer.hostMs),
          outer_raw_host_aggregate_ms: +outer.hostMs.toFixed(3),
        }),
  };
}

/**
 * SparseLoCo's raw outer step of `reps` peers' results (each the top-OUTER_TOPK of its own random tensor, 2-bit)
 * on `params`, in ms per step; on a backend that aggregates on the device also with the host's aggregation.
 */
async function outerRawMs(
  be: DistroBackend,
  shape: number[],
  params: DistroTensor,
  probe: DistroTensor,
  reps: number,
): Promise<{ ms: number; hostMs?: number }> {
  const n = shape.reduce((a, b) => a * b, 1);
  const results: QuantTensorResult[][] = [];
  for (let p = 0; p < reps; p++) {
    const rnd = seeded(100 + p);
    const t = be.tensor(shape, Float32Array.from({ length: n }, rnd));
    results.push([quantizeResult(await be.selectTopk(t, OUTER_TOPK, 'raw'), 2)]);
    be.release(t);
  }
  const time = async (b: DistroBackend): Promise<number> => {
    outerStep(b, [params], results, { lr: 1e-3, domain: 'raw' }); // warm-up: pipelines, kept buffers
    await be.read(probe);
    const t = performance.now();
    for (let i = 0; i < reps; i++) outerStep(b, [params], results, { lr: 1e-3, domain: 'raw' });
    await be.read(probe); // queue order: completes after every step above
    return (performance.now() - t) / reps;
  };
  const ms = await time(be);
  if (!be.applyOuterResults) return { ms };
  return { ms, hostMs: await time({ ...be, applyOuterResults: undefined }) };
}

/**
 * A whole step's compression of `preset`'s parameters: `compress` per tensor (what a client loop does) against
 * `compressAll` (one submit and one readback for the step), with the work each issues.
 */
async function stepCompress(be: WebGpuDistroBackend, preset: PresetName): Promise<Record<string, unknown>> {
  const rnd = seeded(2);
  const specs = parameterSpecs(PRESETS[preset]);
  const ts = specs.map((s) =>
    be.tensor(s.shape, Float32Array.from({ length: s.shape.reduce((a, b) => a * b, 1) }, rnd)),
  );
  await be.compressAll(ts, TOPK); // warm-up: pipelines, bases, kept buffers
  let c0 = counters(be);
  let t = performance.now();
  for (const x of ts) await be.compress(x, TOPK);
  const loopMs = performance.now() - t;
  const loop = diff(counters(be), c0);
  c0 = counters(be);
  t = performance.now();
  await be.compressAll(ts, TOPK);
  const allMs = performance.now() - t;
  const all = diff(counters(be), c0);
  for (const x of ts) be.release(x);
  log(
    `${preset} step (${ts.length} tensors): compress per tensor ${loopMs.toFixed(1)} ms, compressAll ${allMs.toFixed(1)} ms`,
  );
  return {
    preset,
    tensors: ts.length,
    params: parameterCount(PRESETS[preset]),
    per_tensor_ms: +loopMs.toFixed(3),
    per_tensor: loop,
    compress_all_ms: +allMs.toFixed(3),
    compress_all: all,
  };
}

/** Device buffer-to-buffer copy of `bytes`, reads and writes both counted (as memory-bandwidth figures are). */
async function copyGbps(device: GPUDevice, bytes: number, times: number): Promise<number> {
  const size = Math.ceil(bytes / 4) * 4;
  const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const a = device.createBuffer({ size, usage });
  const b = device.createBuffer({ size, usage });
  const copy = async (k: number): Promise<number> => {
    const t = performance.now();
    const enc = device.createCommandEncoder();
    for (let i = 0; i < k; i++) enc.copyBufferToBuffer(a, 0, b, 0, size);
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    return performance.now() - t;
  };
  await copy(1);
  const ms = await copy(times);
  a.destroy();
  b.destroy();
  return +((2 * times * size) / (ms * 1e6)).toFixed(2);
}

const presets: Record<string, { params: number; bytes_per_step: number; ratio_vs_fp32: number }> = {};
for (const p of ['tiny', '20m', '125m', '1b'] as const) {
  const params = parameterCount(PRESETS[p]);
  const bytes = bytesPerStep(p);
  presets[p] = { params, bytes_per_step: bytes, ratio_vs_fp32: +((params * 4) / bytes).toFixed(1) };
  log(`${p}: ${params} params, ${bytes} B per step, ${presets[p]!.ratio_vs_fp32}× smaller than fp32`);
}

const backends: Record<string, Record<string, unknown>> = {};
if (BACKENDS.includes('cpu')) {
  backends.cpu = {
    device: 'CPU reference (TypeScript, 1 thread)',
    shape: `[${(SHAPE ?? [2048, 1024]).join(', ')}]`,
    ...(await throughput(createCpuBackend({ chunk: CHUNK }), SHAPE ?? [2048, 1024], REPS ?? 2)),
  };
}
if (BACKENDS.includes('webgpu')) {
  const dawn = await dawnDevice();
  if (!dawn) backends.webgpu = { error: 'no WebGPU adapter' };
  else {
    const shape = SHAPE ?? (dawn.software ? [512, 512] : [8192, 8192]);
    const be = createWebGpuBackend(dawn.device, { chunk: CHUNK, description: dawn.description });
    const reps = REPS ?? (dawn.software ? 2 : 8);
    const r = await throughput(be, shape, reps);
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    // Enough copies to move ≥ 64 MiB, so a small buffer's figure is not one submit's latency.
    const copy = await copyGbps(dawn.device, bytes, Math.min(64, Math.max(8, Math.ceil(2 ** 26 / bytes))));
    const ratio = (x: unknown): number => +((x as number) / copy).toPrecision(3);
    backends.webgpu = {
      device: dawn.description,
      software_adapter: dawn.software,
      shape: `[${shape.join(', ')}]`,
      ...r,
      copy_gbps: copy,
      compress_vs_copy: ratio(r.compress_gbps),
      apply_vs_copy: ratio(r.apply_gbps),
      apply_device_vs_copy: ratio(r.apply_device_gbps),
      outer_raw_vs_copy: ratio(r.outer_raw_gbps),
    };
    if (STEP) backends.webgpu.step = await stepCompress(be, STEP);
    be.destroy();
    dawn.device.destroy();
  }
}

const out = { chunk: CHUNK, topk: TOPK, quantize_1bit: ONE_BIT, presets, backends };
console.log(JSON_OUT ? JSON.stringify(out) : JSON.stringify(out, null, 2));
