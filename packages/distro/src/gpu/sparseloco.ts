// SparseLoCo's operations on the WGSL backend. Like every kernel of this backend they run per segment
// (gpu/segments.ts), so no binding exceeds the device's limits; top-k lives in backend.ts next to compress,
// whose kernels it shares.
import type { DistroTensor } from '../backend.ts';
import { DistroShapeError, sameShape } from '../layout.ts';
import { checkResult, type TensorResult } from '../result.ts';
import type { AdamWScalars } from '../sparseloco/adamw.ts';
import type { SparseLoCoOps } from '../sparseloco/ops.ts';
import type { DctOuterAggregate, RawOuterAggregate } from '../sparseloco/outer.ts';
import type { GpuTensor, Part } from './backend.ts';
import { bitsOf, type GpuOp } from './op.ts';
import * as S from './sparseloco-wgsl.ts';
import { ELEMENTWISE_WG } from './wgsl.ts';

/** What the kernels here need from the backend that owns the device. */
export interface GpuContext {
  readonly device: GPUDevice;
  submit(cmds: GPUCommandBuffer[]): void;
  gpu(t: DistroTensor): GpuTensor;
  /** `data` in a buffer kept across calls under `name`, written before the next submit. */
  input(name: string, data: ArrayBufferView): GPUBuffer;
  /** A new operation: its dispatches go out in one submit. */
  op(): GpuOp;
  grid(groups: number): { x: number; y: number };
  bind(p: Part): GPUBufferBinding;
  basisPair(n1: number, n2: number, kind: 'int'): { buffer: GPUBuffer; off2: number };
}

function sameShapes(...ts: DistroTensor[]): void {
  for (const t of ts.slice(1))
    if (!sameShape(ts[0]!.shape, t.shape))
      throw new DistroShapeError(`shape mismatch [${ts[0]!.shape}] vs [${t.shape}]`);
}

export function gpuSparseLoCoOps(ctx: GpuContext): Omit<SparseLoCoOps, 'selectTopk'> {
  const whole = (buffer: GPUBuffer): GPUBufferBinding => ({ buffer });
  /** `count` invocations; uniform words are (count, stride, ...words). */
  function dispatch(
    o: GpuOp,
    code: string,
    count: number,
    words: number[],
    bindings: GPUBindingResource[],
  ): void {
    if (count === 0) return;
    const g = ctx.grid(Math.ceil(count / ELEMENTWISE_WG));
    o.add(code, [count, g.x * ELEMENTWISE_WG, ...words], bindings, g);
  }
  /** The block range [first, end) of a segment (segments are whole block rows). */
  function blocksOf(t: GpuTensor, p: Part): { first: number; end: number } {
    const l = t.layout;
    const first = (p.seg.firstRow / l.n1) * l.blocksX;
    return { first, end: first + (p.seg.rowCount / l.n1) * l.blocksX };
  }

  function applyRaw(t: GpuTensor, agg: RawOuterAggregate, step: number): void {
    const element = ctx.input('outer-element', agg.element);
    const value = ctx.input('outer-value', agg.value);
    const o = ctx.op();
    for (const p of t.parts) {
      const { first, end } = blocksOf(t, p);
      const base = agg.blockStart[first] as number;
      dispatch(
        o,
        S.OUTER_RAW,
        (agg.blockStart[end] as number) - base,
        [base, p.seg.offset, bitsOf(step)],
        [ctx.bind(p), whole(element), whole(value)],
      );
    }
    o.submit();
  }

  function applyDct(t: GpuTensor, outer: DctOuterAggregate, step: number): void {
    const l = t.layout;
    const { agg } = outer;
    const starts = ctx.input('outer-starts', agg.blockStart);
    const coef = ctx.input('outer-coef', agg.coef);
    const mean = ctx.input('outer-mean', agg.mean);
    const shift = ctx.input('outer-shift', agg.shift);
    const basis = ctx.basisPair(l.n1, l.n2, 'int');
    const o = ctx.op();
    for (const p of t.parts)
      dispatch(
        o,
        S.OUTER_DCT,
        p.seg.elements,
        [l.cols, l.n1, l.n2, l.blocksX, p.seg.firstRow, 0, basis.off2, bitsOf(step)],
        [ctx.bind(p), whole(starts), whole(coef), whole(mean), whole(basis.buffer), whole(shift)],
      );
    o.submit();
  }

  return {
    copy(dst, src) {
      sameShapes(dst, src);
      if (dst === src) return;
      // Part plans may differ (an owned tensor vs a wrapped external buffer): copy overlapping ranges.
      const enc = ctx.device.createCommandEncoder();
      for (const d of ctx.gpu(dst).parts)
        for (const s of ctx.gpu(src).parts) {
          const lo = Math.max(d.seg.offset, s.seg.offset);
          const hi = Math.min(d.seg.offset + d.seg.elements, s.seg.offset + s.seg.elements);
          if (lo < hi)
            enc.copyBufferToBuffer(
              s.buffer,
              s.byteOffset + (lo - s.seg.offset) * 4,
              d.buffer,
              d.byteOffset + (lo - d.seg.offset) * 4,
              (hi - lo) * 4,
            );
        }
      ctx.submit([enc.finish()]);
    },
    adamw(param, grad, m, v, s: AdamWScalars) {
      sameShapes(param, grad, m, v);
      const [gp, mp, vp] = [grad, m, v].map((t) => ctx.gpu(t).parts);
      const words = [s.decay, s.gradWeight, s.beta2, s.sqWeight, s.stepSize, s.bc2Sqrt, s.eps].map(bitsOf);
      const o = ctx.op();
      ctx
        .gpu(param)
        .parts.forEach((p, i) =>
          dispatch(o, S.ADAMW, p.seg.elements, words, [
            ctx.bind(p),
            ctx.bind(gp![i] as Part),
            ctx.bind(mp![i] as Part),
            ctx.bind(vp![i] as Part),
          ]),
        );
      o.submit();
    },
    errorFeedback(ef, start, local, beta) {
      sameShapes(ef, start, local);
      const sp = ctx.gpu(start).parts;
      const lp = ctx.gpu(local).parts;
      const o = ctx.op();
      ctx
        .gpu(ef)
        .parts.forEach((p, i) =>
          dispatch(
            o,
            S.ERROR_FEEDBACK,
            p.seg.elements,
            [bitsOf(beta)],
            [ctx.bind(p), ctx.bind(sp[i] as Part), ctx.bind(lp[i] as Part)],
          ),
        );
      o.submit();
    },
    subtractSparse(x: DistroTensor, r: TensorResult) {
      const t = ctx.gpu(x);
      const l = t.layout;
      checkResult(r, l, 'own result');
      const idx = ctx.input('scatter-idx', r.indices);
      const val = ctx.input('scatter-val', r.values);
      const o = ctx.op();
      for (const p of t.parts) {
        const { first, end } = blocksOf(t, p);
        dispatch(
          o,
          S.SCATTER_SUB,
          (end - first) * r.k,
          [first * r.k, r.k, l.cols, l.n1, l.n2, l.blocksX, p.seg.offset],
          [ctx.bind(p), whole(idx), whole(val)],
        );
      }
      o.submit();
    },
    applyOuter(param, agg, step) {
      const t = ctx.gpu(param);
      if (!sameShape(agg.layout.xshape, t.layout.xshape))
        throw new DistroShapeError('aggregate was built for another layout');
      if (agg.domain === 'raw') applyRaw(t, agg, Math.fround(step));
      else applyDct(t, agg, Math.fround(step));
    },
  };
}
