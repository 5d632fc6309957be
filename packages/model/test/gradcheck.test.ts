// The float64 train step's gradients against central finite differences of its own loss-only forward graph
// (no autodiff involved in the reference), for sampled entries of EVERY parameter tensor, on the CPU EP.
import type * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { type LlamaConfig, PRESETS, parameterSpecs } from '../src/config.ts';
import { buildTrainStep } from '../src/train-step.ts';
import { feeds, randomParams, randomTokens, rng, session, toF64 } from './ort-util.ts';

interface EntryCheck {
  tensor: string;
  index: number;
  grad: number;
  fd: number;
}

/**
 * Picks `perTensor` entries per tensor: the largest-|g| one, the rest at random among entries with
 * |g| ≥ 1e-3·max|g| (below that, FD round-off ~1e-11 would dominate a relative error), plus one entry whose
 * analytic gradient is exactly zero when the tensor has one (an unused embedding row): FD must agree it is 0.
 */
async function gradcheck(config: LlamaConfig, batch: number, seq: number, perTensor: number, seed: number) {
  const params = randomParams(config, seed);
  const tokens = randomTokens(config, batch, seq + 1, seed + 1);
  const opts = { batchSize: batch, seqLen: seq, dtype: 'float64' as const };
  const step = await session(buildTrainStep(config, opts).onnx, 'cpu', 'float64');
  const fwd = await session(buildTrainStep(config, { ...opts, withGradients: false }).onnx, 'cpu', 'float64');
  const f = feeds(config, params, tokens, 'float64');
  const out = await step.run(f);
  const loss0 = toF64(out.loss)[0] ?? NaN;
  const lossOf = async (fs: Record<string, ort.Tensor>) => toF64((await fwd.run(fs)).loss)[0] ?? NaN;
  expect(Math.abs((await lossOf(f)) - loss0)).toBeLessThan(1e-12 * loss0);

  const h = 1e-5;
  const rand = rng(seed + 2);
  const checks: EntryCheck[] = [];
  const zeros: EntryCheck[] = [];
  for (const p of parameterSpecs(config)) {
    const g = toF64(out[`grad.${p.name}`]);
    const data = f[p.name]?.data as Float64Array; // mutated in place between runs, restored after each entry
    let top = 0;
    g.forEach((v, i) => {
      if (Math.abs(v) > Math.abs(g[top] ?? 0)) top = i;
    });
    const big = Math.abs(g[top] ?? 0) * 1e-3;
    const candidates = [...g.keys()].filter((i) => i !== top && Math.abs(g[i] ?? 0) >= big);
    const picked = [top];
    while (picked.length < perTensor && candidates.length)
      picked.push(candidates.splice(Math.floor(rand() * candidates.length), 1)[0] ?? 0);
    const zero = [...g.keys()].find((i) => g[i] === 0);
    for (const index of zero === undefined ? picked : [...picked, zero]) {
      const x = data[index] ?? NaN;
      data[index] = x + h;
      const up = await lossOf(f);
      data[index] = x - h;
      const down = await lossOf(f);
      data[index] = x;
      const c = { tensor: p.name, index, grad: g[index] ?? NaN, fd: (up - down) / (2 * h) };
      (index === zero ? zeros : checks).push(c);
    }
  }
  await step.release();
  await fwd.release();
  return { checks, zeros, loss: loss0 };
}

function report(checks: EntryCheck[]) {
  const rel = checks.map((c) => ({
    ...c,
    rel: Math.abs(c.grad - c.fd) / Math.max(Math.abs(c.grad), Math.abs(c.fd)),
  }));
  rel.sort((a, b) => b.rel - a.rel);
  return rel;
}

describe('float64 gradients vs central finite differences (CPU EP)', () => {
  it('micro: every tensor, 6 entries each (GQA, untied head)', async () => {
    const { checks, zeros } = await gradcheck(PRESETS.micro, 2, 8, 6, 11);
    const tensors = new Set(checks.map((c) => c.tensor));
    expect(tensors.size).toBe(parameterSpecs(PRESETS.micro).length);
    const worst = report(checks);
    console.log(
      `micro gradcheck: ${checks.length} entries, worst rel err ${worst[0]?.rel.toExponential(2)} (${worst[0]?.tensor})`,
    );
    for (const c of worst)
      expect(c.rel, `${c.tensor}[${c.index}] grad ${c.grad} fd ${c.fd}`).toBeLessThan(1e-6);
    expect(zeros.length).toBeGreaterThan(0); // unused embedding / lm_head rows
    for (const z of zeros) expect(Math.abs(z.fd), `${z.tensor}[${z.index}]`).toBeLessThan(1e-9);
  });

  it('tiny: every tensor, 2 entries each (tied embeddings)', async () => {
    const { checks } = await gradcheck(PRESETS.tiny, 1, 12, 2, 21);
    expect(new Set(checks.map((c) => c.tensor)).size).toBe(parameterSpecs(PRESETS.tiny).length);
    const worst = report(checks);
    console.log(
      `tiny gradcheck: ${checks.length} entries, worst rel err ${worst[0]?.rel.toExponential(2)} (${worst[0]?.tensor})`,
    );
    for (const c of worst)
      expect(c.rel, `${c.tensor}[${c.index}] grad ${c.grad} fd ${c.fd}`).toBeLessThan(1e-6);
  });
});
