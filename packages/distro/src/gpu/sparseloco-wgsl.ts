// WGSL for SparseLoCo. AdamW, error feedback and the raw residual are float kernels a compiler may contract
// into FMA (local state, allowed to differ in the last bits between devices). The two outer-step kernels
// touch parameters only as u32 bit patterns and integers (wgsl.ts's exact_update_value), so they are
// bit-identical to the CPU reference on every device.
import { ELEMENT_IN_BLOCK, EXACT_IDCT_BUFFERS, EXACT_IDCT_SUMS, INT64, perElement } from './wgsl.ts';

/** One AdamW step (sparseloco/adamw.ts), in the operation order of torch.optim.AdamW. */
export const ADAMW = perElement({
  uniform:
    'decay: f32, gradWeight: f32, beta2: f32, sqWeight: f32, stepSize: f32, bc2Sqrt: f32, eps: f32, p0: u32, p1: u32, p2: u32',
  buffers: [
    'read_write param: array<f32>',
    'read grad: array<f32>',
    'read_write m: array<f32>',
    'read_write v: array<f32>',
  ],
  body: `  let gi = grad[i];
  let mi = m[i] + u.gradWeight * (gi - m[i]);
  let vi = u.beta2 * v[i] + u.sqWeight * gi * gi;
  let denom = sqrt(vi) / u.bc2Sqrt + u.eps;
  m[i] = mi;
  v[i] = vi;
  param[i] = param[i] * u.decay - u.stepSize * mi / denom;`,
});

/** ef ← β·ef + (start − local). */
export const ERROR_FEEDBACK = perElement({
  uniform: 'beta: f32, p0: u32',
  buffers: ['read_write ef: array<f32>', 'read start: array<f32>', 'read local: array<f32>'],
  body: `  ef[i] = u.beta * ef[i] + (start[i] - local[i]);`,
});

/**
 * x ← x − r at r's entries, one invocation per entry of the segment's blocks (entries `base + i`, chunk-grid
 * order, k per block). Indices are distinct within a chunk, so no two invocations write one element.
 */
export const SCATTER_SUB = perElement({
  uniform:
    'base: u32, k: u32, cols: u32, n1: u32, n2: u32, blocksX: u32, segOffset: u32, p0: u32, p1: u32, p2: u32',
  buffers: ['read_write x: array<f32>', 'read idx: array<u32>', 'read val: array<f32>'],
  body: `  let j = u.base + i;
  let blk = j / u.k;
  let e = idx[j];
  let b = e / u.n2;
  let by = blk / u.blocksX;
  let el = (by * u.n1 + b) * u.cols + (blk - by * u.blocksX) * u.n2 + (e - b * u.n2) - u.segOffset;
  x[el] = x[el] - val[j];`,
});

const ONE_BITS = '0x3f800000u';

/** Raw-domain outer step: one invocation per aggregated entry, p ← RN_f32(p − l·A) at its element. */
export const OUTER_RAW = perElement({
  prelude: INT64,
  uniform: 'base: u32, segOffset: u32, step: u32, p0: u32, p1: u32, p2: u32',
  buffers: ['read_write param: array<u32>', 'read element: array<u32>', 'read value: array<u32>'],
  body: `  let j = u.base + i;
  let el = element[j] - u.segOffset;
  param[el] = exact_update_value(param[el], ${ONE_BITS}, u.step, value[j]);`,
});

/**
 * DCT-domain outer step, one invocation per parameter: the exact integer IDCT S (EXACT_IDCT_SUMS) as an
 * emulated i64, A = RN_f32(S·2^−(30+shift[blk])) rounded once (round_f32, saturated to ±FLT_MAX), then
 * p ← RN_f32(p − l·A). |S| < 2^62, so S = H·2^15 + rem cannot overflow.
 */
export const OUTER_DCT = perElement({
  prelude: INT64,
  uniform:
    'cols: u32, n1: u32, n2: u32, blocksX: u32, firstRow: u32, off1: u32, off2: u32, step: u32, p0: u32, p1: u32',
  buffers: [...EXACT_IDCT_BUFFERS, 'read shift: array<i32>'],
  body: `${ELEMENT_IN_BLOCK}
  if (blockStart[blk] == blockStart[blk + 1u]) { return; }
${EXACT_IDCT_SUMS}
  let S = add64(shl64(H, 15u), vec2<u32>(lo.x & 0x7fffu, 0u));
  var ab = 0u;
  if (!zero64(S)) {
    let neg = bitcast<i32>(S.y) < 0;
    var mag = S;
    if (neg) { mag = sub64(vec2<u32>(0u, 0u), S); }
    ab = round_f32(select(0u, 1u, neg), mag, -(30 + shift[blk]));
    if ((ab & 0x7fffffffu) == 0x7f800000u) { ab = (ab & 0x80000000u) | 0x7f7fffffu; }
  }
  param[i] = exact_update_value(param[i], ${ONE_BITS}, u.step, ab);`,
});
