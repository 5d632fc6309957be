// Contraction FLOPs: per node from its shapes and transposes, and for whole train steps against the textbook
// count (forward, then a gradient for each operand: three times the forward's linears and attention).
import { describe, expect, it } from 'vitest';
import { PRESETS, type PresetName } from '../src/config.ts';
import { GraphBuilder } from '../src/graph/builder.ts';
import { contractionFlops, matmulFlops } from '../src/graph/flops.ts';
import { liveNodes } from '../src/onnx/emit.ts';
import { buildTrainStep } from '../src/train-step.ts';

describe('contractionFlops', () => {
  it('counts 2·m·n·k per product, batched, with Gemm reading its operands transposed', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 3, 4]);
    const w = b.input('w', 'float32', [4, 5]);
    const at = b.input('at', 'float32', [4, 3]);
    const a = b.input('a', 'float32', [3, 4]);
    const bt = b.input('bt', 'float32', [5, 4]);
    b.output(b.matmul(x, w), 'batched');
    b.output(b.gemm(at, w, { transA: true }), 'ta');
    b.output(b.gemm(a, bt, { transB: true, c: b.input('c', 'float32', [3, 5]) }), 'tb');
    b.output(b.add(x, x), 'elementwise');
    const nodes = liveNodes(b);
    expect(nodes.map((n) => [n.op, contractionFlops(n)])).toEqual([
      ['MatMul', 2 * 2 * 3 * 5 * 4],
      ['Gemm', 2 * 3 * 5 * 4],
      ['Gemm', 2 * 3 * 5 * 4],
      ['Add', 0],
    ]);
    expect(matmulFlops(nodes)).toBe(240 + 120 + 120);
  });
});

describe('a train step', () => {
  for (const name of ['micro', 'tiny', '20m'] as PresetName[])
    it(`${name}: three times the forward's linears and attention, within 2 %`, () => {
      const c = PRESETS[name];
      const [batch, seq] = [2, 16];
      const tokens = batch * seq;
      const [d, ff, layers] = [c.hidden_size, c.intermediate_size, c.num_hidden_layers];
      const head = d / c.num_attention_heads;
      const kv = c.num_key_value_heads * head;
      const linears = 2 * tokens * (d * (d + 2 * kv) + d * d + 2 * d * ff + ff * d) * layers;
      const logits = 2 * tokens * d * c.vocab_size;
      const attention = 2 * 2 * batch * c.num_attention_heads * seq * seq * head * layers;
      const textbook = 3 * (linears + logits + attention);
      const f = buildTrainStep(c, { batchSize: batch, seqLen: seq, dtype: 'float32' }).matmulFlops;
      // The rest: RMSNorm's and the embedding's gradients, written as small products.
      expect(f).toBeGreaterThanOrEqual(textbook);
      expect(f / textbook).toBeLessThan(1.02);
    });
});
