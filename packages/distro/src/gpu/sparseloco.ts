// SparseLoCo's operations on the WGSL backend. Like every kernel of this backend they run per segment
// (gpu/segments.ts), so no binding exceeds the device's limits; top-k lives in select.ts next to compress,
// whose kernels it shares.
import type { DistroTensor } from '../backend.ts';
import { checkSameShapes, DistroShapeError, sameShape } from '../layout.ts';
import { checkResult, type TensorResult } from '../result.ts';
import type { AdamWScalars } from '../sparseloco/adamw.ts';
import type { SparseLoCoOps } from '../sparseloco/ops.ts';
import type {
  DctOuterAggregate,
  OuterAggregate,
  RawOuterAggregate,
  SparseDomain,
} from '../sparseloco/outer.ts';
import {
  deviceAggregateFits,
  hostBounds,
  recordBlockAggregate,
  uploadEntries,
  type BlockLists,
} from './aggregate.ts';
import { grid, STORAGE, type GpuContext } from './context.ts';
import { bitsOf, type GpuOp } from './op.ts';
import * as S from './sparseloco-wgsl.ts';
import { perSegment, recordPerSegment } from './dispatch.ts';
import { asGpu, bind, blocksOf, whole, type GpuTensor } from './tensor.ts';

function applyRaw(ctx: GpuContext, t: GpuTensor, agg: RawOuterAggregate, step: number): void {
  const element = ctx.input('outer-element', agg.element);
  const value = ctx.input('outer-value', agg.value);
  const o = ctx.op();
  for (const p of t.parts) {
    const { first, end } = blocksOf(t, p);
    const base = agg.blockStart[first] as number;
    ctx.elementwise(
      o,
      S.OUTER_RAW,
      (agg.blockStart[end] as number) - base,
      [base, p.seg.offset, bitsOf(step)],
      [bind(p), whole(element), whole(value)],
    );
  }
  o.submit();
}

/** The DCT-domain outer step of per-block lists into every segment of `t`, recorded into `o`. */
function recordOuterDct(ctx: GpuContext, o: GpuOp, t: GpuTensor, lists: BlockLists, step: number): void {
  const l = t.layout;
  const basis = ctx.basisPair(l.n1, l.n2, 'int');
  recordPerSegment(
    ctx,
    o,
    S.OUTER_DCT,
    t,
    (p) => [l.cols, l.n1, l.n2, l.blocksX, p.seg.firstRow, 0, basis.off2, bitsOf(step)],
    [lists.bounds, lists.coef, lists.mean, basis.buffer, lists.shift],
  );
}

function applyDct(ctx: GpuContext, t: GpuTensor, outer: DctOuterAggregate, step: number): void {
  const { agg } = outer;
  const lists = {
    bounds: ctx.input('outer-bounds', hostBounds(agg.blockStart)),
    coef: ctx.input('outer-coef', agg.coef),
    mean: ctx.input('outer-mean', agg.mean),
    shift: ctx.input('outer-shift', agg.shift),
  };
  const o = ctx.op();
  recordOuterDct(ctx, o, t, lists, step);
  o.submit();
}

/**
 * The outer step from the peers' results, aggregated on the device (the raw domain by OUTER_RAW_PEERS, the DCT
 * domain by aggregate.ts's block lists) in one submit; false, changing nothing, when they do not fit it.
 */
function applyOuterResults(
  ctx: GpuContext,
  param: DistroTensor,
  results: readonly TensorResult[],
  domain: SparseDomain,
  divideBy: 'senders' | 'results',
  step: number,
): boolean {
  const t = asGpu(param);
  const l = t.layout;
  if (!deviceAggregateFits(ctx, l, results)) return false;
  const o = ctx.op();
  if (domain === 'dct') {
    recordOuterDct(ctx, o, t, recordBlockAggregate(ctx, o, l, results, divideBy), Math.fround(step));
    o.submit();
    return true;
  }
  const k = (results[0] as TensorResult).k;
  const { idx, val, perPeer } = uploadEntries(ctx, results);
  const scratch = ctx.keep('outer-peers-scratch', 8 * results.length * perPeer, STORAGE);
  for (const p of t.parts) {
    const { first, end } = blocksOf(t, p);
    const g = grid(end - first);
    const words = [first, end, g.x, k, results.length, perPeer, l.cols, l.n1, l.n2, l.blocksX];
    words.push(p.seg.offset, bitsOf(Math.fround(step)), divideBy === 'results' ? 1 : 0);
    o.add(S.OUTER_RAW_PEERS, words, [bind(p), whole(idx), whole(val), whole(scratch)], g);
  }
  o.submit();
  return true;
}

function applyOuter(ctx: GpuContext, param: DistroTensor, agg: OuterAggregate, step: number): void {
  const t = asGpu(param);
  if (!sameShape(agg.layout.xshape, t.layout.xshape))
    throw new DistroShapeError('aggregate was built for another layout');
  if (agg.domain === 'raw') applyRaw(ctx, t, agg, Math.fround(step));
  else applyDct(ctx, t, agg, Math.fround(step));
}

function copy(ctx: GpuContext, dst: DistroTensor, src: DistroTensor): void {
  checkSameShapes(dst, src);
  if (dst === src) return;
  // Part plans may differ (an owned tensor vs a wrapped external buffer): copy overlapping ranges.
  const enc = ctx.device.createCommandEncoder();
  for (const d of asGpu(dst).parts)
    for (const s of asGpu(src).parts) {
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
}

function adamw(
  ctx: GpuContext,
  param: DistroTensor,
  grad: DistroTensor,
  m: DistroTensor,
  v: DistroTensor,
  s: AdamWScalars,
): void {
  checkSameShapes(param, grad, m, v);
  const words = [s.decay, s.gradWeight, s.beta2, s.sqWeight, s.stepSize, s.bc2Sqrt, s.eps].map(bitsOf);
  perSegment(ctx, S.ADAMW, words, [param, grad, m, v]);
}

function errorFeedback(
  ctx: GpuContext,
  ef: DistroTensor,
  start: DistroTensor,
  local: DistroTensor,
  beta: number,
): void {
  checkSameShapes(ef, start, local);
  perSegment(ctx, S.ERROR_FEEDBACK, [bitsOf(beta)], [ef, start, local]);
}

function subtractSparse(ctx: GpuContext, x: DistroTensor, r: TensorResult): void {
  const t = asGpu(x);
  const l = t.layout;
  checkResult(r, l, 'own result');
  const idx = ctx.input('scatter-idx', r.indices);
  const val = ctx.input('scatter-val', r.values);
  const o = ctx.op();
  for (const p of t.parts) {
    const { first, end } = blocksOf(t, p);
    ctx.elementwise(
      o,
      S.SCATTER_SUB,
      (end - first) * r.k,
      [first * r.k, r.k, l.cols, l.n1, l.n2, l.blocksX, p.seg.offset],
      [bind(p), whole(idx), whole(val)],
    );
  }
  o.submit();
}

export function gpuSparseLoCoOps(ctx: GpuContext): Omit<SparseLoCoOps, 'selectTopk'> {
  return {
    copy: (dst, src) => copy(ctx, dst, src),
    adamw: (param, grad, m, v, s) => adamw(ctx, param, grad, m, v, s),
    errorFeedback: (ef, start, local, beta) => errorFeedback(ctx, ef, start, local, beta),
    subtractSparse: (x, r) => subtractSparse(ctx, x, r),
    applyOuter: (param, agg, step) => applyOuter(ctx, param, agg, step),
    applyOuterResults: (param, results, domain, divideBy, step) =>
      applyOuterResults(ctx, param, results, domain, divideBy, step),
  };
}
