// WGSL for aggregating peers' results on the device, one workgroup per block: the integer fixed point of
// aggregate.ts (DCT domain: DisTrO's apply, SparseLoCo's DCT outer step) and of sparseloco/outer.ts's raw
// domain. A block's coordinates get one word each of workgroup memory and every maximum, count and sum is an
// integer atomic, so the order the atomics land in changes nothing: the aggregate is the host's, bit for bit.
import { bindings } from './wgsl.ts';

/** Coefficients per block the device aggregates in workgroup memory (16 KiB, WebGPU's guaranteed minimum). */
export const FUSED_TOTALK = 4096;
/**
 * The most results aggregated on the device: a coordinate's count fits 7 bits beside its sum, and in the raw
 * domain the sum of |q| ≤ 2^24 from that many peers, doubled and plus the divisor, still fits a u32.
 */
export const FUSED_MAX_PEERS = 127;
/** Invocations per block; few, so a block's fixed cost stays small. */
export const FUSED_WG = 64;

/**
 * Fixed-point helpers. biased_exp(m) = ⌊log2 |v|⌋ + 150 (≥ 1) of a nonzero magnitude's bits m.
 * fixed_scaled(vb, x) = roundHalfEven(v·2^x) for the float32 bits vb, when the result's magnitude is ≤ 2^24
 * (callers pick x from the largest magnitude so that it is).
 */
export const FIXED_POINT = /* wgsl */ `
fn biased_exp(m: u32) -> u32 {
  let ex = m >> 23u;
  if (ex == 0u) { return 32u - countLeadingZeros(m); }
  return ex + 23u;
}
fn fixed_scaled(vb: u32, x: i32) -> i32 {
  let m = vb & 0x7fffffffu;
  if (m == 0u) { return 0; }
  let ex = m >> 23u;
  var mant = m & 0x7fffffu;
  var ev = -149;
  if (ex != 0u) { mant = mant | 0x800000u; ev = i32(ex) - 150; }
  let t = ev + x;
  var q = 0u;
  if (t >= 0) {
    q = mant << u32(t);
  } else if (t > -32) {
    let s = u32(-t);
    q = mant >> s;
    let rem = mant - (q << s);
    let half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u) == 1u)) { q = q + 1u; }
  }
  if ((vb >> 31u) == 1u) { return -i32(q); }
  return i32(q);
}
`;

/**
 * What both per-block kernels share: one workgroup word per coefficient of the block, and entry(j, blk), the
 * index of the block's j-th entry (peer j / k, its t = j % k) when peer p's entries start at p·perPeer (needs
 * the uniform fields k and perPeer).
 */
export const PER_BLOCK = /* wgsl */ `
var<workgroup> sh: array<atomic<u32>, ${FUSED_TOTALK}>;
fn entry(j: u32, blk: u32) -> u32 { return (j / u.k) * u.perPeer + blk * u.k + j % u.k; }`;

/**
 * aggregate.ts's aggregateTensor for the blocks [first, end) of one tensor, one workgroup per block. Entry t of
 * peer p for block blk is at p·perPeer + blk·k + t; `val` holds float32 bits (±1 when `quantized`).
 * 1. The block's fixed point: q = ±2^15 for 1-bit values; else shift = 14 − ⌊log2 max|v|⌋ over the block's
 *    entries (0 when all are zero) and q = roundHalfEven(v·2^shift).
 * 2. Each entry adds 2^25 + (q + 2^15) to its coefficient's word: bits 25.. count the entries, the low 25 bits
 *    sum q + 2^15 (≤ 127·2^16), so one atomic carries both; the entry whose add found 0 owns the coefficient.
 * 3. Owners compute the mean m = round-half-away(Σq / d), d = the count or the number of results (then clamped
 *    to ±2^15), and keep it in `scratch` (0 for the other entries).
 * 4. The owners with m ≠ 0 are listed, in entry order, in the block's slot of `coef`/`mean` (slot size
 *    peers·k, starting at blk·peers·k), and bounds[2·blk], bounds[2·blk + 1] delimit the list: what the apply
 *    kernels read in place of the host's CSR offsets (the same sum in another order: integers).
 */
export const AGGREGATE_BLOCKS = /* wgsl */ `
${FIXED_POINT}
${bindings(
  'first: u32, end: u32, stride: u32, k: u32, peers: u32, perPeer: u32, quantized: u32, byResults: u32',
  [
    'read idx: array<u32>',
    'read val: array<u32>',
    'read_write scratch: array<i32>',
    'read_write coef: array<u32>',
    'read_write mean: array<i32>',
    'read_write bounds: array<u32>',
    'read_write shift: array<i32>',
  ],
)}
const ONE = 32768;
${PER_BLOCK}
@compute @workgroup_size(${FUSED_WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let blk = u.first + wid.x + wid.y * u.stride;
  if (blk >= u.end) { return; }
  let n = u.peers * u.k;
  var blockShift = 15;
  if (u.quantized == 0u) {
    // The block's largest magnitude in word 0, read by all, then word 0 cleared for the coefficients.
    for (var j = lid; j < n; j += ${FUSED_WG}u) { atomicMax(&sh[0], val[entry(j, blk)] & 0x7fffffffu); }
    workgroupBarrier();
    let mx = atomicLoad(&sh[0]);
    workgroupBarrier();
    if (lid == 0u) { atomicStore(&sh[0], 0u); }
    workgroupBarrier();
    blockShift = select(0, 164 - i32(biased_exp(mx)), mx != 0u);
  }
  for (var j = lid; j < n; j += ${FUSED_WG}u) {
    let g = entry(j, blk);
    let vb = val[g];
    var q = select(ONE, -ONE, (vb >> 31u) == 1u);
    if (u.quantized == 0u) { q = fixed_scaled(vb, blockShift); }
    let old = atomicAdd(&sh[idx[g]], 0x2000000u + u32(q + ONE));
    scratch[g] = select(0, 1, old == 0u);
  }
  workgroupBarrier();
  for (var j = lid; j < n; j += ${FUSED_WG}u) {
    let g = entry(j, blk);
    if (scratch[g] == 0) { continue; }
    let w = atomicLoad(&sh[idx[g]]);
    let count = w >> 25u;
    let sum = i32(w & 0x1ffffffu) - i32(count) * ONE;
    let d = select(count, u.peers, u.byResults == 1u);
    var m = i32((2u * u32(abs(sum)) + d) / (2u * d));
    if (m > ONE) { m = ONE; }
    scratch[g] = select(m, -m, sum < 0);
  }
  // The listing: each invocation owns a contiguous run of entries, whose means other invocations wrote to
  // storage (hence the storage barrier as well); word lid counts its nonzero means, and invocation 0 turns the
  // counts into offsets.
  storageBarrier();
  workgroupBarrier();
  let per = (n + ${FUSED_WG - 1}u) / ${FUSED_WG}u;
  let lo = min(lid * per, n);
  let hi = min(lo + per, n);
  var kept = 0u;
  for (var j = lo; j < hi; j++) { if (scratch[entry(j, blk)] != 0) { kept++; } }
  atomicStore(&sh[lid], kept);
  workgroupBarrier();
  if (lid == 0u) {
    var at = 0u;
    for (var t = 0u; t < ${FUSED_WG}u; t++) { at += atomicExchange(&sh[t], at); }
    bounds[2u * blk] = blk * n;
    bounds[2u * blk + 1u] = blk * n + at;
    shift[blk] = blockShift;
  }
  workgroupBarrier();
  var pos = blk * n + atomicLoad(&sh[lid]);
  for (var j = lo; j < hi; j++) {
    let g = entry(j, blk);
    let m = scratch[g];
    if (m != 0) {
      coef[pos] = idx[g];
      mean[pos] = m;
      pos++;
    }
  }
}`;
