// The Llama graphs: I/O contract, the op audit that keeps the graph GPU-placeable, and the loss / logits
// against an independent plain-loop float64 implementation of HF Llama math (reference-llama.ts).
import { describe, expect, it } from 'vitest';
import { type LlamaConfig, PRESETS, parameterSpecs } from '../src/config.ts';
import { sizeOf } from '../src/graph/ir.ts';
import { buildInference } from '../src/inference.ts';
import { buildTrainStep, trainStepGraph } from '../src/train-step.ts';
import { referenceLlama } from './reference-llama.ts';
import { feeds, randomParams, randomTokens, session, toF64 } from './ort-util.ts';

/**
 * Ops the WebGPU EP runs on the GPU in f32 (docs/architecture.md "Runtime notes") and the CPU EP runs in f64.
 */
const GPU_OPS = new Set([
  'Add', 'Sub', 'Mul', 'Div', 'Neg', 'Exp', 'Log', 'Sqrt', 'Sigmoid', 'Identity', 'Cast', 'Equal', 'MatMul',
  'Reshape', 'Transpose', 'Expand', 'Slice', 'Concat', 'ReduceSum', 'ReduceMean', 'ReduceMax', 'Softmax', 'Gather',
  'Gemm', 'Split', 'ReduceSumSquare', 'GatherElements', 'ScatterElements',
  // ORT contrib kernels the WebGPU EP implements; float32 graphs only (float64 ones build these from primitives).
  'SimplifiedLayerNormalization', 'QuickGelu', 'RotaryEmbedding',
]); // prettier-ignore
const FORBIDDEN = [
  'LogSoftmax',
  'OneHot',
  'Sum',
  'Mean',
  'Sign',
  'ConstantOfShape',
  'SoftmaxCrossEntropyLoss',
  'Attention',
  'FusedMatMul',
  'Dropout',
  'ScatterND',
];

/** A GQA variant of tiny with untied head, to cover the other branch of each option. */
const TINY_GQA: LlamaConfig = {
  ...PRESETS.tiny,
  num_key_value_heads: 2,
  tie_word_embeddings: false,
  num_hidden_layers: 2,
};

describe('train-step graph contract', () => {
  it('takes HF-named parameters and int32 tokens [B, T+1]; returns loss and one gradient per parameter', () => {
    const g = buildTrainStep(PRESETS.micro, { batchSize: 2, seqLen: 8, dtype: 'float32' });
    const specs = parameterSpecs(PRESETS.micro);
    expect(g.inputs).toEqual([
      ...specs.map((p) => ({ name: p.name, shape: p.shape, dtype: 'float32' })),
      { name: 'tokens', shape: [2, 9], dtype: 'int32' },
    ]);
    expect(g.outputs).toEqual([
      { name: 'loss', shape: [], dtype: 'float32' },
      ...specs.map((p) => ({ name: `grad.${p.name}`, shape: p.shape, dtype: 'float32' })),
    ]);
  });

  it('rejects bad options with a message naming the field', () => {
    expect(() => buildTrainStep(PRESETS.micro, { batchSize: 1, seqLen: 65, dtype: 'float32' })).toThrow(
      /max_position_embeddings/,
    );
    expect(() =>
      buildTrainStep(
        { ...PRESETS.micro, num_key_value_heads: 3 },
        { batchSize: 1, seqLen: 4, dtype: 'float32' },
      ),
    ).toThrow(/num_key_value_heads/);
  });

  for (const [name, config] of [
    ['micro', PRESETS.micro],
    ['tiny', PRESETS.tiny],
    ['tiny-gqa-untied', TINY_GQA],
  ] as const) {
    it(`${name}: uses only GPU-placeable ops; int64 only in constant shape/axes initializers`, () => {
      const b = trainStepGraph(config, { batchSize: 2, seqLen: 8, dtype: 'float32' });
      const ops = new Set(b.nodes.map((n) => n.op));
      for (const op of ops) expect(GPU_OPS, `op ${op}`).toContain(op);
      for (const op of FORBIDDEN) expect(ops).not.toContain(op);
      for (const n of b.nodes) {
        for (const out of n.outputs) expect(out.dtype, `${n.name} output`).not.toBe('int64');
        n.inputs.forEach((v, k) => {
          if (v.dtype !== 'int64') return;
          expect(v.data, `${n.name} int64 input must be a constant`).not.toBeNull();
          // Only the spec-mandated int64 index inputs: Reshape/Expand shape, Reduce axes, Slice starts/ends/axes,
          // Split sizes, RotaryEmbedding position ids.
          expect([
            'Reshape',
            'Expand',
            'ReduceSum',
            'ReduceMean',
            'ReduceMax',
            'ReduceSumSquare',
            'Slice',
            'Split',
            'RotaryEmbedding',
          ]).toContain(n.op);
          expect(k).toBeGreaterThan(0);
        });
        if (n.op === 'Cast') expect(n.inputs[0]?.dtype).not.toBe('int64');
        // Without a reduction each index is written once: the result does not depend on a GPU's write order.
        if (n.op === 'ScatterElements') expect(n.attrs.reduction, n.name).toBeUndefined();
      }
      for (const v of b.inputs) expect(v.dtype === 'int64').toBe(false);
    });
  }
});

describe('train-step graph: [tokens × vocab] values', () => {
  // A vocabulary no other dimension of these models equals, so [tokens, vocab] sizes are the loss's alone.
  for (const [name, config] of [
    ['micro', { ...PRESETS.micro, vocab_size: 301 }],
    ['tiny-gqa-untied', { ...TINY_GQA, vocab_size: 301 }],
  ] as const) {
    it(`${name}: only the logits, their softmax and dLogits (no one-hot for the loss)`, () => {
      const [batch, seq] = [3, 7];
      const tokens = batch * seq;
      const vocab = config.vocab_size;
      for (const dtype of ['float32', 'float64'] as const) {
        const b = trainStepGraph(config, { batchSize: batch, seqLen: seq, dtype });
        const big = b.nodes.filter((n) =>
          n.outputs.some((o) => sizeOf(o.shape) === tokens * vocab && o.shape.includes(vocab)),
        );
        expect(big.map((n) => `${n.op} ${n.name}`)).toEqual([
          'Gemm lm_head/logits',
          'Softmax loss/probs',
          'ScatterElements grad/loss/loss/dlogits',
        ]);
        // The embedding's gradient (rules.ts, Gather) groups equal tokens, [tokens, tokens], instead of a
        // [vocab, tokens] one-hot: fewer tokens than vocabulary entries here.
        const groups = b.nodes.find((n) => n.name === 'grad/embed_tokens/lookup/same_token');
        expect(groups?.outputs[0]?.shape).toEqual([tokens, tokens]);
        expect(
          b.nodes
            .filter((n) => n.name.startsWith('loss/') || n.name.startsWith('grad/loss/'))
            .map((n) => n.op),
        ).not.toContain('Equal');
      }
    });
  }
});

describe('HF Llama math: ONNX float64 vs an independent plain-loop reference', () => {
  for (const [name, config, batch, seq] of [
    ['micro', PRESETS.micro, 2, 8],
    ['tiny', PRESETS.tiny, 2, 6],
    ['tiny-gqa-untied', TINY_GQA, 1, 5],
  ] as const) {
    it(`${name}: train-step loss and inference logits match to 1e-10`, async () => {
      const params = randomParams(config, 7);
      const tokens = randomTokens(config, batch, seq + 1, 8);
      const ref = referenceLlama(config, (n) => params.get(n) ?? new Float64Array(0), tokens);

      const step = await session(
        buildTrainStep(config, { batchSize: batch, seqLen: seq, dtype: 'float64', withGradients: false })
          .onnx,
        'cpu',
        'float64',
      );
      const loss = toF64((await step.run(feeds(config, params, tokens, 'float64'))).loss)[0] ?? NaN;
      expect(Math.abs(loss - ref.loss) / ref.loss).toBeLessThan(1e-10);
      expect(loss).toBeGreaterThan(1); // a real, non-degenerate loss

      const inf = await session(
        buildInference(config, { batchSize: batch, seqLen: seq, dtype: 'float64' }).onnx,
        'cpu',
        'float64',
      );
      const logits = toF64(
        (
          await inf.run(
            feeds(
              config,
              params,
              tokens.map((r) => r.slice(0, seq)),
              'float64',
            ),
          )
        ).logits,
      );
      const V = config.vocab_size;
      for (let b = 0; b < batch; b++) {
        const refRow = ref.logits.subarray(((b + 1) * seq - 1) * V, (b + 1) * seq * V);
        const row = logits.subarray(b * V, (b + 1) * V);
        let worst = 0;
        refRow.forEach(
          (v, j) => (worst = Math.max(worst, Math.abs(v - (row[j] ?? NaN)) / Math.max(1, Math.abs(v)))),
        );
        expect(worst).toBeLessThan(1e-10);
      }
      await step.release();
      await inf.release();
    });
  }

  it('the comparison is sensitive: 1% off in rope_theta breaks the agreement', async () => {
    // Guard against a reference that agrees with anything: perturbing rope_theta in the graph only must break
    // the 1e-10 agreement by orders of magnitude.
    const config = PRESETS.micro;
    const params = randomParams(config, 7);
    const tokens = randomTokens(config, 1, 9, 8);
    const ref = referenceLlama(config, (n) => params.get(n) ?? new Float64Array(0), tokens);
    const off = { ...config, rope_theta: config.rope_theta * 1.01 };
    const s = await session(
      buildTrainStep(off, { batchSize: 1, seqLen: 8, dtype: 'float64', withGradients: false }).onnx,
      'cpu',
      'float64',
    );
    const loss = toF64((await s.run(feeds(off, params, tokens, 'float64'))).loss)[0] ?? NaN;
    expect(Math.abs(loss - ref.loss) / ref.loss).toBeGreaterThan(1e-7);
  });
});
