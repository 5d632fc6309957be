// A few entries of a tensor read back to the host: raw elements (gradient fingerprints) or DCT coefficients at
// given per-chunk indices, one submit and one readback however many segments they fall in.
import type { DistroTensor } from '../backend.ts';
import { coefficientOffset, DistroShapeError } from '../layout.ts';
import { COPY_SRC, slots, STORAGE, type GpuContext } from './context.ts';
import { recordDct, reserveDct } from './dct-pass.ts';
import type { GpuOp } from './op.ts';
import { asGpu, bind, blocksOf } from './tensor.ts';
import * as W from './wgsl.ts';

interface GatherJob {
  /** Records what is gathered from (if anything) and returns its binding. */
  src: () => GPUBufferBinding;
  idx: Uint32Array;
}

/** out[i] = src[idx[i]] for each job, one submit and one readback for all of them. */
async function gatherAll(ctx: GpuContext, o: GpuOp, jobs: readonly GatherJob[]): Promise<Float32Array> {
  const sl = slots(
    jobs.map((j) => j.idx.byteLength),
    ctx.align,
  );
  const idx = new Uint32Array(sl.total / 4);
  jobs.forEach((j, i) => idx.set(j.idx, (sl.at[i] as number) / 4));
  const idxBuf = ctx.input('gather-idx', idx);
  const out = ctx.keep('gather-out', sl.total, STORAGE | COPY_SRC);
  // A job's source is recorded right before its gather (a segment's DCT lives until the next one's).
  jobs.forEach((j, i) => {
    const range = { offset: sl.at[i] as number, size: j.idx.byteLength };
    if (range.size > 0)
      ctx.elementwise(
        o,
        W.GATHER,
        j.idx.length,
        [],
        [j.src(), { buffer: idxBuf, ...range }, { buffer: out, ...range }],
      );
  });
  const ranges = jobs.map((j, i) => ({ buffer: out, offset: sl.at[i] as number, bytes: j.idx.byteLength }));
  return new Float32Array(await ctx.readRanges(o, ranges));
}

/** The elements of `t` at the flat `offsets`, in their order. */
export async function gatherElements(
  ctx: GpuContext,
  t: DistroTensor,
  offsets: Uint32Array,
): Promise<Float32Array> {
  const picked = asGpu(t).parts.map((p) => {
    const mine: number[] = [];
    const local: number[] = [];
    offsets.forEach((o, i) => {
      if (o >= p.seg.offset && o < p.seg.offset + p.seg.elements) {
        mine.push(i);
        local.push(o - p.seg.offset);
      }
    });
    return { mine, src: () => bind(p), idx: Uint32Array.from(local) };
  });
  const got = await gatherAll(ctx, ctx.op(), picked);
  const out = new Float32Array(offsets.length);
  let j = 0;
  for (const p of picked) for (const i of p.mine) out[i] = got[j++] as number;
  return out;
}

/** The DCT coefficients of `t` at per-chunk `indices` (k per block, chunk-grid order). */
export function coefficientsAt(
  ctx: GpuContext,
  t: DistroTensor,
  indices: Uint32Array,
  k: number,
): Promise<Float32Array> {
  const g = asGpu(t);
  const l = g.layout;
  if (indices.length !== l.blocks * k)
    throw new DistroShapeError(`${indices.length} indices for ${l.blocks} blocks of ${k}`);
  const o = ctx.op();
  reserveDct(ctx, [g]);
  const jobs = g.parts.map((p) => {
    const firstBlock = blocksOf(g, p).first;
    const n = (p.seg.rowCount / l.n1) * l.blocksX * k;
    const local = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const at = firstBlock * k + i;
      local[i] = coefficientOffset(l, Math.floor(at / k), indices[at] as number) - p.seg.offset;
    }
    return { src: () => recordDct(ctx, o, g, p), idx: local };
  });
  // Segments hold consecutive block rows, so their entries are consecutive in chunk-grid order.
  return gatherAll(ctx, o, jobs);
}
