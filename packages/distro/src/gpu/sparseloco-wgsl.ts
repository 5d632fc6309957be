// WGSL for SparseLoCo. AdamW, error feedback and the raw residual are float kernels a compiler may contract
// into FMA (local state, allowed to differ in the last bits between devices). The two outer-step kernels
// touch parameters only as u32 bit patterns and integers (wgsl.ts's exact_update_value), so they are
// bit-identical to the CPU reference on every device.
import { FIXED_POINT, FUSED_WG, PER_BLOCK } from './aggregate-wgsl.ts';
import {
  bindings,
  ELEMENT_IN_BLOCK,
  EXACT_IDCT_BUFFERS,
  EXACT_IDCT_SUMS,
  INT64,
  perElement,
} from './wgsl.ts';

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
  if (bounds[2u * blk] == bounds[2u * blk + 1u]) { return; }
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

/**
 * Raw-domain outer step straight from the peers' results, one workgroup per block: outer.ts's aggregateRaw done
 * with workgroup atomics on the block's coordinates, then p ← RN_f32(p − l·A) at each coordinate by the one
 * entry whose count increment came first (its owner). Every maximum, count and sum is an integer, so the order
 * the atomics land in changes nothing: the result is aggregateRaw's bit for bit. Entry t of peer p for block
 * blk is at p·perPeer + blk·k + t (t < k); `val` holds float32 bits. A coordinate's word starts at 0 (WGSL
 * zero-fills workgroup memory), then holds its largest biased exponent (< 2^9), then that plus 2^9 per entry
 * (each increment returns the exponent, and whether it came first), then, cleared by its owner, its sum.
 * `scratch` keeps two words per entry between passes: q (the entry's fixed-point value) and info (bits 0..8
 * the biased exponent, bit 9 ownership, bits 16.. the count).
 */
export const OUTER_RAW_PEERS = /* wgsl */ `
${INT64}
${FIXED_POINT}
${bindings(
  'first: u32, end: u32, stride: u32, k: u32, peers: u32, perPeer: u32, cols: u32, n1: u32, n2: u32, blocksX: u32, segOffset: u32, step: u32, byResults: u32, p0: u32, p1: u32, p2: u32',
  [
    'read_write param: array<u32>',
    'read idx: array<u32>',
    'read val: array<u32>',
    'read_write scratch: array<u32>',
  ],
)}
${PER_BLOCK}
const OWNER = 0x200u;
const ONE_COUNT = 0x200u;
@compute @workgroup_size(${FUSED_WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let blk = u.first + wid.x + wid.y * u.stride;
  if (blk >= u.end) { return; }
  let n = u.peers * u.k;
  for (var j = lid; j < n; j += ${FUSED_WG}u) {
    let g = entry(j, blk);
    let m = val[g] & 0x7fffffffu;
    if (m != 0u) { atomicMax(&sh[idx[g]], biased_exp(m)); }
  }
  workgroupBarrier();
  for (var j = lid; j < n; j += ${FUSED_WG}u) {
    let g = entry(j, blk);
    let old = atomicAdd(&sh[idx[g]], ONE_COUNT);
    let eb = old & 0x1ffu;
    scratch[2u * g] = bitcast<u32>(select(0, fixed_scaled(val[g], 173 - i32(eb)), eb != 0u));
    scratch[2u * g + 1u] = eb | select(0u, OWNER, old < ONE_COUNT);
  }
  workgroupBarrier();
  // Only owners touch the word now, one per coordinate: each takes the count and clears the word for the sum.
  for (var j = lid; j < n; j += ${FUSED_WG}u) {
    let g = entry(j, blk);
    let info = scratch[2u * g + 1u];
    if ((info & OWNER) != 0u) {
      scratch[2u * g + 1u] = info | ((atomicExchange(&sh[idx[g]], 0u) / ONE_COUNT) << 16u);
    }
  }
  workgroupBarrier();
  for (var j = lid; j < n; j += ${FUSED_WG}u) {
    let g = entry(j, blk);
    atomicAdd(&sh[idx[g]], scratch[2u * g]);
  }
  workgroupBarrier();
  for (var j = lid; j < n; j += ${FUSED_WG}u) {
    let g = entry(j, blk);
    let info = scratch[2u * g + 1u];
    let eb = info & 0x1ffu;
    if ((info & OWNER) == 0u || eb == 0u) { continue; }
    let c = idx[g];
    let sum = bitcast<i32>(atomicLoad(&sh[c]));
    let d = select(info >> 16u, u.peers, u.byResults == 1u);
    // fixedMean: round half away from zero of sum / d.
    let mag = (2u * u32(abs(sum)) + d) / (2u * d);
    if (mag == 0u) { continue; }
    var ab = round_f32(select(0u, 1u, sum < 0), vec2<u32>(mag, 0u), i32(eb) - 173);
    if ((ab & 0x7fffffffu) == 0x7f800000u) { ab = (ab & 0x80000000u) | 0x7f7fffffu; }
    if ((ab & 0x7fffffffu) == 0u) { continue; }
    let h = c / u.n2;
    let by = blk / u.blocksX;
    let el = (by * u.n1 + h) * u.cols + (blk - by * u.blocksX) * u.n2 + (c - h * u.n2) - u.segOffset;
    param[el] = exact_update_value(param[el], ${ONE_BITS}, u.step, ab);
  }
}`;
