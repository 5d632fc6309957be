// node-trainer baseline: single-process AdamW on the default dataset, the quality bar every DisTrO run is
// measured against. On the CPU the train step is the ONNX graph from @meshtrain/model run in onnxruntime-node
// and the optimizer runs in TypeScript on the host copies of the parameters; with `--device webgpu` the whole
// step stays on the GPU (backend/gpu-adamw.ts: the resident backend and DisTrO's WGSL AdamW on one device).
import {
  AdamW,
  buildTrainStep,
  type BuiltGraph,
  clipGradNorm,
  cosineLr,
  initParameters,
  parameterCount,
  shuffledOrder,
  type LlamaConfig,
  type Parameters,
} from '@meshtrain/model';
import type * as ort from 'onnxruntime-node';
import { CliError, type Command } from '../command.ts';
import { loadDataset, type LoadedSplit } from '@meshtrain/model/node';
import { writeCheckpoint } from '../fsio/checkpoint.ts';
import {
  dataFlag,
  datasetErrorsAsCli,
  floatFlag,
  intFlag,
  parseFlags,
  presetFlag,
} from '../options/index.ts';
import { createSession, type Device, type SessionOptions } from '../ort/session.ts';
import {
  describeFootprint,
  estimateFootprint,
  largestDivisorAtMost,
  memoryShape,
  parseMemory,
  rowsForBudget,
} from '../backend/device.ts';
import { trainingFootprint } from '../backend/memory-probe.ts';
import { openNodeGpu } from '../backend/gpu.ts';
import { ResidentAdamW } from '../backend/gpu-adamw.ts';
import { Progress } from '../progress/index.ts';

export interface BaselineOptions {
  preset: string;
  config: LlamaConfig;
  device: Device;
  steps: number;
  batchSize: number;
  seqLen: number;
  lr: number;
  warmupSteps: number;
  /** Final LR as a fraction of the peak. */
  lrFloor: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  gradClip: number;
  seed: number;
  evalEvery: number;
  evalBatches: number;
  /**
   * The training sample indices of each step's batch (`batchSize` of them), e.g. the samples a DisTrO run's
   * coordinator assigned that step, so both optimizers see the same data in the same order. Default: a
   * permutation of the training split seeded by `seed`, wrapping around after an epoch.
   */
  batchOrder?: (step: number) => readonly number[];
  /** CPU EP thread settings (ort/session.ts). */
  cpu?: Pick<SessionOptions, 'intraOpThreads' | 'spinning'>;
  /**
   * Rows per ORT run, a divisor of `batchSize` (default: `batchSize`). Below the batch size each step runs
   * `batchSize / microBatch` equal micro-batches and averages their losses and gradients, which is the
   * full batch's mean up to float rounding while the graph's activations shrink with the rows.
   */
  microBatch?: number;
}

export interface EvalPoint {
  step: number;
  /** Mean training loss over the steps since the previous eval point (null at step 0). */
  train_loss: number | null;
  val_loss: number;
}

export interface BaselineResult {
  preset: string;
  device: Device;
  parameters: number;
  steps: number;
  batch_size: number;
  seq_len: number;
  tokens_per_step: number;
  /** Rows per ORT run (gradient accumulation over batch_size / micro_batch runs). */
  micro_batch: number;
  optimizer: Record<string, number | string>;
  dataset: string;
  val_tokens_evaluated: number;
  /** Train loss of every step, in nats per token (per byte for the byte tokenizer). */
  train_loss: number[];
  evals: EvalPoint[];
  final_val_loss: number;
  tokens_per_second: number;
  train_seconds: number;
  total_seconds: number;
}

/** What an evaluation of the baseline's held-out batches needs. */
export type EvalOptions = Pick<
  BaselineOptions,
  'preset' | 'config' | 'device' | 'batchSize' | 'seqLen' | 'evalBatches' | 'cpu' | 'microBatch'
>;

/** Rows per session run, checked: a divisor of the batch size. */
export function microBatchOf(o: Pick<BaselineOptions, 'batchSize' | 'microBatch'>): number {
  const micro = o.microBatch ?? o.batchSize;
  if (!Number.isInteger(micro) || micro < 1 || o.batchSize % micro !== 0)
    throw new CliError(`micro-batch ${micro} must be a positive divisor of the batch size ${o.batchSize}`);
  return micro;
}

/** AdamW and schedule settings of the baseline (the quality bar); `lr` is the peak of the cosine. */
export const TRAIN_DEFAULTS = {
  lr: 1e-3,
  warmupSteps: 20,
  lrFloor: 0.1,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-8,
  weightDecay: 0.1,
};

function feeds(graph: BuiltGraph, params: Parameters, tokens: Int32Array, Tensor: typeof ort.Tensor) {
  const out: Record<string, ort.Tensor> = {};
  for (const input of graph.inputs) {
    if (input.name === 'tokens') out.tokens = new Tensor('int32', tokens, input.shape);
    else {
      const data = params.get(input.name);
      if (!data) throw new Error(`train-step graph wants parameter ${input.name}, which the model lacks`);
      out[input.name] = new Tensor('float32', data, input.shape);
    }
  }
  return out;
}

/** Evenly spaced validation samples, fixed for the whole run so every eval point sees the same text. */
export function evalIndices(val: LoadedSplit, batches: number, batchSize: number): number[][] {
  const n = val.index.sampleCount;
  const want = Math.min(n, batches * batchSize);
  const rows = Array.from({ length: want }, (_, i) => Math.floor((i * n) / want));
  const out: number[][] = [];
  for (let b = 0; b + batchSize <= rows.length; b += batchSize) out.push(rows.slice(b, b + batchSize));
  return out;
}

/** The dataset and the fixed validation batches, checked against the model and the batch size. */
async function loadBaselineData(o: EvalOptions, dataDir: string) {
  const data = await loadDataset(dataDir, { seqLen: o.seqLen });
  if (data.manifest.vocab_size > o.config.vocab_size)
    throw new CliError(
      `dataset tokenizer '${data.manifest.tokenizer}' has ${data.manifest.vocab_size} ids; preset ${o.preset} only ${o.config.vocab_size}`,
    );
  const evalSets = evalIndices(data.val, o.evalBatches, o.batchSize);
  if (evalSets.length === 0)
    throw new CliError(
      `validation split has ${data.val.index.sampleCount} samples, fewer than one batch of ${o.batchSize}`,
    );
  if (data.train.index.sampleCount < o.batchSize)
    throw new CliError(
      `training split has only ${data.train.index.sampleCount} samples of ${o.seqLen + 1} tokens`,
    );
  return { data, evalSets };
}

type BaselineData = Awaited<ReturnType<typeof loadBaselineData>>;

/**
 * The train-step graph (with gradients) and the eval graph (loss only), each in its own ORT session, both at
 * the micro-batch's rows.
 */
async function baselineSessions(o: BaselineOptions) {
  const shape = { batchSize: microBatchOf(o), seqLen: o.seqLen, dtype: 'float32' as const };
  const trainGraph = buildTrainStep(o.config, shape);
  const evalGraph = buildTrainStep(o.config, { ...shape, withGradients: false });
  const trainSession = await createSession(trainGraph.onnx, { device: o.device, dtype: 'float32', ...o.cpu });
  const evalSession = await createSession(evalGraph.onnx, { device: o.device, dtype: 'float32', ...o.cpu });
  const Tensor = (await import('onnxruntime-node')).Tensor;
  return { trainGraph, evalGraph, trainSession, evalSession, Tensor };
}

type BaselineSessions = Awaited<ReturnType<typeof baselineSessions>>;

/** `rows` cut into consecutive runs of `micro` (a divisor of its length). */
function microBatches(rows: readonly number[], micro: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < rows.length; i += micro) out.push(rows.slice(i, i + micro));
  return out;
}

/**
 * Mean held-out loss of the current parameters over the fixed validation batches; a batch's loss is the
 * mean of its equal micro-batches' losses.
 */
async function evaluateBaseline(
  s: Pick<BaselineSessions, 'evalGraph' | 'evalSession' | 'Tensor'>,
  d: BaselineData,
  params: Parameters,
): Promise<number> {
  const micro = s.evalGraph.inputs.find((i) => i.name === 'tokens')?.shape[0] ?? 1;
  let sum = 0;
  let runs = 0;
  for (const batch of d.evalSets)
    for (const rows of microBatches(batch, micro)) {
      const out = await s.evalSession.run(feeds(s.evalGraph, params, d.data.val.batch(rows), s.Tensor));
      sum += Number((out.loss as ort.Tensor).data[0]);
      runs++;
    }
  return sum / runs;
}

/**
 * The held-out loss `baseline` reports, for any parameters of the preset (node-trainer eval): the same fixed
 * validation batches (`evalIndices`), the same loss-only graph.
 */
export async function heldOutLossOf(
  o: EvalOptions,
  dataDir: string,
  params: Parameters,
): Promise<{ loss: number; batches: number; tokens: number }> {
  const d = await loadBaselineData(o, dataDir);
  const shape = {
    batchSize: microBatchOf(o),
    seqLen: o.seqLen,
    dtype: 'float32' as const,
    withGradients: false,
  };
  const evalGraph = buildTrainStep(o.config, shape);
  const evalSession = await createSession(evalGraph.onnx, { device: o.device, dtype: 'float32', ...o.cpu });
  const Tensor = (await import('onnxruntime-node')).Tensor;
  const loss = await evaluateBaseline({ evalGraph, evalSession, Tensor }, d, params);
  return { loss, batches: d.evalSets.length, tokens: d.evalSets.length * o.batchSize * o.seqLen };
}

/**
 * Loss and gradients of a batch given as equal micro-batches: their means. The first run's output buffers
 * (fresh JS arrays, owned by no session) accumulate the others, so the host holds one extra gradient set at
 * most; a single micro-batch's outputs are used as they come.
 */
async function batchGradients(
  s: BaselineSessions,
  d: BaselineData,
  params: Parameters,
  parts: number[][],
): Promise<{ loss: number; grads: Map<string, Float32Array> }> {
  const grads = new Map<string, Float32Array>();
  let loss = 0;
  for (const rows of parts) {
    const out = await s.trainSession.run(feeds(s.trainGraph, params, d.data.train.batch(rows), s.Tensor));
    loss += Number((out.loss as ort.Tensor).data[0]);
    for (const name of params.keys()) {
      const g = (out[`grad.${name}`] as ort.Tensor).data as Float32Array;
      const acc = grads.get(name);
      if (!acc) grads.set(name, g);
      else for (let i = 0; i < acc.length; i++) acc[i] = (acc[i] as number) + (g[i] as number);
    }
  }
  if (parts.length === 1) return { loss, grads };
  const scale = 1 / parts.length;
  for (const acc of grads.values()) for (let i = 0; i < acc.length; i++) acc[i] = (acc[i] as number) * scale;
  return { loss: loss * scale, grads };
}

/** One AdamW step on `rows` at learning rate `lr`; returns the batch's training loss. */
async function baselineStep(
  o: BaselineOptions,
  s: BaselineSessions,
  d: BaselineData,
  params: Parameters,
  opt: AdamW,
  step: number,
  rows: number[],
  lr: number,
): Promise<number> {
  const { loss, grads } = await batchGradients(s, d, params, microBatches(rows, microBatchOf(o)));
  if (!Number.isFinite(loss)) throw new Error(`step ${step}: training loss is ${loss}; lower --lr`);
  clipGradNorm(grads, o.gradClip);
  opt.step(grads, lr);
  return loss;
}

/** The training sample indices of `step`'s batch: `batchOrder`'s, or the seeded permutation's. */
function batchRows(o: BaselineOptions, order: ArrayLike<number>, step: number): number[] {
  const rows = o.batchOrder
    ? Array.from(o.batchOrder(step))
    : Array.from({ length: o.batchSize }, (_, j) => order[(step * o.batchSize + j) % order.length] as number);
  if (rows.length !== o.batchSize)
    throw new Error(
      `step ${step}: batch order gives ${rows.length} samples, the train step takes ${o.batchSize}`,
    );
  return rows;
}

function baselineResult(
  o: BaselineOptions,
  d: BaselineData,
  run: { trainLoss: number[]; evals: EvalPoint[]; trainSeconds: number; started: number },
): BaselineResult {
  const tokensPerStep = o.batchSize * o.seqLen;
  return {
    preset: o.preset,
    device: o.device,
    parameters: parameterCount(o.config),
    steps: o.steps,
    batch_size: o.batchSize,
    seq_len: o.seqLen,
    tokens_per_step: tokensPerStep,
    micro_batch: microBatchOf(o),
    optimizer: {
      name: 'AdamW',
      lr: o.lr,
      schedule: `cosine, ${o.warmupSteps} warmup steps, floor ${o.lrFloor}`,
      beta1: o.beta1,
      beta2: o.beta2,
      eps: o.eps,
      weight_decay: o.weightDecay,
      grad_clip: o.gradClip,
      seed: o.seed,
    },
    dataset: d.data.manifest.source,
    val_tokens_evaluated: d.evalSets.length * tokensPerStep,
    train_loss: run.trainLoss,
    evals: run.evals,
    final_val_loss: (run.evals[run.evals.length - 1] as EvalPoint).val_loss,
    tokens_per_second: run.trainSeconds > 0 ? (o.steps * tokensPerStep) / run.trainSeconds : 0,
    train_seconds: run.trainSeconds,
    total_seconds: (performance.now() - run.started) / 1000,
  };
}

/** How the baseline trains and evaluates: the host's AdamW over ORT sessions, or the resident GPU's. */
interface BaselineTrainer {
  step(step: number, rows: number[], lr: number): Promise<number>;
  evaluate(): Promise<number>;
  parameters(): Promise<Parameters>;
  dispose(): Promise<void>;
}

async function hostTrainer(o: BaselineOptions, d: BaselineData): Promise<BaselineTrainer> {
  const s = await baselineSessions(o);
  const params = initParameters(o.config, o.seed);
  const opt = new AdamW(params, { beta1: o.beta1, beta2: o.beta2, eps: o.eps, weightDecay: o.weightDecay });
  return {
    step: (step, rows, lr) => baselineStep(o, s, d, params, opt, step, rows, lr),
    evaluate: () => evaluateBaseline(s, d, params),
    parameters: async () => params,
    dispose: async () => {
      await s.trainSession.release();
      await s.evalSession.release();
    },
  };
}

/** The whole step on the GPU: the resident backend, clipping and AdamW in WGSL; evaluations from host copies. */
async function residentTrainer(o: BaselineOptions, d: BaselineData): Promise<BaselineTrainer> {
  // The chunk only lays out DisTrO's compression blocks, which AdamW does not use. A batch above the
  // micro-batch is trained as equal micro-batches, their gradients averaged on the GPU (ResidentAdamW.step).
  const gpu = await openNodeGpu({ config: o.config, seqLen: o.seqLen, maxRows: microBatchOf(o), chunk: 64 });
  const opt = new ResidentAdamW(gpu, initParameters(o.config, o.seed), o);
  return {
    async step(step, rows, lr) {
      const loss = await opt.step(d.data.train.batch(rows), rows.length, lr);
      if (!Number.isFinite(loss)) throw new Error(`step ${step}: training loss is ${loss}; lower --lr`);
      return loss;
    },
    async evaluate() {
      const params = await opt.parameters();
      let sum = 0;
      for (const rows of d.evalSets)
        sum += await gpu.backend.evalLoss(d.data.val.batch(rows), rows.length, params);
      return sum / d.evalSets.length;
    },
    parameters: () => opt.parameters(),
    async dispose() {
      opt.release();
      await gpu.dispose();
    },
  };
}

export async function runBaseline(
  o: BaselineOptions,
  dataDir: string,
  log: (line: string) => void = () => {},
  progress?: Progress,
): Promise<{ result: BaselineResult; params: Parameters }> {
  const started = performance.now();
  const d = await loadBaselineData(o, dataDir);
  const trainer = o.device === 'webgpu' ? await residentTrainer(o, d) : await hostTrainer(o, d);
  log(
    `baseline: ${o.preset} (${parameterCount(o.config).toLocaleString('en-US')} params) on ${o.device}` +
      `${o.device === 'webgpu' ? ' (resident: graph and AdamW on the GPU)' : ''}, ` +
      `${o.steps} steps × ${o.batchSize}×${o.seqLen} tokens, data ${dataDir}`,
  );
  // Sample order: a seeded permutation of the training samples, wrapping around after an epoch.
  const order = shuffledOrder(d.data.train.index.sampleCount, o.seed);
  const trainLoss: number[] = [];
  const evals: EvalPoint[] = [{ step: 0, train_loss: null, val_loss: await trainer.evaluate() }];
  let trainSeconds = 0;
  let sinceEval: number[] = [];
  for (let step = 0; step < o.steps; step++) {
    const rows = batchRows(o, order, step);
    const lr = cosineLr(step, {
      peak: o.lr,
      warmupSteps: o.warmupSteps,
      totalSteps: o.steps,
      floor: o.lrFloor,
    });
    const t0 = performance.now();
    const loss = await trainer.step(step, rows, lr);
    trainSeconds += (performance.now() - t0) / 1000;
    trainLoss.push(loss);
    sinceEval.push(loss);
    const done = step + 1;
    if (done % o.evalEvery === 0 || done === o.steps) {
      const val = await trainer.evaluate();
      evals.push({
        step: done,
        train_loss: sinceEval.reduce((a, b) => a + b, 0) / sinceEval.length,
        val_loss: val,
      });
      sinceEval = [];
    }
    const last = evals[evals.length - 1] as EvalPoint;
    progress?.update(
      done,
      `loss ${loss.toFixed(3)} val ${last.val_loss.toFixed(3)}@${last.step} lr ${lr.toExponential(1)}`,
    );
  }
  progress?.finish();
  const params = await trainer.parameters();
  await trainer.dispose();
  return { result: baselineResult(o, d, { trainLoss, evals, trainSeconds, started }), params };
}

/** Default `--memory`: under 6 GB of resident memory, what a volunteer's 8 GB laptop can spare. */
export const DEFAULT_MEMORY = '5G';

/**
 * `--micro-batch`, or the largest divisor of the batch whose footprint fits `--memory`: the whole batch when
 * even the (generous) estimate fits, else the measured footprint (backend/memory-probe.ts), with a log line.
 */
async function microBatchFlag(
  flag: string | undefined,
  memory: string | undefined,
  o: { config: LlamaConfig; device: Device; batchSize: number; seqLen: number },
  say: (line: string) => void,
): Promise<number> {
  if (flag !== undefined) {
    const rows = intFlag('micro-batch', flag, o.batchSize, 1);
    if (o.batchSize % rows !== 0)
      throw new CliError(`--micro-batch ${rows} must divide --batch-size ${o.batchSize}`);
    return rows;
  }
  let bytes: number;
  try {
    bytes = parseMemory(memory ?? DEFAULT_MEMORY);
  } catch (err) {
    throw new CliError((err as Error).message.replace('--gpu-memory', '--memory'));
  }
  const shape = memoryShape(o.config, o.seqLen);
  // AdamW's two moments and the gradient accumulator, beside what a probe step holds.
  const stateBytes = 12 * shape.params;
  const estimate = estimateFootprint(shape);
  if (rowsForBudget(bytes - stateBytes, estimate, o.batchSize) === o.batchSize) return o.batchSize;
  const footprint = await trainingFootprint({
    bytes,
    config: o.config,
    seqLen: o.seqLen,
    device: o.device,
    stateBytes,
    say,
  });
  const rows = largestDivisorAtMost(o.batchSize, rowsForBudget(bytes, footprint, o.batchSize));
  say(
    `--memory ${memory ?? DEFAULT_MEMORY}: micro-batch ${rows} of ${o.batchSize} sequences (${describeFootprint(footprint)})`,
  );
  return rows;
}

const FLAGS = {
  preset: { type: 'string' },
  steps: { type: 'string' },
  device: { type: 'string' },
  'batch-size': { type: 'string' },
  'seq-len': { type: 'string' },
  'micro-batch': { type: 'string' },
  memory: { type: 'string' },
  lr: { type: 'string' },
  warmup: { type: 'string' },
  seed: { type: 'string' },
  'eval-every': { type: 'string' },
  'eval-batches': { type: 'string' },
  data: { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean' },
} as const;

type Values = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

/** The run the flags describe; `say` reports the micro-batch picked when none is given. */
async function baselineOptions(values: Values, say: (line: string) => void): Promise<BaselineOptions> {
  const { name, config } = presetFlag(values.preset, 'tiny');
  const device = values.device ?? 'cpu';
  if (device !== 'cpu' && device !== 'webgpu') throw new CliError(`--device: cpu or webgpu, got '${device}'`);
  const steps = intFlag('steps', values.steps, 300, 1);
  const seqLen = intFlag('seq-len', values['seq-len'], Math.min(128, config.max_position_embeddings), 1);
  if (seqLen > config.max_position_embeddings)
    throw new CliError(
      `--seq-len ${seqLen} exceeds the preset's max_position_embeddings (${config.max_position_embeddings})`,
    );
  const batchSize = intFlag('batch-size', values['batch-size'], 64, 1);
  const microBatch = await microBatchFlag(
    values['micro-batch'],
    values.memory,
    { config, device, batchSize, seqLen },
    say,
  );
  return {
    ...TRAIN_DEFAULTS,
    preset: name,
    config,
    device,
    steps,
    batchSize,
    microBatch,
    seqLen,
    lr: floatFlag('lr', values.lr, TRAIN_DEFAULTS.lr, (x) => x > 0),
    warmupSteps: intFlag('warmup', values.warmup, Math.min(TRAIN_DEFAULTS.warmupSteps, steps), 0),
    gradClip: 1.0,
    seed: intFlag('seed', values.seed, 0),
    evalEvery: intFlag('eval-every', values['eval-every'], 25, 1),
    evalBatches: intFlag('eval-batches', values['eval-batches'], 8, 1),
  };
}

const command: Command = {
  summary: 'single-process AdamW on the Brown corpus: the loss curve DisTrO runs are measured against',
  usage:
    '--preset P --steps N [--device cpu|webgpu] [--batch-size B] [--seq-len T] [--lr LR] [--seed S] [--json]\n\n' +
    '  --preset P        model shape (default tiny)\n' +
    '  --steps N         optimizer steps (default 300)\n' +
    '  --device D        cpu (default, onnxruntime-node) or webgpu (resident: graph and AdamW on the GPU)\n' +
    '  --batch-size B    sequences per step (default 64)\n' +
    '  --seq-len T       tokens per sequence (default 128; rows carry T+1 ids)\n' +
    '  --micro-batch R   sequences per ONNX Runtime run, a divisor of B: gradients of B/R runs are averaged\n' +
    '                    (default: the largest divisor of B whose estimated footprint fits --memory)\n' +
    '  --memory SIZE     memory budget that picks the default micro-batch (default 5G)\n' +
    '  --lr LR           peak learning rate (default 1e-3; cosine schedule, 20 warmup steps, floor 10%)\n' +
    '  --warmup N        warmup steps (default 20)\n' +
    '  --seed S          init and data-order seed (default 0)\n' +
    '  --eval-every N    held-out evaluation interval in steps (default 25; also at step 0 and the end)\n' +
    '  --eval-batches N  fixed validation batches per evaluation (default 8)\n' +
    '  --data DIR        a prepare-data directory instead of the cached Brown corpus\n' +
    '  --out DIR         also write the trained checkpoint there\n' +
    '  --json            print only the JSON result on stdout (progress and summary go to stderr)\n\n' +
    'AdamW: betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices (not RMSNorm gains), grad clip 1.0.',
  async run(argv) {
    const { values } = parseFlags(argv, FLAGS);
    const json = Boolean(values.json);
    // Human-readable output goes to stderr in --json mode so stdout parses as one JSON document.
    const say = (line: string) => (json ? console.error(line) : console.log(line));
    const o = await baselineOptions(values, say);
    const { preset: name, config, device, steps } = o;
    const dataDir = await dataFlag(values.data);
    const progress = new Progress('train', steps, { intervalMs: 10_000 });
    const { result, params } = await datasetErrorsAsCli(() => runBaseline(o, dataDir, say, progress));
    if (values.out)
      await writeCheckpoint(values.out, config, params, { metadata: { meshtrain_source: 'baseline' } });
    console.log(JSON.stringify(result));
    const first = result.evals[0] as EvalPoint;
    say(
      `baseline ${name}: held-out loss ${first.val_loss.toFixed(3)} → ${result.final_val_loss.toFixed(3)} nats/token ` +
        `after ${steps} steps (${(steps * result.tokens_per_step).toLocaleString('en-US')} tokens) in ` +
        `${result.total_seconds.toFixed(1)}s total, ${result.train_seconds.toFixed(1)}s training, ` +
        `${Math.round(result.tokens_per_second).toLocaleString('en-US')} tokens/s on ${device}` +
        (values.out ? `; checkpoint in ${values.out}` : ''),
    );
    return 0;
  },
};

export default command;
