// SparseLoCo's operations on the CPU reference backend (float32 state in Float32Arrays). The outer step
// decodes from the host aggregate with integers and exactly rounded float64 steps only (outer.ts), so it
// matches the WGSL kernels bit for bit although the two compute it differently.
import type { DistroTensor } from '../backend.ts';
import { roundToF32, updateValue } from '../exact-update.ts';
import { checkSameShapes, DistroShapeError, sameShape, type BlockLayout } from '../layout.ts';
import { checkResult } from '../result.ts';
import type { AdamWScalars } from '../sparseloco/adamw.ts';
import type { SparseLoCoOps } from '../sparseloco/ops.ts';
import { F32_MAX, type DctOuterAggregate, type RawOuterAggregate } from '../sparseloco/outer.ts';
import { accumulateExact, blockDct, topkResult } from './blocks.ts';

export interface CpuContext {
  layoutOf(t: DistroTensor): BlockLayout;
  data(t: DistroTensor): Float32Array;
}

const fr = Math.fround;

/** Float32 bits of p ← RN_f32(p − step·a); non-finite parameters stay as they are (as DisTrO's apply). */
function outerUpdate(bits: Uint32Array, data: Float32Array, i: number, step: number, a: number): void {
  if (((bits[i] as number) & 0x7f800000) === 0x7f800000) return;
  data[i] = updateValue(data[i] as number, 1, step, a);
}

function applyRaw(data: Float32Array, agg: RawOuterAggregate, step: number): void {
  const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
  for (let j = 0; j < agg.element.length; j++)
    outerUpdate(bits, data, agg.element[j] as number, step, agg.value[j] as number);
}

/**
 * Per element, S = HI·2^15 + LO exactly (accumulateExact), then A = RN_f32(S·2^−(30+shift)): the float64
 * sum of S's two parts and its TwoSum error are scaled by a power of two (exact) and rounded once.
 */
function applyDct(data: Float32Array, l: BlockLayout, o: DctOuterAggregate, step: number): void {
  const { agg } = o;
  const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
  const hi = new Float64Array(l.totalk);
  const lo = new Float64Array(l.totalk);
  for (let blk = 0; blk < l.blocks; blk++) {
    if (agg.blockStart[blk] === agg.blockStart[blk + 1]) continue;
    accumulateExact(agg, blk, hi, lo);
    const scale = 2 ** -(30 + (agg.shift[blk] as number));
    const by = Math.floor(blk / l.blocksX);
    const base = by * l.n1 * l.cols + (blk - by * l.blocksX) * l.n2;
    for (let h = 0; h < l.n1; h++)
      for (let w = 0; w < l.n2; w++) {
        const L = lo[h * l.n2 + w] as number;
        const carry = Math.floor(L / 32768);
        const t = ((hi[h * l.n2 + w] as number) + carry) * 32768; // exact: |HI + carry| < 2^47
        const r = L - carry * 32768; // 0 ≤ r < 2^15
        const d = t + r;
        const e = r - (d - t); // Fast2Sum: |t| ≥ |r| whenever t ≠ 0
        let a = roundToF32(d * scale, e * scale);
        if (!Number.isFinite(a)) a = Math.sign(a) * F32_MAX;
        outerUpdate(bits, data, base + h * l.cols + w, step, a);
      }
  }
}

export function cpuSparseLoCoOps(ctx: CpuContext): SparseLoCoOps {
  return {
    copy(dst, src) {
      checkSameShapes(dst, src);
      ctx.data(dst).set(ctx.data(src));
    },
    adamw(param, grad, m, v, s: AdamWScalars) {
      checkSameShapes(param, grad, m, v);
      const p = ctx.data(param);
      const g = ctx.data(grad);
      const M = ctx.data(m);
      const V = ctx.data(v);
      for (let i = 0; i < p.length; i++) {
        const gi = g[i] as number;
        const mi = fr((M[i] as number) + fr(s.gradWeight * fr(gi - (M[i] as number))));
        const vi = fr(fr(s.beta2 * (V[i] as number)) + fr(fr(s.sqWeight * gi) * gi));
        const denom = fr(fr(fr(Math.sqrt(vi)) / s.bc2Sqrt) + s.eps);
        M[i] = mi;
        V[i] = vi;
        p[i] = fr(fr((p[i] as number) * s.decay) - fr(fr(s.stepSize * mi) / denom));
      }
    },
    errorFeedback(ef, start, local, beta) {
      checkSameShapes(ef, start, local);
      const e = ctx.data(ef);
      const a = ctx.data(start);
      const b = ctx.data(local);
      const fb = fr(beta);
      for (let i = 0; i < e.length; i++)
        e[i] = fr(fb * (e[i] as number)) + fr((a[i] as number) - (b[i] as number));
    },
    async selectTopk(t, topk, domain) {
      const l = ctx.layoutOf(t);
      if (domain === 'raw') return topkResult(l, ctx.data(t), topk);
      if (domain !== 'dct') throw new DistroShapeError(`unknown domain ${String(domain)}`);
      const coef = new Float32Array(l.size);
      blockDct(l, ctx.data(t), coef);
      return topkResult(l, coef, topk);
    },
    subtractSparse(t, r) {
      const l = ctx.layoutOf(t);
      checkResult(r, l, 'own result');
      const x = ctx.data(t);
      for (let j = 0; j < r.indices.length; j++) {
        const blk = Math.floor(j / r.k);
        const e = r.indices[j] as number;
        const h = Math.floor(e / l.n2);
        const by = Math.floor(blk / l.blocksX);
        const i = (by * l.n1 + h) * l.cols + (blk - by * l.blocksX) * l.n2 + (e - h * l.n2);
        x[i] = (x[i] as number) - (r.values[j] as number);
      }
    },
    applyOuter(param, agg, step) {
      const l = ctx.layoutOf(param);
      if (!sameShape(agg.layout.xshape, l.xshape))
        throw new DistroShapeError('aggregate was built for another layout');
      if (agg.domain === 'raw') applyRaw(ctx.data(param), agg, fr(step));
      else applyDct(ctx.data(param), l, agg, fr(step));
    },
  };
}
