// Per-chunk top-k on the WGSL backend: of the DCT coefficients (DisTrO's compress) or of the entries themselves
// (SparseLoCo's raw domain), for a whole list of tensors in one submit and one readback.
import type { DistroTensor } from '../backend.ts';
import { DistroShapeError } from '../layout.ts';
import { effectiveTopk, type TensorResult } from '../result.ts';
import type { SparseDomain } from '../sparseloco/outer.ts';
import { COPY_SRC, grid, STORAGE, type GpuContext } from './context.ts';
import { recordDct, reserveDct } from './dct-pass.ts';
import { asGpu, bind, blocksOf, whole, type GpuTensor } from './tensor.ts';
import * as W from './wgsl.ts';

interface Plan {
  t: GpuTensor;
  k: number;
  /** Entries of the tensor's result: k per block. */
  entries: number;
  /** Where its indices start in the output, in words; its values follow them. */
  start: number;
}

function plan(ts: readonly DistroTensor[], topk: number): { plans: Plan[]; words: number } {
  let words = 0;
  const plans = ts.map((d) => {
    const t = asGpu(d);
    const k = effectiveTopk(topk, t.layout.totalk);
    const entries = t.layout.blocks * k;
    words += 2 * entries;
    return { t, k, entries, start: words - 2 * entries };
  });
  return { plans, words };
}

/**
 * Segments are transformed and selected one after another in one compute pass, reusing the same scratch
 * (dispatches in a pass see their predecessors' writes); all indices and values land in one buffer.
 */
export async function selectMany(
  ctx: GpuContext,
  ts: readonly DistroTensor[],
  topk: number,
  domain: SparseDomain,
): Promise<TensorResult[]> {
  if (domain !== 'dct' && domain !== 'raw') throw new DistroShapeError(`unknown domain ${String(domain)}`);
  const { plans, words } = plan(ts, topk);
  if (domain === 'dct')
    reserveDct(
      ctx,
      plans.map((p) => p.t),
    );
  const out = ctx.keep('topk', words * 4, STORAGE | COPY_SRC);
  const o = ctx.op();
  for (const { t, k, entries, start } of plans) {
    const l = t.layout;
    for (const p of t.parts) {
      const { first, end } = blocksOf(t, p);
      const g = grid(end - first);
      const source = domain === 'dct' ? recordDct(ctx, o, t, p) : bind(p);
      const words = [
        end - first,
        g.x,
        l.cols,
        l.n1,
        l.n2,
        l.blocksX,
        k,
        start + first * k,
        start + entries + first * k,
      ];
      o.add(W.TOPK, words, [source, whole(out)], g);
    }
  }
  const got = await ctx.readRanges(o, [{ buffer: out, offset: 0, bytes: words * 4 }]);
  return plans.map(({ t, k, entries, start }) => {
    const at = start * 4;
    return {
      xshape: t.layout.xshape,
      totalk: t.layout.totalk,
      k,
      indices: new Uint32Array(got.slice(at, at + entries * 4)),
      values: new Float32Array(got.slice(at + entries * 4, at + entries * 8)),
      quantized: false,
    };
  });
}
