// DisTrO benchmark: bytes one trainer sends per step for each model preset (encoded with core's wire codec,
// exactly the frame peers exchange), the ratio to sending fp32 gradients, and compress/apply throughput per
// backend in GB/s of float32 parameters. On a hardware GPU the WebGPU figures are also given as a fraction
// of that GPU's device-to-device copy bandwidth measured in the same run (the practical memory-bound ceiling).
// Prints exactly one JSON object with --json:
//   {"presets":{"tiny":{"params","bytes_per_step","ratio_vs_fp32"},…},"backends":{"cpu":{…},"webgpu":{…}}}
// Usage: npm run -s bench:distro -- --json [--chunk 64] [--topk 8] [--float-values] [--backends cpu,webgpu]
import {
  encodeTrainingResult,
  packSigns as packWireSigns,
  type DistroResult,
} from '../packages/core/src/index.ts';
import {
  applyResults,
  createCpuBackend,
  createWebGpuBackend,
  quantize1bit,
  tensorLayout,
  type DistroBackend,
  type TensorResult,
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

async function throughput(
  be: DistroBackend,
  shape: number[],
  reps: number,
): Promise<{ compress_gbps: number; apply_gbps: number }> {
  const n = shape.reduce((a, b) => a * b, 1);
  const rnd = seeded(1);
  const data = Float32Array.from({ length: n }, rnd);
  const delta = be.tensor(shape, data);
  const params = be.tensor(shape, data);
  const probe = be.tensor([4]);
  await be.compress(delta, TOPK); // warm-up: pipelines, basis tables
  let t = performance.now();
  const peers: TensorResult[][] = [];
  for (let i = 0; i < reps; i++) {
    const r = await be.compress(delta, TOPK);
    peers.push([ONE_BIT ? quantize1bit(r) : r]);
  }
  const compress = (performance.now() - t) / reps;
  applyResults(be, [params], peers.slice(0, 1), { lr: 1e-4 });
  await be.read(probe);
  t = performance.now();
  for (let i = 0; i < reps; i++) applyResults(be, [params], peers, { lr: 1e-4, weightDecay: 0.1 }); // `reps` peers per round
  await be.read(probe); // queue order: this read completes after every apply above
  await be.finish();
  const apply = (performance.now() - t) / reps;
  for (const x of [delta, params, probe]) be.release(x);
  const gbps = (ms: number): number => +((n * 4) / (ms * 1e6)).toFixed(4);
  log(
    `${be.description}: ${n} params, compress ${compress.toFixed(1)} ms, apply (${reps} peers) ${apply.toFixed(1)} ms`,
  );
  return { compress_gbps: gbps(compress), apply_gbps: gbps(apply) };
}

async function copyGbps(device: GPUDevice): Promise<number> {
  const bytes = 256 << 20;
  const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const a = device.createBuffer({ size: bytes, usage });
  const b = device.createBuffer({ size: bytes, usage });
  const copy = async (times: number): Promise<number> => {
    const t = performance.now();
    const enc = device.createCommandEncoder();
    for (let i = 0; i < times; i++) enc.copyBufferToBuffer(a, 0, b, 0, bytes);
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    return performance.now() - t;
  };
  await copy(1);
  const ms = await copy(8);
  a.destroy();
  b.destroy();
  // A copy reads and writes every byte: count both, as memory-bandwidth figures do.
  return +((2 * 8 * bytes) / (ms * 1e6)).toFixed(2);
}

const presets: Record<string, { params: number; bytes_per_step: number; ratio_vs_fp32: number }> = {};
for (const p of ['tiny', '20m', '125m', '1b'] as const) {
  const params = parameterCount(PRESETS[p]);
  const bytes = bytesPerStep(p);
  presets[p] = { params, bytes_per_step: bytes, ratio_vs_fp32: +((params * 4) / bytes).toFixed(1) };
  log(`${p}: ${params} params, ${bytes} B per step, ${presets[p]!.ratio_vs_fp32}× smaller than fp32`);
}

const backends: Record<string, Record<string, number | string | boolean>> = {};
if (BACKENDS.includes('cpu')) {
  backends.cpu = {
    device: 'CPU reference (TypeScript, 1 thread)',
    shape: '[2048, 1024]',
    ...(await throughput(createCpuBackend({ chunk: CHUNK }), [2048, 1024], 2)),
  };
}
if (BACKENDS.includes('webgpu')) {
  const dawn = await dawnDevice();
  if (!dawn) backends.webgpu = { error: 'no WebGPU adapter' };
  else {
    const shape = dawn.software ? [512, 512] : [8192, 8192];
    const be = createWebGpuBackend(dawn.device, { chunk: CHUNK, description: dawn.description });
    const r = await throughput(be, shape, dawn.software ? 2 : 8);
    const entry: Record<string, number | string | boolean> = {
      device: dawn.description,
      software_adapter: dawn.software,
      shape: `[${shape.join(', ')}]`,
      ...r,
    };
    if (!dawn.software) {
      const copy = await copyGbps(dawn.device);
      Object.assign(entry, {
        copy_gbps: copy,
        compress_vs_copy: +(r.compress_gbps / copy).toFixed(4),
        apply_vs_copy: +(r.apply_gbps / copy).toFixed(4),
      });
    }
    backends.webgpu = entry;
    be.destroy();
    dawn.device.destroy();
  }
}

const out = { chunk: CHUNK, topk: TOPK, quantize_1bit: ONE_BIT, presets, backends };
console.log(JSON_OUT ? JSON.stringify(out) : JSON.stringify(out, null, 2));
