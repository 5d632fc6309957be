// bench:sparseloco — SparseLoCo on the tiny preset with real train steps (onnxruntime-node, CPU) on the
// Brown corpus, peers simulated in one process on @meshtrain/distro's CPU reference backend: each round
// every peer takes `--inner` AdamW steps on its own batches from the shared parameters, sends its
// quantised top-k of the error-feedback buffer, and the outer step applies all results (with `--lag`, that
// many rounds later, as the protocol does). Compared per domain (top-k over raw entries or over DCT
// coefficients) and against single-process AdamW on the same tokens in the same order (`adamw`, batch =
// peers × batch, one run per `--adamw-lr`). With --webgpu a WGSL replica applies every outer step too and
// its SHA-256 must equal the CPU's (real results, not random ones).
//
// Lengths are in step-equivalents of the default run: one step = peers × batch sequences (64 × 128 tokens),
// so `--steps 300 --inner 10` is 30 rounds, and the inner lr schedule (cosine with `--warmup` steps to a
// `--floor` of the peak) spans `--steps` inner steps, as core's innerScheduleStep counts them.
//
// `--lag L`: a peer's round h starts from θ that holds the outer steps of rounds ≤ h − 1 − L. L = 0 applies
// every round's results before the next round starts; L = 1 is the protocol's two-round apply lag (results
// of round h applied at the start of round h + 2, docs/protocol.md "The two-round apply lag"), so round
// h + 1 trains from θ without round h's step; L = 2 one round more. Results still pending after the last
// round are applied before the final evaluation (the protocol's drain rounds). Each peer's pseudo-gradient
// is taken against the θ its round started from. `--eager` (with L ≥ 1, peer-local, no protocol change):
// a peer starts its round from θ minus outer lr × its own sent values of the rounds not applied yet (its own
// message as the proxy for the pending aggregates), and takes its pseudo-gradient against that start.
// `--delayed P` (with L = 0): each result is, with probability P (seeded), held back one round more, as a
// result sampled for verification would be if unsampled results were applied at once and sampled ones after
// their verdicts; each part of a round is applied with outer lr × its share of the round's senders, so the
// round's step is the same mean over senders, split in two.
//
// Prints one JSON object on stdout (progress on stderr unless --json):
//   {"setup":{…},"seconds","runs":{"raw":{"val_loss":[[step,loss],…],"final_val_loss","vs_adamw",
//    "bytes_per_round","bytes_per_token","ratio_vs_fp32","sent_energy","outer_ms_cpu","outer_ms_webgpu",
//    "replicas_identical","wall_s"},"dct":{…},"adamw":{…},"adamw@2e-3":{…}}}
// `bytes_per_token`: what one peer sends per round / the tokens it trains in the round (H × batch × seq);
// `ratio_vs_fp32`: 4 bytes × parameters per inner step / what it sends per inner step. With `--log FILE`
// every run is also appended to FILE as one JSON line (setting, loss, bytes, wall): the tuning log.
// Usage: node scripts/run-ts.mjs bench/sparseloco.ts --json [--steps 80 | --rounds 8] [--peers 4]
//   [--inner 10] [--batch 16] [--seq 128] [--topk 64] [--bits 2] [--beta 0.95] [--lr 2e-3] [--warmup 20]
//   [--floor 0.1] [--outer-lr 1] [--divide-by senders|results] [--lag 0|1|2] [--eager] [--delayed P] [--adamw-lr 1e-3[,2e-3]]
//   [--runs raw,dct,adamw] [--eval-every STEPS] [--threads 2] [--webgpu] [--seed 0] [--log FILE] [--tag T]
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { encodedDistroResultSize } from '../packages/core/src/index.ts';
import {
  createAdamWState,
  createCpuBackend,
  createWebGpuBackend,
  innerAdamWStep,
  outerStep,
  quantizeResult,
  dequantizeResult,
  resetLocal,
  type DistroBackend,
  type DistroTensor,
  type QuantTensorResult,
  type SparseDomain,
  type TensorResult,
} from '../packages/distro/src/index.ts';
import { dawnDevice } from '../packages/distro/src/node/index.ts';
import {
  buildTrainStep,
  cosineLr,
  initParameters,
  parameterSpecs,
  PRESETS,
  shuffledOrder,
} from '../packages/model/src/index.ts';
import { ensureBrown, loadDataset } from '../packages/model/src/node/index.ts';
import { cacheRoot } from '../apps/node-trainer/src/dataset/brown.ts';
import { createSession } from '../apps/node-trainer/src/ort/session.ts';

const VALUE_FLAGS = [
  'steps',
  'rounds',
  'peers',
  'inner',
  'batch',
  'seq',
  'topk',
  'bits',
  'beta',
  'lr',
  'warmup',
  'floor',
  'outer-lr',
  'divide-by',
  'lag',
  'delayed',
  'adamw-lr',
  'runs',
  'eval-every',
  'threads',
  'seed',
  'log',
  'tag',
] as const;
// Strict: a mistyped flag is an error, not a silently ignored setting of a half-hour run.
const valueFlags = Object.fromEntries(VALUE_FLAGS.map((f) => [f, { type: 'string' as const }])) as Record<
  (typeof VALUE_FLAGS)[number],
  { type: 'string' }
>;
const { values: argv } = parseArgs({
  options: {
    ...valueFlags,
    json: { type: 'boolean' },
    eager: { type: 'boolean' },
    webgpu: { type: 'boolean' },
  },
  strict: true,
});
function flag(name: (typeof VALUE_FLAGS)[number], fallback: string): string {
  return argv[name] ?? fallback;
}
function positiveInt(name: (typeof VALUE_FLAGS)[number], fallback: string, min = 1): number {
  const v = Number(flag(name, fallback));
  if (!Number.isSafeInteger(v) || v < min) throw new RangeError(`--${name} must be an integer ≥ ${min}`);
  return v;
}
const JSON_OUT = argv.json === true;
const inner = positiveInt('inner', '10');
const steps = argv.steps !== undefined ? positiveInt('steps', '80') : positiveInt('rounds', '8') * inner;
if (steps % inner !== 0) throw new RangeError(`--steps ${steps} is not a multiple of --inner ${inner}`);
const lag = positiveInt('lag', '0', 0);
if (lag > 2) throw new RangeError('--lag must be 0, 1 or 2');
const delayed = Number(flag('delayed', '0'));
if (!(delayed >= 0 && delayed <= 1)) throw new RangeError('--delayed must be a share in [0, 1]');
if (delayed > 0 && lag !== 0) throw new RangeError('--delayed models a lag-0 protocol: give --lag 0');
const divideBy = flag('divide-by', 'senders');
if (divideBy !== 'senders' && divideBy !== 'results') throw new RangeError('--divide-by: senders or results');
const setup = {
  preset: 'tiny' as const,
  steps,
  rounds: steps / inner,
  peers: positiveInt('peers', '4'),
  inner,
  batch: positiveInt('batch', '16'),
  seq: positiveInt('seq', '128'),
  chunk: 64,
  topk: positiveInt('topk', '64'),
  bits: positiveInt('bits', '2'),
  beta: Number(flag('beta', '0.95')),
  lr: Number(flag('lr', '2e-3')),
  outer_lr: Number(flag('outer-lr', '1')),
  divide_by: divideBy as 'senders' | 'results',
  lag,
  eager: argv.eager === true,
  delayed,
  adamw: {
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-8,
    weight_decay: 0.1,
    clip: 1,
    warmup: positiveInt('warmup', '20', 0),
    floor: Number(flag('floor', '0.1')),
  },
  // The reference's peak lr; 1e-3 is the default run's (`node-trainer baseline`).
  adamw_lr: flag('adamw-lr', '1e-3').split(',').map(Number),
  seed: positiveInt('seed', '0', 0),
  // A fixed held-out set: 256 evenly spaced validation samples (32,768 tokens), in batches of 16.
  eval_samples: 256,
  eval_every: positiveInt('eval-every', String(inner)),
  threads: positiveInt('threads', '2'),
};
const RUNS = flag('runs', 'raw,dct,adamw').split(',');
const LOG = flag('log', '');
const TAG = flag('tag', '');
const log = (s: string): void => {
  if (!JSON_OUT) console.error(s);
};

const config = PRESETS[setup.preset];
const specs = parameterSpecs(config);
const parameterCount = specs.reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
const dataDir = await ensureBrown(join(cacheRoot(), 'data'));
const data = await loadDataset(dataDir, { seqLen: setup.seq });
const order = shuffledOrder(data.train.index.sampleCount, setup.seed);
if (setup.steps * setup.peers * setup.batch > order.length)
  throw new RangeError(
    `${setup.steps} steps need more samples than the training split has (${order.length})`,
  );
const sessions = new Map<
  number,
  { session: ort.InferenceSession; graph: ReturnType<typeof buildTrainStep> }
>();
async function trainSession(batch: number, withGradients = true) {
  const key = withGradients ? batch : -batch;
  let s = sessions.get(key);
  if (!s) {
    const graph = buildTrainStep(config, {
      batchSize: batch,
      seqLen: setup.seq,
      dtype: 'float32',
      withGradients,
    });
    // No spinning: the bench shares its cores with other work (bench/README.md, bench:quality).
    const session = await createSession(graph.onnx, {
      device: 'cpu',
      dtype: 'float32',
      intraOpThreads: setup.threads,
      spinning: false,
    });
    s = { graph, session };
    sessions.set(key, s);
  }
  return s;
}

/** Loss (and gradients, into `grads`) of `rows` at the parameters `params` (read from the backend). */
async function run(
  be: DistroBackend,
  params: readonly DistroTensor[],
  rows: number[],
  tokensOf: (rows: number[]) => Int32Array,
  grads?: readonly DistroTensor[],
): Promise<number> {
  const { session, graph } = await trainSession(rows.length, grads !== undefined);
  const feeds: Record<string, ort.Tensor> = {};
  for (const input of graph.inputs) {
    if (input.name === 'tokens') feeds.tokens = new ort.Tensor('int32', tokensOf(rows), input.shape);
    else {
      const i = specs.findIndex((s) => s.name === input.name);
      feeds[input.name] = new ort.Tensor('float32', await be.read(params[i]!), input.shape);
    }
  }
  const out = await session.run(feeds);
  if (grads)
    specs.forEach((s, i) => be.write(grads[i]!, (out[`grad.${s.name}`] as ort.Tensor).data as Float32Array));
  return Number((out.loss as ort.Tensor).data[0]);
}

const EVAL_BATCH = 16;
const evalRows = Array.from({ length: setup.eval_samples / EVAL_BATCH }, (_, b) =>
  Array.from({ length: EVAL_BATCH }, (_, j) =>
    Math.floor(((b * EVAL_BATCH + j) * data.val.index.sampleCount) / setup.eval_samples),
  ),
);
async function evaluate(be: DistroBackend, params: readonly DistroTensor[]): Promise<number> {
  let s = 0;
  for (const rows of evalRows) s += await run(be, params, rows, (r) => data.val.batch(r));
  return s / evalRows.length;
}
/** Whether the held-out loss is taken after step-equivalent `step` (1-based; always after the last). */
const evalAfter = (step: number): boolean => step % setup.eval_every === 0 || step === setup.steps;

const init = initParameters(config, setup.seed);
const adamOpts = (step: number, peak: number) => ({
  lr: cosineLr(step, {
    peak,
    warmupSteps: setup.adamw.warmup,
    totalSteps: setup.steps,
    floor: setup.adamw.floor,
  }),
  beta1: setup.adamw.beta1,
  beta2: setup.adamw.beta2,
  eps: setup.adamw.eps,
  weightDecay: setup.adamw.weight_decay,
  clipGradNorm: setup.adamw.clip,
});
/** Training sample rows of peer `peer` at global inner step `step` (disjoint across peers and steps). */
const rowsOf = (step: number, peer: number, batch: number): number[] =>
  Array.from(
    { length: batch },
    (_, j) => order[((step * setup.peers + peer) * setup.batch + j) % order.length] as number,
  );

const dawn = argv.webgpu === true ? await dawnDevice() : undefined;
const digest = async (be: DistroBackend, ts: readonly DistroTensor[]): Promise<string> => {
  const h = createHash('sha256');
  for (const t of ts) h.update(new Uint8Array((await be.read(t)).buffer));
  return h.digest('hex');
};
const round4 = (x: number): number => Number(x.toFixed(4));

async function sparseLoCoRun(domain: SparseDomain) {
  const started = performance.now();
  const be = createCpuBackend({ chunk: setup.chunk });
  const tensorsOf = (b: DistroBackend) => specs.map((s) => b.tensor(s.shape, init.get(s.name)));
  const theta = tensorsOf(be);
  const gpu = dawn ? createWebGpuBackend(dawn.device, { chunk: setup.chunk }) : undefined;
  const gpuTheta = gpu ? tensorsOf(gpu) : undefined;
  const peers = Array.from({ length: setup.peers }, () => {
    const local = tensorsOf(be);
    return {
      local,
      // The peer's own round start (--eager); θ itself otherwise.
      start: setup.eager ? specs.map((s) => be.tensor(s.shape)) : theta,
      /** Its own sent values (dequantised) of the rounds not applied yet, oldest first. */
      own: [] as { round: number; sent: TensorResult[] }[],
      ef: specs.map((s) => be.tensor(s.shape)),
      grads: specs.map((s) => be.tensor(s.shape)),
      adam: createAdamWState(be, local),
    };
  });
  const valLoss: [number, number][] = [[0, await evaluate(be, theta)]];
  const sentEnergy: number[] = [];
  let bytes = 0;
  let outerCpu = 0;
  let outerGpu = 0;
  let outerSteps = 0;
  const o = { lr: setup.outer_lr, domain, divideBy: setup.divide_by };
  /** t ← t − outer lr × r (a peer's own sent values), in float: only the peer's local start. */
  const subtractOwn = (t: DistroTensor, r: TensorResult): void => {
    const scaled = { ...r, values: r.values.map((v) => v * setup.outer_lr) };
    if (domain === 'dct') be.subtractResidual(t, scaled);
    else be.subtractSparse(t, scaled);
  };
  /** Rounds whose results are published but not applied yet, oldest first. */
  const pending: { round: number; results: QuantTensorResult[][]; share: number }[] = [];
  // mulberry32: which results --delayed holds back, the same draw for both domains.
  let rng = (setup.seed ^ 0x9e3779b9) >>> 0;
  const uniform = (): number => {
    rng = (rng + 0x6d2b79f5) >>> 0;
    let x = rng;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 2 ** 32;
  };
  const applyThrough = async (round: number): Promise<void> => {
    pending.sort((a, b) => a.round - b.round);
    while (pending.length > 0 && pending[0]!.round <= round) {
      const { results, share } = pending.shift()!;
      const step = { ...o, lr: o.lr * share };
      let t = performance.now();
      outerStep(be, theta, results, step);
      outerCpu += performance.now() - t;
      if (gpu && gpuTheta) {
        t = performance.now();
        outerStep(gpu, gpuTheta, results, step);
        await gpu.finish();
        outerGpu += performance.now() - t;
      }
      outerSteps += 1;
    }
  };
  for (let round = 0; round < setup.rounds; round++) {
    // The round starts from θ with the outer steps of rounds ≤ round − 1 − lag; θ does not change until the
    // next round starts, so it is also the start every peer's pseudo-gradient is taken against.
    await applyThrough(round - 1 - setup.lag);
    for (const peer of peers) {
      if (setup.eager) {
        peer.own = peer.own.filter((m) => m.round > round - 1 - setup.lag);
        resetLocal(be, peer.start, theta);
        for (const m of peer.own) m.sent.forEach((r, i) => subtractOwn(peer.start[i]!, r));
      }
      resetLocal(be, peer.local, peer.start);
    }
    const results: QuantTensorResult[][] = [];
    let before = 0;
    let after = 0;
    for (const [p, peer] of peers.entries()) {
      for (let h = 0; h < setup.inner; h++) {
        const step = round * setup.inner + h;
        await run(be, peer.local, rowsOf(step, p, setup.batch), (r) => data.train.batch(r), peer.grads);
        await innerAdamWStep(be, peer.local, peer.grads, peer.adam, adamOpts(step, setup.lr));
      }
      // sparseLoCoSend's steps, spelled out to measure the share of the buffer's energy that is sent.
      const sent: QuantTensorResult[] = [];
      const own: TensorResult[] = [];
      for (const [i, e] of peer.ef.entries()) {
        be.errorFeedback(e, peer.start[i]!, peer.local[i]!, setup.beta);
        before += await be.sumOfSquares(e);
        const q = quantizeResult(await be.selectTopk(e, setup.topk, domain), setup.bits);
        const deq = dequantizeResult(q);
        if (domain === 'dct') be.subtractResidual(e, deq);
        else be.subtractSparse(e, deq);
        after += await be.sumOfSquares(e);
        sent.push(q);
        own.push(deq);
      }
      results.push(sent);
      if (setup.eager) peer.own.push({ round, sent: own });
    }
    bytes = results[0]!.reduce((n, q) => n + encodedDistroResultSize(q.xshape, q.k, 'quant', q.bits), 0);
    sentEnergy.push(1 - after / before);
    const held = results.filter(() => setup.delayed > 0 && uniform() < setup.delayed);
    const now = results.filter((r) => !held.includes(r));
    if (now.length > 0) pending.push({ round, results: now, share: now.length / results.length });
    if (held.length > 0)
      pending.push({ round: round + 1, results: held, share: held.length / results.length });
    const step = (round + 1) * setup.inner;
    if (round === setup.rounds - 1) await applyThrough(round + 1); // the drain: every trained round is applied
    if (evalAfter(step)) {
      valLoss.push([step, await evaluate(be, theta)]);
      log(
        `${domain} round ${round + 1}/${setup.rounds}: val ${valLoss.at(-1)![1].toFixed(4)}, sent energy ${sentEnergy.at(-1)!.toFixed(3)}`,
      );
    }
  }
  const identical = gpu && gpuTheta ? (await digest(gpu, gpuTheta)) === (await digest(be, theta)) : null;
  gpu?.destroy();
  const tokensPerRound = setup.inner * setup.batch * setup.seq;
  return {
    val_loss: valLoss.map(([s, x]) => [s, round4(x)]),
    final_val_loss: round4(valLoss.at(-1)![1]),
    sent_energy: round4(sentEnergy.reduce((a, b) => a + b, 0) / sentEnergy.length),
    bytes_per_round: bytes,
    bytes_per_token: round4(bytes / tokensPerRound),
    ratio_vs_fp32: Math.round((4 * parameterCount * setup.inner) / bytes),
    outer_ms_cpu: Math.round(outerCpu / outerSteps),
    outer_ms_webgpu: gpu ? Math.round(outerGpu / outerSteps) : null,
    webgpu: dawn?.description ?? null,
    replicas_identical: identical,
    wall_s: Math.round((performance.now() - started) / 1000),
  };
}

/** The reference: one process, batch = peers × batch, the same tokens in the same order, peak lr `peak`. */
async function adamwRun(peak: number) {
  const started = performance.now();
  const be = createCpuBackend({ chunk: setup.chunk });
  const theta = specs.map((s) => be.tensor(s.shape, init.get(s.name)));
  const grads = specs.map((s) => be.tensor(s.shape));
  const adam = createAdamWState(be, theta);
  const valLoss: [number, number][] = [[0, await evaluate(be, theta)]];
  for (let step = 0; step < setup.steps; step++) {
    const rows = Array.from({ length: setup.peers }, (_, p) => rowsOf(step, p, setup.batch)).flat();
    await run(be, theta, rows, (r) => data.train.batch(r), grads);
    await innerAdamWStep(be, theta, grads, adam, adamOpts(step, peak));
    if (evalAfter(step + 1)) {
      valLoss.push([step + 1, await evaluate(be, theta)]);
      log(`adamw lr ${peak} step ${step + 1}/${setup.steps}: val ${valLoss.at(-1)![1].toFixed(4)}`);
    }
  }
  return {
    lr: peak,
    val_loss: valLoss.map(([s, x]) => [s, round4(x)]),
    final_val_loss: round4(valLoss.at(-1)![1]),
    bytes_per_token: round4((4 * parameterCount) / (setup.batch * setup.seq)),
    ratio_vs_fp32: 1,
    wall_s: Math.round((performance.now() - started) / 1000),
  };
}

function commit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}
function record(method: string, r: Record<string, unknown>): void {
  if (!LOG) return;
  const { adamw: _, adamw_lr: __, ...common } = setup;
  const settings =
    method === 'raw' || method === 'dct'
      ? { ...common, domain: method, adamw: setup.adamw }
      : {
          steps: setup.steps,
          peers: setup.peers,
          batch: setup.batch,
          seq: setup.seq,
          seed: setup.seed,
          ...setup.adamw,
          lr: r.lr,
        };
  const line = {
    date: new Date().toISOString(),
    commit: commit(),
    tag: TAG || null,
    method: method.startsWith('adamw') ? 'adamw' : method,
    settings,
    final_val_loss: r.final_val_loss,
    bytes_per_token: r.bytes_per_token,
    ratio_vs_fp32: r.ratio_vs_fp32,
    wall_s: r.wall_s,
    load_avg: loadavg().map((x) => Number(x.toFixed(1))),
    val_loss: r.val_loss,
    ...(r.sent_energy !== undefined
      ? { sent_energy: r.sent_energy, bytes_per_round: r.bytes_per_round }
      : {}),
  };
  mkdirSync(dirname(LOG), { recursive: true });
  appendFileSync(LOG, `${JSON.stringify(line)}\n`);
}

const runs: Record<string, Record<string, unknown>> = {};
const started = performance.now();
for (const name of RUNS) {
  if (name === 'adamw') {
    for (const [i, lr] of setup.adamw_lr.entries()) {
      const key = i === 0 ? 'adamw' : `adamw@${lr}`;
      runs[key] = await adamwRun(lr);
      record(key, runs[key]);
    }
  } else if (name === 'raw' || name === 'dct') {
    runs[name] = await sparseLoCoRun(name);
    record(name, runs[name]);
  } else throw new RangeError(`unknown run ${name} (raw, dct, adamw)`);
}
const base = runs.adamw?.final_val_loss as number | undefined;
if (base !== undefined)
  for (const [name, r] of Object.entries(runs))
    if (name !== 'adamw')
      r.vs_adamw = `${((((r.final_val_loss as number) - base) / base) * 100).toFixed(1)}%`;
const out = { setup, seconds: Math.round((performance.now() - started) / 1000), runs };
console.log(JSON.stringify(out, null, JSON_OUT ? 0 : 2));
