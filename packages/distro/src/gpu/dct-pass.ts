// The chunked DCT of one segment, recorded into an operation: rows then columns of every block, into kept
// scratch ('dct-rows', 'dct') sized for one segment, so no buffer spans a whole split tensor.
import { STORAGE, type GpuContext } from './context.ts';
import type { GpuOp } from './op.ts';
import { bind, whole, type GpuTensor, type Part } from './tensor.ts';
import * as W from './wgsl.ts';

/**
 * Makes the DCT scratch large enough for the largest segment of `ts`. Called before recording: a buffer grown
 * mid-recording would be destroyed under dispatches already recorded.
 */
export function reserveDct(ctx: GpuContext, ts: readonly GpuTensor[]): void {
  const bytes = Math.max(0, ...ts.flatMap((t) => t.parts.map((p) => p.seg.elements * 4)));
  ctx.keep('dct-rows', bytes, STORAGE);
  ctx.keep('dct', bytes, STORAGE);
}

/**
 * The chunked DCT of segment `p` of `t`, recorded into `o`; the coefficients are bound as returned until the
 * next segment's DCT is recorded (segments reuse one scratch).
 */
export function recordDct(ctx: GpuContext, o: GpuOp, t: GpuTensor, p: Part): GPUBufferBinding {
  const l = t.layout;
  const basis = ctx.basisPair(l.n1, l.n2, 'floatT');
  const n = p.seg.elements;
  reserveDct(ctx, [t]);
  const T = { buffer: ctx.keep('dct-rows', n * 4, STORAGE), offset: 0, size: n * 4 };
  const Y = { buffer: ctx.keep('dct', n * 4, STORAGE), offset: 0, size: n * 4 };
  // Four outputs per invocation where the block side allows it (every chunk that is a multiple of 4).
  const rows4 = l.n2 % 4 === 0;
  const cols4 = l.n1 % 4 === 0;
  ctx.elementwise(
    o,
    rows4 ? W.DCT_ROWS4 : W.DCT_ROWS,
    rows4 ? n / 4 : n,
    [l.cols, l.n2, basis.off2],
    [bind(p), T, whole(basis.buffer)],
  );
  ctx.elementwise(
    o,
    cols4 ? W.DCT_COLS4 : W.DCT_COLS,
    cols4 ? n / 4 : n,
    [l.cols, l.n1, 0],
    [T, Y, whole(basis.buffer)],
  );
  return Y;
}
