// Every gradient rule against central finite differences of the forward graph, in float64 on the CPU EP.
// Each case builds loss = Σ op(inputs) ⊙ R with a fixed random R (so every output element matters with a
// different weight), differentiates it, and compares every input element's gradient with (L(x+h) − L(x−h)) / 2h.
import type * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { gradients } from '../src/autodiff/autodiff.ts';
import { GraphBuilder } from '../src/graph/builder.ts';
import type { Value } from '../src/graph/ir.ts';
import { sizeOf } from '../src/graph/ir.ts';
import { PRESETS } from '../src/config.ts';
import { lmHeadLoss } from '../src/llama.ts';
import { emitOnnx } from '../src/onnx/emit.ts';
import { randomArray, rng, session, tensor, toF64 } from './ort-util.ts';

interface Case {
  name: string;
  inputs: { shape: number[]; positive?: boolean }[];
  f: (b: GraphBuilder, xs: Value[]) => Value;
}

const x0 = (xs: Value[]) => xs[0] as Value;
const x1 = (xs: Value[]) => xs[1] as Value;

const CASES: Case[] = [
  {
    name: 'Add (broadcast both ways)',
    inputs: [{ shape: [2, 1, 4] }, { shape: [3, 1] }],
    f: (b, xs) => b.add(x0(xs), x1(xs)),
  },
  {
    name: 'Sub (broadcast)',
    inputs: [{ shape: [3, 4] }, { shape: [4] }],
    f: (b, xs) => b.sub(x0(xs), x1(xs)),
  },
  {
    name: 'Mul (broadcast)',
    inputs: [{ shape: [2, 3, 4] }, { shape: [1, 3, 1] }],
    f: (b, xs) => b.mul(x0(xs), x1(xs)),
  },
  { name: 'Mul (same value twice)', inputs: [{ shape: [3, 4] }], f: (b, xs) => b.mul(x0(xs), x0(xs)) },
  {
    name: 'Div (broadcast)',
    inputs: [{ shape: [3, 4] }, { shape: [3, 1], positive: true }],
    f: (b, xs) => b.div(x0(xs), x1(xs)),
  },
  { name: 'Neg', inputs: [{ shape: [5] }], f: (b, xs) => b.neg(x0(xs)) },
  { name: 'Exp', inputs: [{ shape: [2, 3] }], f: (b, xs) => b.exp(x0(xs)) },
  { name: 'Log', inputs: [{ shape: [2, 3], positive: true }], f: (b, xs) => b.log(x0(xs)) },
  { name: 'Sqrt', inputs: [{ shape: [2, 3], positive: true }], f: (b, xs) => b.sqrt(x0(xs)) },
  { name: 'Sigmoid', inputs: [{ shape: [2, 3] }], f: (b, xs) => b.sigmoid(x0(xs)) },
  {
    name: 'MatMul 2D',
    inputs: [{ shape: [3, 4] }, { shape: [4, 5] }],
    f: (b, xs) => b.matmul(x0(xs), x1(xs)),
  },
  {
    name: 'MatMul 3D × Transpose(W) (Linear layout)',
    inputs: [{ shape: [2, 3, 4] }, { shape: [5, 4] }],
    f: (b, xs) => b.matmul(x0(xs), b.transpose(x1(xs), [1, 0])),
  },
  {
    name: 'MatMul batched with batch broadcast',
    inputs: [{ shape: [2, 3, 2, 4] }, { shape: [3, 4, 2] }],
    f: (b, xs) => b.matmul(x0(xs), x1(xs)),
  },
  {
    name: 'Reshape',
    inputs: [{ shape: [2, 6] }],
    f: (b, xs) => b.mul(b.reshape(x0(xs), [3, 4]), b.reshape(x0(xs), [3, 4])),
  },
  { name: 'Transpose', inputs: [{ shape: [2, 3, 4] }], f: (b, xs) => b.exp(b.transpose(x0(xs), [2, 0, 1])) },
  { name: 'Expand', inputs: [{ shape: [3, 1] }], f: (b, xs) => b.exp(b.expand(x0(xs), [2, 3, 4])) },
  { name: 'Slice (middle)', inputs: [{ shape: [2, 6] }], f: (b, xs) => b.exp(b.slice(x0(xs), 1, 2, 5)) },
  {
    name: 'Slice + Concat (rotate_half)',
    inputs: [{ shape: [2, 3, 6] }],
    f: (b, xs) => {
      const x = x0(xs);
      return b.concat([b.neg(b.slice(x, -1, 3, 6)), b.slice(x, -1, 0, 3)], -1);
    },
  },
  {
    name: 'Concat',
    inputs: [{ shape: [2, 2] }, { shape: [2, 3] }],
    f: (b, xs) => b.exp(b.concat([x0(xs), x1(xs)], 1)),
  },
  {
    name: 'ReduceSum (keepdims)',
    inputs: [{ shape: [2, 3, 4] }],
    f: (b, xs) => b.exp(b.reduceSum(x0(xs), [0, 2], true)),
  },
  {
    name: 'ReduceMean (no keepdims)',
    inputs: [{ shape: [2, 3, 4] }],
    f: (b, xs) => b.exp(b.reduceMean(x0(xs), [1], false)),
  },
  { name: 'Softmax (last axis)', inputs: [{ shape: [3, 5] }], f: (b, xs) => b.softmax(x0(xs), -1) },
  { name: 'Softmax (axis 0)', inputs: [{ shape: [3, 5] }], f: (b, xs) => b.softmax(x0(xs), 0) },
  {
    name: 'log-sum-exp with stop-gradient max',
    inputs: [{ shape: [3, 5] }],
    f: (b, xs) => {
      const x = x0(xs);
      const m = b.reduceMaxNoGrad(x, [-1], true);
      return b.add(m, b.log(b.reduceSum(b.exp(b.sub(x, m)), [-1], true)));
    },
  },
  {
    name: 'Gather (repeated ids, as many as rows) → one-hot MatMul gradient',
    inputs: [{ shape: [6, 3] }],
    f: (b, xs) => b.gather(x0(xs), b.constant([1, 4, 1, 0, 5, 1], 'int32', [2, 3])),
  },
  {
    name: 'Gather (repeated ids, fewer than rows) → token-group gradient',
    inputs: [{ shape: [11, 3] }],
    f: (b, xs) => b.gather(x0(xs), b.constant([7, 4, 7, 0, 10, 7, 4], 'int32', [7])),
  },
  {
    name: 'Cast is transparent for float → float',
    inputs: [{ shape: [4] }],
    f: (b, xs) =>
      b.exp(
        b.mul(
          x0(xs),
          b.cast(b.equal(b.constant([0, 1, 2, 3], 'int32', [4]), b.constant([1], 'int32', [1])), 'float64'),
        ),
      ),
  },
  {
    name: 'LM head + cross-entropy (withGradient group; dy folded into the Gemms)',
    inputs: [{ shape: [5, 3] }, { shape: [7, 3] }],
    f: (b, xs) => headLoss(b, xs),
  },
  {
    name: 'LM head + cross-entropy times a computed scale (dy not a constant)',
    inputs: [{ shape: [5, 3] }, { shape: [7, 3] }, { shape: [2] }],
    f: (b, xs) => b.mul(headLoss(b, xs), b.reduceSum(xs[2] as Value, [0], false)),
  },
];

/** The train step's loss over hidden states xs[0] [5, 3] and a tied head xs[1] [7 (vocab), 3]. */
function headLoss(b: GraphBuilder, xs: Value[]): Value {
  const config = { ...PRESETS.micro, vocab_size: 7, tie_word_embeddings: true };
  const targets = b.constant([0, 6, 3, 3, 1], 'int32', [5]);
  return lmHeadLoss(b, config, () => x1(xs), x0(xs), targets);
}

async function check(c: Case, seed: number): Promise<number> {
  const rand = rng(seed);
  const b = new GraphBuilder();
  const xs = c.inputs.map((inp, i) => b.input(`x${i}`, 'float64', inp.shape));
  const y = c.f(b, xs);
  const r = b.constant(randomArray(sizeOf(y.shape), rand), 'float64', y.shape, 'R');
  const loss = b.reduceSum(
    b.mul(y, r),
    y.shape.map((_, i) => i),
    false,
    'loss',
  );
  const grads = gradients(b, loss, xs);
  b.output(loss, 'loss');
  grads.forEach((g, i) => b.output(g, `grad.x${i}`));
  const s = await session(emitOnnx(b, { name: c.name }), 'cpu', 'float64');

  const values = c.inputs.map((inp) => {
    const v = randomArray(sizeOf(inp.shape), rand);
    return inp.positive ? v.map((x) => 0.5 + Math.abs(x)) : v;
  });
  const feeds = (vs: Float64Array[]): Record<string, ort.Tensor> =>
    Object.fromEntries(vs.map((v, i) => [`x${i}`, tensor('float64', v, c.inputs[i]?.shape ?? [])]));
  const out = await s.run(feeds(values));
  const lossAt = async (vs: Float64Array[]) => toF64((await s.run(feeds(vs))).loss)[0] ?? NaN;

  const h = 1e-6;
  let worst = 0;
  for (let i = 0; i < values.length; i++) {
    const g = toF64(out[`grad.x${i}`]);
    const base = values[i] as Float64Array;
    for (let j = 0; j < base.length; j++) {
      const plus = values.map((v, k) => (k === i ? v.map((x, m) => (m === j ? x + h : x)) : v));
      const minus = values.map((v, k) => (k === i ? v.map((x, m) => (m === j ? x - h : x)) : v));
      const fd = ((await lossAt(plus)) - (await lossAt(minus))) / (2 * h);
      const err = Math.abs((g[j] ?? NaN) - fd) / Math.max(1, Math.abs(fd));
      worst = Math.max(worst, err);
    }
  }
  await s.release();
  return worst;
}

describe('gradient rules vs central finite differences (float64, CPU EP)', () => {
  for (const [k, c] of CASES.entries()) {
    it(c.name, async () => {
      const worst = await check(c, 1000 + k);
      expect(worst).toBeLessThan(1e-7);
    });
  }

  it('a value the loss does not use gets a zero gradient', async () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float64', [3]);
    const unused = b.input('u', 'float64', [2, 2]);
    const loss = b.reduceSum(b.exp(x), [0], false);
    const [gx, gu] = gradients(b, loss, [x, unused]);
    b.output(loss, 'loss');
    b.output(gx as Value, 'gx');
    b.output(gu as Value, 'gu');
    const s = await session(emitOnnx(b, { name: 'unused' }), 'cpu', 'float64');
    const out = await s.run({
      x: tensor('float64', Float64Array.from([0, 1, 2]), [3]),
      u: tensor('float64', new Float64Array(4), [2, 2]),
    });
    expect(Array.from(toF64(out.gu))).toEqual([0, 0, 0, 0]);
    expect(toF64(out.gx)[2]).toBeCloseTo(Math.exp(2), 12);
  });

  it('rejects a non-scalar loss and ops without a rule', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float64', [3]);
    expect(() => gradients(b, b.exp(x), [x])).toThrow(/scalar/);
    const m = b.reduceMaxNoGrad(x, [0], false);
    // ReduceMax is marked stop-gradient, so the loss simply does not depend on x through it.
    const g = gradients(b, m, [x]);
    expect(g[0]?.data && Array.from(g[0].data)).toEqual([0, 0, 0]);
  });
});
