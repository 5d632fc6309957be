// bench:gpu's backends: one entry each in BACKENDS, from a name to what builds it and runs its steps. Every
// phase runs in a child process of its own (bench/gpu.ts) and returns a Timed; the parent turns step times
// into tokens/s and adds the child's peak RSS and GPU memory, so an entry only builds and steps.
import {
  AdamW,
  buildTrainStep,
  clipGradNorm,
  PRESETS,
  type LlamaConfig,
  type PresetName,
} from '@meshtrain/model';
import type * as ort from 'onnxruntime-node';
import { openNodeGpu, residentParameters, type NodeGpu } from '../../apps/node-trainer/src/backend/gpu.ts';
import { ResidentAdamW } from '../../apps/node-trainer/src/backend/gpu-adamw.ts';
import { OrtTrainingBackend } from '../../apps/node-trainer/src/backend/ort-backend.ts';
import { TRAIN_DEFAULTS } from '../../apps/node-trainer/src/commands/baseline.ts';
import { profileStep, type StepProfile } from '../../apps/node-trainer/src/ort/dispatches.ts';
import { createSession } from '../../apps/node-trainer/src/ort/session.ts';
import { trainFeeds, trainInputs } from './train-inputs.ts';

export interface BenchCase {
  preset: PresetName;
  batch: number;
  seq: number;
  /** Untimed steps first (the first one compiles kernels and allocates). */
  warmup: number;
  /** Timed steps after the warmup. */
  steps: number;
  /** CPU EP intra-op threads (default: ORT's, one per physical core). */
  threads?: number;
}

/** The optimizer every backend's whole step runs, and PyTorch's torch.optim.AdamW with it. */
export const BENCH_ADAMW = {
  lr: TRAIN_DEFAULTS.lr,
  beta1: TRAIN_DEFAULTS.beta1,
  beta2: TRAIN_DEFAULTS.beta2,
  eps: TRAIN_DEFAULTS.eps,
  weightDecay: TRAIN_DEFAULTS.weightDecay,
  gradClip: 1,
};

export interface HostDeviceBytes {
  /** Bytes the host hands the device per step. */
  up: number;
  /** Bytes the device hands back per step. */
  down: number;
}

/** What a timed phase of one backend returns. */
export interface Timed {
  /** Wall time of each timed step, ms. */
  step_ms: number[];
  /** Session creation, parameter upload and the like before the first step, ms (what a backend builds lazily
   * falls in the first step instead). */
  setup_ms: number;
  /** The first warmup step, ms (kernel compilation included). */
  first_step_ms: number;
  /** Loss of the first step: at the seed-0 initialisation, the figure PyTorch's loss is checked against. */
  loss_first: number;
  loss_last: number;
  /** Host↔device traffic per step; null where the device is the host. */
  host_device_bytes: HostDeviceBytes | null;
}

/** One profiled train step (what it ran, its GPU time where the device times dispatches) and its matmul FLOPs. */
export type StepRuns = StepProfile & { matmulFlops: number };

export interface GpuBackend {
  description: string;
  /** Whether it drives the GPU (its children's GPU memory is sampled, it needs a WebGPU adapter). */
  gpu: boolean;
  /** The train-step graph alone: forward and backward, the loss and every gradient; no optimizer. */
  graph?: (c: BenchCase) => Promise<Timed>;
  /** The whole training step as the trainer runs it: the graph, gradient clipping and AdamW. */
  step: (c: BenchCase) => Promise<Timed>;
  /** Kernel runs of one train step and, on WebGPU, their GPU time, from ORT's profiler. */
  dispatches?: (c: BenchCase) => Promise<StepRuns>;
}

/** Times `warmup` then `steps` calls of `step` (each returns its loss). */
export async function timeSteps(
  c: Pick<BenchCase, 'warmup' | 'steps'>,
  step: () => Promise<number>,
): Promise<Omit<Timed, 'setup_ms' | 'host_device_bytes'>> {
  const losses: number[] = [];
  const times: number[] = [];
  for (let i = 0; i < c.warmup + c.steps; i++) {
    const t = performance.now();
    const loss = await step();
    times.push(performance.now() - t);
    if (!Number.isFinite(loss)) throw new Error(`step ${i}: loss is ${loss}`);
    losses.push(loss);
  }
  return {
    step_ms: times.slice(c.warmup),
    first_step_ms: times[0] ?? NaN,
    loss_first: losses[0] ?? NaN,
    loss_last: losses[losses.length - 1] ?? NaN,
  };
}

function tensorBytes(tensors: Iterable<ort.Tensor>): number {
  let n = 0;
  for (const t of tensors) if (t.location === 'cpu') n += (t.data as ArrayBufferView).byteLength;
  return n;
}

const bench = (c: BenchCase): { config: LlamaConfig; shape: { batchSize: number; seqLen: number } } => ({
  config: PRESETS[c.preset],
  shape: { batchSize: c.batch, seqLen: c.seq },
});

/**
 * onnxruntime-node on `device` as node-trainer runs it today: host tensors in and out of every step, the
 * whole step being OrtTrainingBackend's train step then clipGradNorm and AdamW on the host (baseline.ts).
 */
function ortNode(device: 'webgpu' | 'cpu'): GpuBackend {
  const cpuOptions = (c: BenchCase) => (c.threads !== undefined ? { intraOpThreads: c.threads } : {});
  return {
    description:
      device === 'webgpu'
        ? "onnxruntime-node's WebGPU EP; parameters uploaded and gradients downloaded every step, AdamW on the host"
        : "onnxruntime-node's CPU EP, AdamW on the host",
    gpu: device === 'webgpu',
    async graph(c) {
      const { config, shape } = bench(c);
      const feeds = trainFeeds(config, trainInputs(config, c.batch, c.seq), c.batch, c.seq);
      const t = performance.now();
      const graph = buildTrainStep(config, { ...shape, dtype: 'float32' });
      const session = await createSession(graph.onnx, { device, dtype: 'float32', ...cpuOptions(c) });
      const setup = performance.now() - t;
      let io: HostDeviceBytes = { up: 0, down: 0 };
      const timed = await timeSteps(c, async () => {
        const out = await session.run(feeds);
        io = { up: tensorBytes(Object.values(feeds)), down: tensorBytes(Object.values(out)) };
        return Number((out.loss as ort.Tensor).data[0]);
      });
      await session.release();
      return { ...timed, setup_ms: setup, host_device_bytes: device === 'webgpu' ? io : null };
    },
    async step(c) {
      const { config } = bench(c);
      const { params, tokens } = trainInputs(config, c.batch, c.seq);
      const t = performance.now();
      const backend = new OrtTrainingBackend({
        config,
        seqLen: c.seq,
        device,
        maxRows: c.batch,
        cpu: cpuOptions(c),
      });
      await backend.loadParams(params);
      const opt = new AdamW(params, BENCH_ADAMW);
      const setup = performance.now() - t;
      const paramBytes = 4 * [...params.values()].reduce((n, p) => n + p.length, 0);
      const timed = await timeSteps(c, async () => {
        const { loss, grads } = await backend.trainStep(tokens, c.batch);
        clipGradNorm(grads, BENCH_ADAMW.gradClip);
        opt.step(grads, BENCH_ADAMW.lr);
        return loss;
      });
      await backend.dispose();
      return {
        ...timed,
        setup_ms: setup,
        // OrtTrainingBackend binds every parameter and the token ids from host memory and fetches the loss and
        // every gradient (the graph phase measures the same contract from the tensors themselves).
        host_device_bytes:
          device === 'webgpu' ? { up: paramBytes + tokens.byteLength, down: 4 + paramBytes } : null,
      };
    },
    async dispatches(c) {
      const { config, shape } = bench(c);
      const feeds = trainFeeds(config, trainInputs(config, c.batch, c.seq), c.batch, c.seq);
      const graph = buildTrainStep(config, { ...shape, dtype: 'float32' });
      return { ...(await profileStep(graph.onnx, feeds, { device })), matmulFlops: graph.matmulFlops };
    },
  };
}

/** Host↔device bytes per step from the resident backend's own counters, over the `n` steps since `before`. */
function residentBytes(gpu: NodeGpu, before: { up: number; down: number }, n: number): HostDeviceBytes {
  const s = gpu.backend.stats;
  return { up: (s.uploadBytes - before.up) / n, down: (s.downloadBytes - before.down) / n };
}

/**
 * node-trainer's resident path (`--device webgpu`): onnxruntime-web's WebGPU EP and DisTrO's WGSL on one Dawn
 * device, graph-captured; parameters, gradients and AdamW's moments stay on the GPU, per step only the token
 * ids go up and the loss comes down.
 */
const resident: GpuBackend = {
  description:
    "onnxruntime-web's WebGPU EP on node-trainer's Dawn device, graph-captured; parameters, gradients and AdamW on the GPU",
  gpu: true,
  async graph(c) {
    const { config } = bench(c);
    const { params, tokens } = trainInputs(config, c.batch, c.seq);
    const t = performance.now();
    const gpu = await openNodeGpu({ config, seqLen: c.seq, maxRows: c.batch, chunk: 64 });
    await gpu.backend.loadParamTensors(residentParameters(gpu, params));
    const setup = performance.now() - t;
    const before = { up: gpu.backend.stats.uploadBytes, down: gpu.backend.stats.downloadBytes };
    const timed = await timeSteps(c, async () => {
      const out = await gpu.backend.trainStepResident(tokens, c.batch);
      out.release();
      return out.loss;
    });
    const io = residentBytes(gpu, before, c.warmup + c.steps);
    await gpu.dispose();
    return { ...timed, setup_ms: setup, host_device_bytes: io };
  },
  async step(c) {
    const { config } = bench(c);
    const { params, tokens } = trainInputs(config, c.batch, c.seq);
    const t = performance.now();
    const gpu = await openNodeGpu({ config, seqLen: c.seq, maxRows: c.batch, chunk: 64 });
    const opt = new ResidentAdamW(gpu, params, BENCH_ADAMW);
    const setup = performance.now() - t;
    const before = { up: gpu.backend.stats.uploadBytes, down: gpu.backend.stats.downloadBytes };
    const timed = await timeSteps(c, () => opt.step(tokens, c.batch, BENCH_ADAMW.lr));
    const io = residentBytes(gpu, before, c.warmup + c.steps);
    opt.release();
    await gpu.dispose();
    return { ...timed, setup_ms: setup, host_device_bytes: io };
  },
};

/** Backends by the name `--backend` selects and the report uses. */
export const BACKENDS: Record<string, GpuBackend> = {
  'resident-webgpu': resident,
  'ort-node-webgpu': ortNode('webgpu'),
  'ort-node-cpu': ortNode('cpu'),
};
