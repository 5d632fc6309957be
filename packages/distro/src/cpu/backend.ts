// The CPU reference backend: float32 state in Float32Arrays, transforms accumulated in float64, and the
// exact integer decode for apply (shared semantics with the WGSL kernels, different code).
import type { DistroBackend, DistroTensor } from '../backend.ts';
import { dctBasis64 } from '../dct.ts';
import { updateBits } from '../exact-update.ts';
import { coefficientOffset, DistroShapeError, sameShape, tensorLayout, type BlockLayout } from '../layout.ts';
import { checkResult } from '../result.ts';
import { blockDct, decodeSigns, topkResult } from './blocks.ts';
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

function same(a: DistroTensor, b: DistroTensor): void {
  if (!sameShape(a.shape, b.shape)) throw new DistroShapeError(`shape mismatch [${a.shape}] vs [${b.shape}]`);
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
      same(delta, grad);
      const d = cpu(delta).data;
      const g = cpu(grad).data;
      const fd = Math.fround(decay);
      const fl = Math.fround(lr);
      for (let i = 0; i < d.length; i++) {
        const kept = fd === 1 ? (d[i] as number) : Math.fround(fd * (d[i] as number));
        d[i] = kept + Math.fround(fl * (g[i] as number));
      }
    },
    async sumOfSquares(t) {
      let s = 0;
      for (const v of cpu(t).data) s += v * v;
      return s;
    },
    scale(t, factor) {
      const d = cpu(t).data;
      const f = Math.fround(factor);
      for (let i = 0; i < d.length; i++) d[i] = f * (d[i] as number);
    },
    signStep(out, params, delta, lr) {
      same(out, params);
      same(params, delta);
      const o = cpu(out).data;
      const p = cpu(params).data;
      const d = cpu(delta).data;
      const fl = Math.fround(lr);
      for (let i = 0; i < o.length; i++) o[i] = (p[i] as number) - fl * Math.sign(d[i] as number);
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
      const x = cpu(delta).data;
      const F1 = dctBasis64(l.n1);
      const F2 = dctBasis64(l.n2);
      const acc = new Float64Array(l.totalk);
      for (let blk = 0; blk < l.blocks; blk++) {
        acc.fill(0);
        for (let j = blk * own.k; j < (blk + 1) * own.k; j++) {
          const c = own.indices[j] as number;
          const b = Math.floor(c / l.n2);
          const d = c - b * l.n2;
          const v = own.values[j] as number;
          for (let h = 0; h < l.n1; h++) {
            const a = v * (F1[b * l.n1 + h] as number);
            for (let w = 0; w < l.n2; w++) acc[h * l.n2 + w]! += a * (F2[d * l.n2 + w] as number);
          }
        }
        const by = Math.floor(blk / l.blocksX);
        const base = by * l.n1 * l.cols + (blk - by * l.blocksX) * l.n2;
        for (let h = 0; h < l.n1; h++)
          for (let w = 0; w < l.n2; w++)
            x[base + h * l.cols + w] = (x[base + h * l.cols + w] as number) - (acc[h * l.n2 + w] as number);
      }
    },
    applyAggregated(param, agg, u) {
      const l = layoutOf(param);
      if (!sameShape(agg.layout.xshape, l.xshape))
        throw new DistroShapeError('aggregate was built for another layout');
      const bits = new Uint32Array(cpu(param).data.buffer);
      const hi = new Float64Array(l.totalk);
      const lo = new Float64Array(l.totalk);
      const signs = new Int8Array(l.totalk);
      for (let blk = 0; blk < l.blocks; blk++) {
        decodeSigns(agg, blk, hi, lo, signs);
        const by = Math.floor(blk / l.blocksX);
        const base = by * l.n1 * l.cols + (blk - by * l.blocksX) * l.n2;
        for (let h = 0; h < l.n1; h++)
          for (let w = 0; w < l.n2; w++)
            updateBits(bits, base + h * l.cols + w, u, signs[h * l.n2 + w] as number);
      }
    },
    ...cpuSparseLoCoOps({ layoutOf, data: (t) => cpu(t).data }),
    async finish() {},
    destroy() {},
  };
}
