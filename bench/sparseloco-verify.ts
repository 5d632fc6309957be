// bench:sparseloco-verify — what a verifier of SparseLoCo results measures, for honest trainers and each
// attack, on real train steps (onnxruntime-node CPU, Brown, a preset model). It calibrates the thresholds of
// docs/protocol.md "Verification of work" for SparseLoCo runs and compares two update checks:
//   grad:   signAgreement of the sent values with the verifier's gradient at θ on the first inner batch
//           (one forward/backward, the one the fingerprint needs anyway);
//   pseudo: signAgreement with the verifier's own H-step pseudo-gradient θ − θ_local from θ with fresh AdamW
//           state on the trainer's H inner batches (H more forward/backward passes).
// Peers train rounds as a SparseLoCo client does (the client's own gradientsAt, distro's inner AdamW, error
// feedback, top-k and quantiser, exact outer step; results applied at the end of each round, no apply lag).
// Each round, for each honest peer and for these attacks on peer 0 (its state keeps training honestly):
//   random-signs  the sent codes' sign bits at random;   sign-flip  every sign bit flipped;
//   stale-replay  peer 0's result and fingerprint of the round before;
//   other-batch   an extra peer that trains on other samples and claims peer 0's interval.
// Prints one JSON object: per kind, per measurement, [min, mean, max] over rounds and honest peers.
// Usage: node scripts/run-ts.mjs bench/sparseloco-verify.ts [--preset tiny] [--peers 4] [--rounds 6]
//   [--inner 10] [--batch 8] [--seq 128] [--topk 64] [--bits 2] [--domain raw|dct] [--lr 2e-3] [--seed 0]
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import {
  fingerprintAgreement,
  fingerprintOf,
  SPARSELOCO_DEFAULTS,
  innerBatches,
  type BatchId,
} from '@meshtrain/core';
import {
  createAdamWState,
  createCpuBackend,
  innerAdamWStep,
  outerStep,
  packCodes,
  resetLocal,
  sparseLoCoSend,
  unpackCodes,
  type AdamWState,
  type DistroTensor,
  type QuantTensorResult,
  type SparseDomain,
} from '@meshtrain/distro';
import { initParameters, parameterSpecs, PRESETS, type PresetName } from '@meshtrain/model';
import { ensureBrown, loadDataset } from '@meshtrain/model/node';
import { fingerprintValues } from '../packages/client/src/client/fingerprint.ts';
import { gradientsAt } from '../packages/client/src/client/gradients.ts';
import { signAgreement } from '../packages/client/src/client/sparseloco-verify.ts';
import { OrtTrainingBackend } from '../apps/node-trainer/src/backend/ort-backend.ts';
import { cacheRoot } from '../apps/node-trainer/src/dataset/brown.ts';

const { values: f } = parseArgs({
  options: {
    preset: { type: 'string', default: 'tiny' },
    peers: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '6' },
    inner: { type: 'string', default: '10' },
    batch: { type: 'string', default: '8' },
    seq: { type: 'string', default: '128' },
    topk: { type: 'string', default: String(SPARSELOCO_DEFAULTS.compression_topk) },
    bits: { type: 'string', default: String(SPARSELOCO_DEFAULTS.quantization_bits) },
    domain: { type: 'string', default: SPARSELOCO_DEFAULTS.domain },
    lr: { type: 'string', default: '2e-3' },
    seed: { type: 'string', default: '0' },
  },
});
const setup = {
  preset: f.preset as PresetName,
  peers: Number(f.peers),
  rounds: Number(f.rounds),
  inner: Number(f.inner),
  batch: Number(f.batch),
  seq: Number(f.seq),
  chunk: SPARSELOCO_DEFAULTS.compression_chunk,
  topk: Number(f.topk),
  bits: Number(f.bits),
  domain: f.domain as SparseDomain,
  lr: Number(f.lr),
  seed: Number(f.seed),
};
const config = PRESETS[setup.preset];
const specs = parameterSpecs(config);
const names = specs.map((s) => s.name).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
const shapeOf = new Map(specs.map((s) => [s.name, s.shape]));
const data = await loadDataset(await ensureBrown(join(cacheRoot(), 'data')), { seqLen: setup.seq });
const ortBackend = new OrtTrainingBackend({ config, seqLen: setup.seq, device: 'cpu', maxRows: setup.batch });
const be = createCpuBackend({ chunk: setup.chunk });
const init = initParameters(config, setup.seed);
const theta = names.map((n) => be.tensor(shapeOf.get(n)!, init.get(n)));
const tensors = () => names.map((n) => be.tensor(shapeOf.get(n)!));
const samples = (b: BatchId) =>
  data.train.batch(
    Array.from({ length: b.end - b.start + 1 }, (_, i) => (b.start + i) % data.train.index.sampleCount),
  );
const adamOf = (lr: number) => ({
  lr,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-8,
  weightDecay: 0.1,
  clipGradNorm: 1,
});
const sendOf = { beta: 0.95, topk: setup.topk, bits: setup.bits, domain: setup.domain };

interface Peer {
  local: DistroTensor[];
  ef: DistroTensor[];
  adam: AdamWState;
}
const newPeer = (): Peer => {
  const local = tensors();
  return { local, ef: tensors(), adam: createAdamWState(be, local) };
};

/** H inner steps from θ on `interval` (fingerprint of the first step's gradient at `seed`/`slot`). */
async function trainFrom(p: Peer, interval: BatchId, seed: string, slot: number) {
  resetLocal(be, p.local, theta);
  let fp: Uint8Array | null = null;
  for (const b of innerBatches(interval, setup.inner)) {
    const g = await gradientsAt(be, ortBackend, names, p.local, samples(b), b.end - b.start + 1);
    fp ??= fingerprintOf(await fingerprintValues(be, g.grads, seed, slot));
    await innerAdamWStep(be, p.local, g.grads, p.adam, adamOf(setup.lr));
    g.release();
  }
  return fp!;
}

/** What a verifier computes for a claimed interval: the first inner step's gradient and a fresh pseudo-gradient. */
async function verifierView(interval: BatchId, seed: string, slot: number) {
  const first = innerBatches(interval, setup.inner)[0]!;
  const grad = await gradientsAt(be, ortBackend, names, theta, samples(first), first.end - first.start + 1);
  const own = await fingerprintValues(be, grad.grads, seed, slot);
  const fresh = newPeer();
  await trainFrom(fresh, interval, seed, slot);
  const delta = tensors();
  for (const [i, t] of delta.entries()) be.errorFeedback(t, theta[i]!, fresh.local[i]!, 0);
  return { grad, own, delta, fresh };
}

function tamperSigns(r: QuantTensorResult[], flip: (neg: number, i: number) => number): QuantTensorResult[] {
  return r.map((q) => {
    const codes = unpackCodes(q.codes, q.bits, q.indices.length);
    const out = codes.map((c, i) => (c & ~1) | flip(c & 1, i));
    return { ...q, codes: packCodes(out, q.bits) };
  });
}

let rng = 0x9e3779b9 ^ setup.seed;
const random = () => {
  rng ^= rng << 13;
  rng ^= rng >>> 17;
  rng ^= rng << 5;
  return (rng >>> 0) / 0x1_0000_0000;
};

type Kind = 'honest' | 'random-signs' | 'sign-flip' | 'stale-replay' | 'other-batch';
const seen: Record<Kind, { fingerprint: number[]; grad: number[]; pseudo: number[] }> = {
  honest: { fingerprint: [], grad: [], pseudo: [] },
  'random-signs': { fingerprint: [], grad: [], pseudo: [] },
  'sign-flip': { fingerprint: [], grad: [], pseudo: [] },
  'stale-replay': { fingerprint: [], grad: [], pseudo: [] },
  'other-batch': { fingerprint: [], grad: [], pseudo: [] },
};
const peers = Array.from({ length: setup.peers }, newPeer);
const cheater = newPeer();
let previous: { sent: QuantTensorResult[]; fp: Uint8Array } | null = null;
const started = performance.now();
const per = setup.inner * setup.batch;
for (let round = 0; round < setup.rounds; round++) {
  const seed = (0x1000 + round).toString(16).padStart(16, '0');
  const intervalOf = (p: number): BatchId => ({
    start: (round * setup.peers + p) * per,
    end: (round * setup.peers + p + 1) * per - 1,
  });
  const results: { sent: QuantTensorResult[]; fp: Uint8Array }[] = [];
  for (const [p, peer] of peers.entries()) {
    const fp = await trainFrom(peer, intervalOf(p), seed, p);
    results.push({ sent: await sparseLoCoSend(be, theta, peer.local, peer.ef, sendOf), fp });
  }
  // other-batch: honest work on samples far away, claimed for peer 0's interval (slot 0).
  const shift = 997 * per;
  const other = intervalOf(0);
  const otherFp = await trainFrom(cheater, { start: other.start + shift, end: other.end + shift }, seed, 0);
  const otherSent = await sparseLoCoSend(be, theta, cheater.local, cheater.ef, sendOf);
  const record = async (
    kind: Kind,
    v: Awaited<ReturnType<typeof verifierView>>,
    r: { sent: QuantTensorResult[]; fp: Uint8Array },
  ) => {
    seen[kind].fingerprint.push(fingerprintAgreement(r.fp, v.own));
    seen[kind].grad.push(await signAgreement(be, v.grad.grads, r.sent, setup.domain));
    seen[kind].pseudo.push(await signAgreement(be, v.delta, r.sent, setup.domain));
  };
  for (const [p, r] of results.entries()) {
    const v = await verifierView(intervalOf(p), seed, p);
    await record('honest', v, r);
    if (p === 0) {
      await record('random-signs', v, { ...r, sent: tamperSigns(r.sent, () => (random() < 0.5 ? 1 : 0)) });
      await record('sign-flip', v, { ...r, sent: tamperSigns(r.sent, (neg) => 1 - neg) });
      if (previous) await record('stale-replay', v, previous);
      await record('other-batch', v, { sent: otherSent, fp: otherFp });
    }
    v.grad.release();
    for (const t of [...v.delta, ...v.fresh.local, ...v.fresh.ef, ...v.fresh.adam.m, ...v.fresh.adam.v])
      be.release(t);
  }
  previous = results[0]!;
  outerStep(
    be,
    theta,
    results.map((r) => r.sent),
    { lr: 1, domain: setup.domain },
  );
  process.stderr.write(
    `round ${round + 1}/${setup.rounds}: honest grad ${seen.honest.grad
      .slice(-setup.peers)
      .map((x) => x.toFixed(3))
      .join(' ')}, pseudo ${seen.honest.pseudo
      .slice(-setup.peers)
      .map((x) => x.toFixed(3))
      .join(' ')}\n`,
  );
}
const stat = (xs: number[]) =>
  xs.length === 0
    ? null
    : [Math.min(...xs), xs.reduce((a, b) => a + b, 0) / xs.length, Math.max(...xs)].map((x) =>
        Number(x.toFixed(4)),
      );
const summary = Object.fromEntries(
  Object.entries(seen).map(([k, v]) => [
    k,
    { samples: v.grad.length, fingerprint: stat(v.fingerprint), grad: stat(v.grad), pseudo: stat(v.pseudo) },
  ]),
);
console.log(
  JSON.stringify({ setup, seconds: Math.round((performance.now() - started) / 1000), kinds: summary }),
);
