// The builder's shape inference, constant folding and naming, and the emitter's output as ORT reads it.
import { describe, expect, it } from 'vitest';
import { GraphBuilder, GraphError, broadcastShapes } from '../src/graph/builder.ts';
import { emitOnnx, liveNodes } from '../src/onnx/emit.ts';
import { int32Tensor, session, tensor, toF64 } from './ort-util.ts';

describe('shape inference', () => {
  it('broadcasts numpy-style and rejects mismatches', () => {
    expect(broadcastShapes([2, 1, 4], [3, 1])).toEqual([2, 3, 4]);
    expect(broadcastShapes([], [5])).toEqual([5]);
    expect(() => broadcastShapes([3], [4])).toThrow(GraphError);
  });

  it('infers static shapes through layout ops, matmul and reductions', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 5, 8]);
    const w = b.input('w', 'float32', [6, 8]);
    const y = b.matmul(x, b.transpose(w, [1, 0]));
    expect(y.shape).toEqual([2, 5, 6]);
    expect(b.matmul(b.input('a', 'float32', [3, 1, 4, 5]), b.input('c', 'float32', [2, 5, 7])).shape).toEqual(
      [3, 2, 4, 7],
    );
    expect(b.reduceMean(y, [-1], true).shape).toEqual([2, 5, 1]);
    expect(b.reduceSum(y, [0, 2], false).shape).toEqual([5]);
    expect(b.slice(y, 1, 1, 4).shape).toEqual([2, 3, 6]);
    expect(b.concat([y, y], -1).shape).toEqual([2, 5, 12]);
    expect(b.gather(w, b.input('ids', 'int32', [2, 3])).shape).toEqual([2, 3, 8]);
    expect(b.equal(b.input('t', 'int32', [4, 1]), b.constant([0, 1, 2], 'int32', [1, 3])).dtype).toBe('bool');
    expect(() => b.matmul(x, w)).toThrow(/inner dims/);
    expect(() => b.reshape(x, [3, 3])).toThrow(/sizes differ/);
    expect(() => b.slice(y, 1, 3, 9)).toThrow(/out of range/);
  });

  it('refuses ops that would run int64 data on the CPU under WebGPU', () => {
    const b = new GraphBuilder();
    const t = b.input('t', 'int64', [3]);
    expect(() => b.equal(t, t)).toThrow(/int64/);
    expect(() => b.cast(t, 'float32')).toThrow(/int64/);
    expect(() => b.gather(b.input('e', 'float32', [4, 2]), t)).toThrow(/int32/);
  });
});

describe('constant folding and simplification', () => {
  it('folds constant arithmetic in the value dtype', () => {
    const b = new GraphBuilder();
    const c = b.add(b.constant([0.1, 0.2], 'float32', [2]), b.scalar(0.2, 'float32'));
    expect(c.producer).toBeNull();
    expect(Array.from(c.data ?? [])).toEqual([
      Math.fround(Math.fround(0.1) + Math.fround(0.2)),
      Math.fround(Math.fround(0.2) * 2),
    ]);
    expect(b.nodes).toHaveLength(0);
  });

  it('drops neutral elements, identity layouts and chained reshapes/transposes', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 3, 4]);
    expect(b.mul(x, b.scalar(1, 'float32'))).toBe(x);
    expect(b.add(b.scalar(0, 'float32'), x)).toBe(x);
    expect(b.reshape(x, [2, 3, 4])).toBe(x);
    expect(b.transpose(x, [0, 1, 2])).toBe(x);
    expect(b.transpose(b.transpose(x, [1, 0, 2]), [1, 0, 2])).toBe(x);
    expect(b.reshape(b.reshape(x, [6, 4]), [2, 3, 4])).toBe(x);
    const r = b.reshape(b.reshape(x, [6, 4]), [24]);
    expect(r.producer?.inputs[0]).toBe(x);
    // Mul by 1 that broadcasts x to a bigger shape is not an identity.
    expect(b.mul(x, b.constant([1, 1], 'float32', [2, 1, 1, 1]))).not.toBe(x);
  });

  it('shares small constants and names nodes after their scope', () => {
    const b = new GraphBuilder();
    expect(b.scalar(2, 'float32')).toBe(b.scalar(2, 'float32'));
    expect(b.scalar(2, 'float32')).not.toBe(b.scalar(2, 'float64'));
    const x = b.input('x', 'float32', [2]);
    const y = b.scope('layers.0', () => b.scope('mlp', () => b.exp(x, 'act')));
    const z = b.scope('layers.0', () => b.scope('mlp', () => b.exp(x, 'act')));
    expect(y.producer?.name).toBe('layers.0/mlp/act');
    expect(z.producer?.name).toBe('layers.0/mlp/act_1');
  });
});

describe('ONNX emitter', () => {
  it('writes a model ORT runs, keeps only live nodes, renames outputs', async () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float64', [2, 3]);
    const ids = b.input('ids', 'int32', [2]);
    const dead = b.exp(x, 'dead');
    const e = b.gather(x, ids, 'rows'); // [2, 3]
    const y = b.add(b.softmax(b.mul(e, b.scalar(2, 'float64'))), b.constant([1, 2, 3], 'float64', [3]));
    b.output(y, 'y');
    b.output(b.reduceSum(x, [0, 1], false), 'total');
    const live = liveNodes(b);
    expect(live.map((n) => n.op)).not.toContain('Exp');
    expect(live).not.toContain(dead.producer);
    const s = await session(emitOnnx(b, { name: 'emit' }), 'cpu');
    expect(s.outputNames).toEqual(['y', 'total']);
    const xv = Float64Array.from([0.5, -1, 2, 3, 0, 1]);
    const out = await s.run({ x: tensor('float64', xv, [2, 3]), ids: int32Tensor([1, 0], [2]) });
    const row = [3, 0, 1].map((v) => Math.exp(2 * v));
    const z = row.reduce((p, q) => p + q, 0);
    expect(Array.from(toF64(out.y)).slice(0, 3)).toEqual(
      row.map((v, i) => v / z + i + 1).map((v) => expect.closeTo(v, 14)),
    );
    expect(toF64(out.total)[0]).toBeCloseTo(5.5, 14);
  });

  it('routes an input or constant declared as output through Identity', async () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2]);
    b.output(x, 'same');
    const s = await session(emitOnnx(b, { name: 'id' }), 'cpu');
    const out = await s.run({ x: tensor('float32', Float64Array.from([1, 2]), [2]) });
    expect(Array.from(toF64(out.same))).toEqual([1, 2]);
  });
});
