// bench:sparseloco — SparseLoCo on the tiny preset with real train steps (onnxruntime-node, CPU) on the
// Brown corpus, peers simulated in one process on @meshtrain/distro's CPU reference backend: each round
// every peer takes `--inner` AdamW steps on its own batches from the shared parameters, sends its
// quantised top-k of the error-feedback buffer, and the outer step applies all results. Compared per
// domain (top-k over raw entries or over DCT coefficients) and against single-process AdamW on the same
// tokens (`adamw`, batch = peers × batch). With --webgpu a WGSL replica applies every outer step too and
// its SHA-256 must equal the CPU's (real results, not random ones).
//
// Prints one JSON object on stdout (progress on stderr unless --json):
//   {"setup":{…},"runs":{"raw":{"val_loss":[…],"final_val_loss","vs_adamw","sent_energy","bytes_per_round",
//    "outer_ms_cpu","outer_ms_webgpu","replicas_identical"},"dct":{…},"adamw":{…}}}
// Usage: node scripts/run-ts.mjs bench/sparseloco.ts --json [--rounds 8] [--peers 4] [--inner 10]
//   [--batch 16] [--seq 128] [--topk 64] [--bits 2] [--beta 0.95] [--lr 2e-3] [--outer-lr 1]
//   [--divide-by senders|results] [--runs raw,dct,adamw] [--webgpu] [--seed 0]
import { createHash } from 'node:crypto';
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
import { join } from 'node:path';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}
const JSON_OUT = process.argv.includes('--json');
const setup = {
  preset: 'tiny' as const,
  rounds: Number(flag('rounds', '8')),
  peers: Number(flag('peers', '4')),
  inner: Number(flag('inner', '10')),
  batch: Number(flag('batch', '16')),
  seq: Number(flag('seq', '128')),
  chunk: 64,
  topk: Number(flag('topk', '64')),
  bits: Number(flag('bits', '2')),
  beta: Number(flag('beta', '0.95')),
  lr: Number(flag('lr', '2e-3')),
  outer_lr: Number(flag('outer-lr', '1')),
  divide_by: flag('divide-by', 'senders') as 'senders' | 'results',
  adamw: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, clip: 1, warmup: 20, floor: 0.1 },
  seed: Number(flag('seed', '0')),
  eval_batches: 16,
};
const RUNS = flag('runs', 'raw,dct,adamw').split(',');
const log = (s: string): void => {
  if (!JSON_OUT) console.error(s);
};

const config = PRESETS[setup.preset];
const specs = parameterSpecs(config);
const dataDir = await ensureBrown(join(cacheRoot(), 'data'));
const data = await loadDataset(dataDir, { seqLen: setup.seq });
const order = shuffledOrder(data.train.index.sampleCount, setup.seed);
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
    s = { graph, session: await createSession(graph.onnx, { device: 'cpu', dtype: 'float32' }) };
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

const evalRows = Array.from({ length: setup.eval_batches }, (_, b) =>
  Array.from({ length: setup.batch }, (_, j) =>
    Math.floor(((b * setup.batch + j) * data.val.index.sampleCount) / (setup.eval_batches * setup.batch)),
  ),
);
async function evaluate(be: DistroBackend, params: readonly DistroTensor[]): Promise<number> {
  let s = 0;
  for (const rows of evalRows) s += await run(be, params, rows, (r) => data.val.batch(r));
  return s / evalRows.length;
}

const init = initParameters(config, setup.seed);
const totalSteps = setup.rounds * setup.inner;
const lrAt = (step: number): number =>
  cosineLr(step, {
    peak: setup.lr,
    warmupSteps: setup.adamw.warmup,
    totalSteps,
    floor: setup.adamw.floor,
  });
const adamOpts = (step: number) => ({
  lr: lrAt(step),
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

const dawn = process.argv.includes('--webgpu') ? await dawnDevice() : undefined;
const digest = async (be: DistroBackend, ts: readonly DistroTensor[]): Promise<string> => {
  const h = createHash('sha256');
  for (const t of ts) h.update(new Uint8Array((await be.read(t)).buffer));
  return h.digest('hex');
};

async function sparseLoCoRun(domain: SparseDomain) {
  const be = createCpuBackend({ chunk: setup.chunk });
  const tensorsOf = (b: DistroBackend) => specs.map((s) => b.tensor(s.shape, init.get(s.name)));
  const theta = tensorsOf(be);
  const gpu = dawn ? createWebGpuBackend(dawn.device, { chunk: setup.chunk }) : undefined;
  const gpuTheta = gpu ? tensorsOf(gpu) : undefined;
  const peers = Array.from({ length: setup.peers }, () => {
    const local = tensorsOf(be);
    return {
      local,
      ef: specs.map((s) => be.tensor(s.shape)),
      grads: specs.map((s) => be.tensor(s.shape)),
      adam: createAdamWState(be, local),
    };
  });
  const valLoss = [await evaluate(be, theta)];
  const sentEnergy: number[] = [];
  let bytes = 0;
  let outerCpu = 0;
  let outerGpu = 0;
  for (let round = 0; round < setup.rounds; round++) {
    const results: QuantTensorResult[][] = [];
    let before = 0;
    let after = 0;
    for (const [p, peer] of peers.entries()) {
      for (let h = 0; h < setup.inner; h++) {
        const step = round * setup.inner + h;
        await run(be, peer.local, rowsOf(step, p, setup.batch), (r) => data.train.batch(r), peer.grads);
        await innerAdamWStep(be, peer.local, peer.grads, peer.adam, adamOpts(step));
      }
      // sparseLoCoSend's steps, spelled out to measure the share of the buffer's energy that is sent.
      const sent: QuantTensorResult[] = [];
      for (const [i, e] of peer.ef.entries()) {
        be.errorFeedback(e, theta[i]!, peer.local[i]!, setup.beta);
        before += await be.sumOfSquares(e);
        const q = quantizeResult(await be.selectTopk(e, setup.topk, domain), setup.bits);
        if (domain === 'dct') be.subtractResidual(e, dequantizeResult(q));
        else be.subtractSparse(e, dequantizeResult(q));
        after += await be.sumOfSquares(e);
        sent.push(q);
      }
      results.push(sent);
    }
    bytes = results[0]!.reduce((n, q) => n + encodedDistroResultSize(q.xshape, q.k, 'quant', q.bits), 0);
    sentEnergy.push(1 - after / before);
    const o = { lr: setup.outer_lr, domain, divideBy: setup.divide_by };
    let t = performance.now();
    outerStep(be, theta, results, o);
    outerCpu += performance.now() - t;
    if (gpu && gpuTheta) {
      t = performance.now();
      outerStep(gpu, gpuTheta, results, o);
      await gpu.finish();
      outerGpu += performance.now() - t;
    }
    for (const peer of peers) resetLocal(be, peer.local, theta);
    valLoss.push(await evaluate(be, theta));
    log(
      `${domain} round ${round + 1}/${setup.rounds}: val ${valLoss.at(-1)!.toFixed(4)}, sent energy ${sentEnergy.at(-1)!.toFixed(3)}`,
    );
  }
  const identical = gpu && gpuTheta ? (await digest(gpu, gpuTheta)) === (await digest(be, theta)) : null;
  gpu?.destroy();
  return {
    val_loss: valLoss.map((x) => Number(x.toFixed(4))),
    final_val_loss: Number(valLoss.at(-1)!.toFixed(4)),
    sent_energy: Number((sentEnergy.reduce((a, b) => a + b, 0) / sentEnergy.length).toFixed(4)),
    bytes_per_round: bytes,
    outer_ms_cpu: Math.round(outerCpu / setup.rounds),
    outer_ms_webgpu: gpu ? Math.round(outerGpu / setup.rounds) : null,
    webgpu: dawn?.description ?? null,
    replicas_identical: identical,
  };
}

/** The reference: one process, batch = peers × batch, the same inner schedule and the same tokens. */
async function adamwRun() {
  const be = createCpuBackend({ chunk: setup.chunk });
  const theta = specs.map((s) => be.tensor(s.shape, init.get(s.name)));
  const grads = specs.map((s) => be.tensor(s.shape));
  const adam = createAdamWState(be, theta);
  const valLoss = [await evaluate(be, theta)];
  for (let step = 0; step < totalSteps; step++) {
    const rows = Array.from({ length: setup.peers }, (_, p) => rowsOf(step, p, setup.batch)).flat();
    await run(be, theta, rows, (r) => data.train.batch(r), grads);
    await innerAdamWStep(be, theta, grads, adam, adamOpts(step));
    if ((step + 1) % setup.inner === 0) {
      valLoss.push(await evaluate(be, theta));
      log(`adamw step ${step + 1}/${totalSteps}: val ${valLoss.at(-1)!.toFixed(4)}`);
    }
  }
  return {
    val_loss: valLoss.map((x) => Number(x.toFixed(4))),
    final_val_loss: Number(valLoss.at(-1)!.toFixed(4)),
  };
}

const runs: Record<string, Record<string, unknown>> = {};
const started = performance.now();
for (const name of RUNS)
  runs[name] = name === 'adamw' ? await adamwRun() : await sparseLoCoRun(name as SparseDomain);
const base = runs.adamw?.final_val_loss as number | undefined;
if (base !== undefined)
  for (const [name, r] of Object.entries(runs))
    if (name !== 'adamw')
      r.vs_adamw = `${((((r.final_val_loss as number) - base) / base) * 100).toFixed(1)}%`;
const out = { setup, seconds: Math.round((performance.now() - started) / 1000), runs };
console.log(JSON.stringify(out, null, JSON_OUT ? 0 : 2));
