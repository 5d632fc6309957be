// The CPU reference backend: float32 state in Float32Arrays, transforms accumulated in float64, and the
// exact integer decode for apply (shared semantics with the WGSL kernels, different code).
import type { DistroBackend, DistroTensor } from '../backend.ts';
import {
  checkSameShapes,
  coefficientOffset,
  DistroShapeError,
  sameShape,
  tensorLayout,
  type BlockLayout,
} from '../layout.ts';
import { checkResult } from '../result.ts';
import { blockDct, topkResult } from './blocks.ts';
import { applyAggregated, subtractResidual } from './decode.ts';
import { momentum, scale, signStep } from './elementwise-ops.ts';
import { cpuSparseLoCoOps } from './sparseloco.ts';

class CpuTensor implements DistroTensor {
  readonly shape: readonly number[];
  readonly size: number;
  readonly data: Float32Array;
  constructor(shape: readonly number[], data: Float32Array) {
    this.shape = [...shape];
    this.size = data.length;
    this.data = data;
  }
}

function cpu(t: DistroTensor): CpuTensor {
  if (!(t instanceof CpuTensor)) throw new TypeError('tensor belongs to another backend');
  return t;
}

function sumSquares(data: Float32Array): number {
  let s = 0;
  for (const v of data) s += v * v;
  return s;
}

export function createCpuBackend(options: { chunk: number }): DistroBackend {
  const chunk = options.chunk;
  tensorLayout([1], chunk); // validates the chunk
  const layoutOf = (t: DistroTensor): BlockLayout => tensorLayout(t.shape, chunk);
  return {
    kind: 'cpu',
    description: 'CPU reference (TypeScript)',
    chunk,
    tensor(shape, data) {
      const size = shape.reduce((a, b) => a * b, 1);
      if (data && data.length !== size)
        throw new DistroShapeError(`data has ${data.length} values, shape [${shape}] needs ${size}`);
      return new CpuTensor(shape, data ? Float32Array.from(data) : new Float32Array(size));
    },
    async read(t) {
      return Float32Array.from(cpu(t).data);
    },
    async gather(t, offsets) {
      const data = cpu(t).data;
      return Float32Array.from(offsets, (o) => {
        if (o >= data.length) throw new DistroShapeError(`offset ${o} outside a tensor of ${data.length}`);
        return data[o] as number;
      });
    },
    write(t, data) {
      if (data.length !== t.size)
        throw new DistroShapeError(`write of ${data.length} values into a tensor of ${t.size}`);
      cpu(t).data.set(data);
    },
    release() {},
    momentum(delta, grad, decay, lr) {
      checkSameShapes(delta, grad);
      momentum(cpu(delta).data, cpu(grad).data, decay, lr);
    },
    async sumOfSquares(t) {
      return sumSquares(cpu(t).data);
    },
    async sumsOfSquares(ts) {
      return ts.map((t) => sumSquares(cpu(t).data));
    },
    scale(t, factor) {
      scale(cpu(t).data, factor);
    },
    signStep(out, params, delta, lr) {
      checkSameShapes(out, params);
      checkSameShapes(params, delta);
      signStep(cpu(out).data, cpu(params).data, cpu(delta).data, lr);
    },
    async compress(delta, topk) {
      const l = layoutOf(delta);
      const coef = new Float32Array(l.size);
      blockDct(l, cpu(delta).data, coef);
      return topkResult(l, coef, topk);
    },
    async coefficientsAt(t, indices, k) {
      const l = layoutOf(t);
      if (indices.length !== l.blocks * k)
        throw new DistroShapeError(`${indices.length} indices for ${l.blocks} blocks of ${k}`);
      const coef = new Float32Array(l.size);
      blockDct(l, cpu(t).data, coef);
      return Float32Array.from(indices, (e, i) => coef[coefficientOffset(l, Math.floor(i / k), e)] as number);
    },
    subtractResidual(delta, own) {
      const l = layoutOf(delta);
      checkResult(own, l, 'own result');
      subtractResidual(l, cpu(delta).data, own);
    },
    applyAggregated(param, agg, u) {
      const l = layoutOf(param);
      if (!sameShape(agg.layout.xshape, l.xshape))
        throw new DistroShapeError('aggregate was built for another layout');
      applyAggregated(l, cpu(param).data, agg, u);
    },
    ...cpuSparseLoCoOps({ layoutOf, data: (t) => cpu(t).data }),
    async finish() {},
    destroy() {},
  };
}
