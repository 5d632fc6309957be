// WGSL sources. Float kernels (momentum, DCT, residual) may be contracted into FMA by a GPU compiler: their
// results are allowed to differ in the last bits between devices. The apply kernel touches parameters only as
// u32 bit patterns and integers, so no compiler can change its result (no FMA, no flush-to-zero, no NaN
// canonicalisation). Every kernel declares its uniform and buffers through `bindings`, and the per-element
// ones open through `perElement`, so a kernel's source is its fields, its buffers and its own statements.

/** Linear invocation index over a 2-D dispatch (WebGPU caps each dimension at 65 535 workgroups). */
export const LINEAR = /* wgsl */ `
fn linear(g: vec3<u32>, stride: u32) -> u32 { return g.x + g.y * stride; }
`;

export const ELEMENTWISE_WG = 256;

/**
 * The statements that place element i of a segment of a blocked tensor: its global row r and column c, its
 * position (h, w) inside its n1×n2 block, and the block's index blk. Needs the uniform fields cols, n1, n2,
 * blocksX, firstRow; the residual and apply kernels share it.
 */
export const ELEMENT_IN_BLOCK = /* wgsl */ `  let r = u.firstRow + i / u.cols;
  let c = i % u.cols;
  let h = r % u.n1;
  let w = c % u.n2;
  let blk = (r / u.n1) * u.blocksX + c / u.n2;`;

/**
 * A kernel's uniform struct U (`fields`) at binding 0 and its storage buffers at 1, 2, … in order, each given
 * as 'ACCESS NAME: TYPE' (e.g. 'read_write delta: array<f32>').
 */
export function bindings(fields: string, buffers: readonly string[]): string {
  const storage = buffers.map((b, n) => {
    const space = b.indexOf(' ');
    return `@group(0) @binding(${n + 1}) var<storage, ${b.slice(0, space)}> ${b.slice(space + 1)};`;
  });
  return [`struct U { ${fields} }`, '@group(0) @binding(0) var<uniform> u: U;', ...storage].join('\n');
}

/**
 * A kernel with one invocation per element over a 2-D dispatch: U starts with (count, stride), then
 * `uniform`; `body` runs with the element's index in `index` (default i), invocations past count return.
 * `prelude` is WGSL the body calls (e.g. INT64).
 */
export function perElement(k: {
  prelude?: string;
  uniform: string;
  buffers: readonly string[];
  index?: string;
  body: string;
}): string {
  const i = k.index ?? 'i';
  const fields = ['count: u32, stride: u32', k.uniform].filter((f) => f !== '').join(', ');
  return `${LINEAR}${k.prelude ?? ''}
${bindings(fields, k.buffers)}
@compute @workgroup_size(${ELEMENTWISE_WG}) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let ${i} = linear(g, u.stride);
  if (${i} >= u.count) { return; }
${k.body}
}`;
}

export const MOMENTUM = perElement({
  uniform: 'decay: f32, lr: f32',
  buffers: ['read_write delta: array<f32>', 'read grad: array<f32>'],
  body: `  var kept = delta[i];
  if (u.decay != 1.0) { kept = u.decay * kept; }
  delta[i] = kept + u.lr * grad[i];`,
});

export const SCALE = perElement({
  uniform: 'factor: f32, pad: f32',
  buffers: ['read_write x: array<f32>'],
  body: `  x[i] = u.factor * x[i];`,
});

/** out[i] = src[idx[i]]: a few entries of a segment, for the host (gradient fingerprints). */
export const GATHER = perElement({
  uniform: '',
  buffers: ['read src: array<f32>', 'read idx: array<u32>', 'read_write out: array<f32>'],
  body: `  out[i] = src[idx[i]];`,
});

export const SIGN_STEP = perElement({
  uniform: 'lr: f32, pad: f32',
  buffers: ['read_write out: array<f32>', 'read params: array<f32>', 'read delta: array<f32>'],
  body: `  out[i] = params[i] - u.lr * sign(delta[i]);`,
});

/**
 * Σ x² per workgroup of 1024 consecutive elements (four coalesced sweeps of 256 threads, then a fixed tree in
 * workgroup memory), written to partial[outBase + group]; the host adds the partial sums in float64 in a fixed
 * order, so the total does not depend on how workgroups are scheduled.
 */
export const SUM_SQUARES = /* wgsl */ `
${bindings('count: u32, stride: u32, outBase: u32, pad1: u32', ['read x: array<f32>', 'read_write partial: array<f32>'])}
var<workgroup> acc: array<f32, 256>;
@compute @workgroup_size(256) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let group = wid.x + wid.y * u.stride;
  var s = 0.0;
  for (var j = 0u; j < 4u; j++) {
    let i = group * 1024u + j * 256u + lid;
    if (i < u.count) { let v = x[i]; s += v * v; }
  }
  acc[lid] = s;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) { acc[lid] += acc[lid + h]; }
    workgroupBarrier();
  }
  if (lid == 0u && group * 1024u < u.count) { partial[u.outBase + group] = acc[0]; }
}`;

/**
 * First DCT pass: along each row inside its block: T[r, bx·n2 + d] = Σ_w W[r, bx·n2 + w]·F2[w, d], w ascending.
 * The basis is stored transposed (basisT[w·n2 + d] = F2[w, d]) so neighbouring invocations (neighbouring d)
 * read neighbouring words, while W[r, bx·n2 + w] is one word for the whole run of them.
 */
export const DCT_ROWS = perElement({
  uniform: 'cols: u32, n2: u32, off2: u32, p0: u32, p1: u32, p2: u32',
  buffers: ['read src: array<f32>', 'read_write dst: array<f32>', 'read basis: array<f32>'],
  body: `  let c = i % u.cols;
  let d = c % u.n2;
  let base = i - d;
  var s = 0.0;
  for (var w = 0u; w < u.n2; w++) { s += src[base + w] * basis[u.off2 + w * u.n2 + d]; }
  dst[i] = s;`,
});

/**
 * Second DCT pass: down each column inside its block: Y[by·n1 + b, c] = Σ_h F1[h, b]·T[by·n1 + h, c], h
 * ascending. The basis is stored transposed like F2 (basisT[h·n1 + b]). Reads of T are one row at a time
 * across neighbouring invocations; the basis word is one for a whole row of them.
 */
export const DCT_COLS = perElement({
  uniform: 'cols: u32, n1: u32, off1: u32, p0: u32, p1: u32, p2: u32',
  buffers: ['read src: array<f32>', 'read_write dst: array<f32>', 'read basis: array<f32>'],
  body: `  let r = i / u.cols;
  let c = i % u.cols;
  let b = r % u.n1;
  let r0 = r - b;
  var s = 0.0;
  for (var h = 0u; h < u.n1; h++) { s += basis[u.off1 + h * u.n1 + b] * src[(r0 + h) * u.cols + c]; }
  dst[i] = s;`,
});

/**
 * DCT_ROWS for n2 divisible by 4: each invocation computes the four neighbouring outputs d0..d0+3 of one row,
 * reading each input word once for all four and the basis as vec4 rows of F2ᵀ (basis4[off2/4 + w·n2/4 + d0/4]).
 * Every output is still the sum over w in ascending order, as in DCT_ROWS. \`count\` counts invocations (outputs / 4).
 */
export const DCT_ROWS4 = perElement({
  uniform: 'cols: u32, n2: u32, off2: u32, p0: u32, p1: u32, p2: u32',
  buffers: ['read src: array<f32>', 'read_write dst: array<vec4<f32>>', 'read basis: array<vec4<f32>>'],
  index: 'q',
  body: `  let i = q * 4u;
  let c = i % u.cols;
  let d = c % u.n2;
  let base = i - d;
  let row = u.off2 / 4u + d / 4u;
  let step = u.n2 / 4u;
  var s = vec4<f32>(0.0);
  for (var w = 0u; w < u.n2; w++) { s += src[base + w] * basis[row + w * step]; }
  dst[q] = s;`,
});

/**
 * DCT_COLS for n1 divisible by 4: each invocation computes outputs b0..b0+3 of one column, reading each T word
 * once for all four and F1ᵀ as vec4 (basis4[h·n1/4 + b0/4]); sums over h in ascending order as in DCT_COLS.
 * \`count\` counts invocations: (rows / 4)·cols, invocation q at row group q / cols, column q % cols.
 */
export const DCT_COLS4 = perElement({
  uniform: 'cols: u32, n1: u32, off1: u32, p0: u32, p1: u32, p2: u32',
  buffers: ['read src: array<f32>', 'read_write dst: array<f32>', 'read basis: array<vec4<f32>>'],
  index: 'q',
  body: `  let c = q % u.cols;
  let r = (q / u.cols) * 4u;
  let b = r % u.n1;
  let r0 = r - b;
  let step = u.n1 / 4u;
  var s = vec4<f32>(0.0);
  for (var h = 0u; h < u.n1; h++) { s += basis[u.off1 / 4u + h * step + b / 4u] * src[(r0 + h) * u.cols + c]; }
  dst[r * u.cols + c] = s.x;
  dst[(r + 1u) * u.cols + c] = s.y;
  dst[(r + 2u) * u.cols + c] = s.z;
  dst[(r + 3u) * u.cols + c] = s.w;`,
});

export const TOPK_WG = 256;

/**
 * Per-chunk top-k, one workgroup of 256 invocations per block, same rule as topk.ts (|x| compared as float32
 * magnitude bits, ties to the lower index, output in ascending index order).
 * 1. The k-th largest magnitude T by radix selection, 8 bits per round (4 rounds): a histogram of the next byte
 *    among the elements whose higher bits equal T's so far, built with workgroup atomics while invocations
 *    sweep the block in row-contiguous runs; a walk down 16 group sums and then 16 bins picks the byte.
 *    Counts are integers, so the result does not depend on the order the atomics land in.
 * 2. An ordered compaction: each invocation owns a contiguous slice of the block (in-block index order); an
 *    exclusive scan (two levels of 16) of the per-slice counts of |x| > T and |x| = T gives every slice its
 *    output position, and the first k − #{|x| > T} elements equal to T (by index) are kept.
 * Few barriers per block (4 per round, 3 for the scan): cheap on GPUs, and what software adapters pay most for.
 * Results go to out[outBase + blk·k + j] (index) and out[valBase + blk·k + j] (value bits).
 */
export const TOPK = /* wgsl */ `
${bindings(
  'blocks: u32, stride: u32, cols: u32, n1: u32, n2: u32, blocksX: u32, k: u32, outBase: u32, valBase: u32, p0: u32, p1: u32, p2: u32',
  ['read coef: array<u32>', 'read_write out: array<u32>'],
)}
var<workgroup> hist: array<atomic<u32>, ${TOPK_WG}>;
var<workgroup> ga: array<u32, 16>;
var<workgroup> gb: array<u32, 16>;
var<workgroup> sa: array<u32, ${TOPK_WG}>;
var<workgroup> sb: array<u32, ${TOPK_WG}>;
var<workgroup> chosen: vec2<u32>;
fn at(base: u32, e: u32) -> u32 {
  let b = e / u.n2;
  return base + b * u.cols + (e - b * u.n2);
}
@compute @workgroup_size(${TOPK_WG}) fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let blk = wid.x + wid.y * u.stride;
  if (blk >= u.blocks) { return; }
  let by = blk / u.blocksX;
  let base = by * u.n1 * u.cols + (blk - by * u.blocksX) * u.n2;
  let total = u.n1 * u.n2;
  var T = 0u;
  var need = u.k;
  for (var round = 0u; round < 4u; round++) {
    let shift = 24u - 8u * round;
    let fixedMask = select(~((1u << (shift + 8u)) - 1u), 0u, round == 0u);
    atomicStore(&hist[lid], 0u);
    workgroupBarrier();
    for (var e = lid; e < total; e += ${TOPK_WG}u) {
      let m = coef[at(base, e)] & 0x7fffffffu;
      if ((m & fixedMask) == T) { atomicAdd(&hist[(m >> shift) & 0xffu], 1u); }
    }
    workgroupBarrier();
    if (lid < 16u) {
      var g = 0u;
      for (var j = 0u; j < 16u; j++) { g += atomicLoad(&hist[lid * 16u + j]); }
      ga[lid] = g;
    }
    workgroupBarrier();
    // The byte d with #{matching, byte > d} < need ≤ #{matching, byte ≥ d}: walk groups, then bins, from the top.
    if (lid == 0u) {
      var above = 0u;
      var grp = 15u;
      loop {
        if (above + ga[grp] >= need || grp == 0u) { break; }
        above += ga[grp];
        grp--;
      }
      var d = grp * 16u + 15u;
      loop {
        let h = atomicLoad(&hist[d]);
        if (above + h >= need || d == grp * 16u) { break; }
        above += h;
        d--;
      }
      chosen = vec2<u32>(T | (d << shift), need - above);
    }
    workgroupBarrier();
    T = chosen.x;
    need = chosen.y;
  }
  // T is the k-th largest magnitude; take every |x| > T and the first \`need\` elements with |x| = T.
  let per = (total + ${TOPK_WG - 1}u) / ${TOPK_WG}u;
  let lo = min(lid * per, total);
  let hi = min(lo + per, total);
  var cg = 0u;
  var ce = 0u;
  for (var e = lo; e < hi; e++) {
    let m = coef[at(base, e)] & 0x7fffffffu;
    if (m > T) { cg++; } else if (m == T) { ce++; }
  }
  sa[lid] = cg;
  sb[lid] = ce;
  workgroupBarrier();
  // Exclusive prefix sums in two levels: 16 runs of 16 slices, then the 16 run totals.
  if (lid < 16u) {
    var x = 0u;
    var y = 0u;
    for (var j = 0u; j < 16u; j++) {
      let t = lid * 16u + j;
      let a = sa[t];
      let b = sb[t];
      sa[t] = x;
      sb[t] = y;
      x += a;
      y += b;
    }
    ga[lid] = x;
    gb[lid] = y;
  }
  workgroupBarrier();
  if (lid == 0u) {
    var x = 0u;
    var y = 0u;
    for (var j = 0u; j < 16u; j++) {
      let a = ga[j];
      let b = gb[j];
      ga[j] = x;
      gb[j] = y;
      x += a;
      y += b;
    }
  }
  workgroupBarrier();
  var eqSeen = sb[lid] + gb[lid / 16u];
  var pos = sa[lid] + ga[lid / 16u] + min(eqSeen, need);
  let o = blk * u.k;
  for (var e = lo; e < hi; e++) {
    let v = coef[at(base, e)];
    let m = v & 0x7fffffffu;
    if (m > T || (m == T && eqSeen < need)) {
      out[u.outBase + o + pos] = e;
      out[u.valBase + o + pos] = v;
      pos++;
    }
    if (m == T) { eqSeen++; }
  }
}`;

/** delta ← delta − Σ_own v·F1[h, b]·F2[w, d] over the k entries of the element's block. */
export const RESIDUAL = perElement({
  uniform:
    'cols: u32, n1: u32, n2: u32, blocksX: u32, k: u32, firstRow: u32, off1: u32, off2: u32, p0: u32, p1: u32',
  buffers: [
    'read_write delta: array<f32>',
    'read idx: array<u32>',
    'read val: array<f32>',
    'read basis: array<f32>',
  ],
  body: `${ELEMENT_IN_BLOCK}
  var acc = 0.0;
  for (var j = blk * u.k; j < (blk + 1u) * u.k; j++) {
    let e = idx[j];
    let b = e / u.n2;
    let d = e - b * u.n2;
    acc += val[j] * basis[u.off1 + b * u.n1 + h] * basis[u.off2 + d * u.n2 + w];
  }
  delta[i] = delta[i] - acc;`,
});

/**
 * Integer helpers. u64/i64 values are vec2<u32>(low word, high word), two's complement for i64.
 * exact_update(p, f, l, s) = RN_f32(p·f − l·s) computed from the bit patterns (see exact-update.ts for the
 * contract): the exact product p·f (48-bit mantissa), aligned against l·s in a 64-bit window with a sticky
 * bit jammed into bit 0 (the rounding position is always ≥ 2 bits above it), then one round-half-even.
 * exact_update_value(p, f, l, a) = RN_f32(p·f − l·a) for a float32 a (SparseLoCo's outer step): the same
 * core (exact_sub) with the exact 48-bit product l·a in place of l.
 */
export const INT64 = /* wgsl */ `
fn add_i32(a: vec2<u32>, x: i32) -> vec2<u32> {
  let lo = a.x + bitcast<u32>(x);
  let carry = select(0u, 1u, lo < a.x);
  let ext = select(0u, 0xffffffffu, x < 0);
  return vec2<u32>(lo, a.y + ext + carry);
}
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}
fn shl64(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) { return a; }
  if (s >= 64u) { return vec2<u32>(0u, 0u); }
  if (s >= 32u) { return vec2<u32>(0u, a.x << (s - 32u)); }
  return vec2<u32>(a.x << s, (a.y << s) | (a.x >> (32u - s)));
}
fn shr64(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) { return a; }
  if (s >= 64u) { return vec2<u32>(0u, 0u); }
  if (s >= 32u) { return vec2<u32>(a.y >> (s - 32u), 0u); }
  return vec2<u32>((a.x >> s) | (a.y << (32u - s)), a.y >> s);
}
fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.y < b.y || (a.y == b.y && a.x < b.x); }
fn eq64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }
fn zero64(a: vec2<u32>) -> bool { return (a.x | a.y) == 0u; }
fn clz64(a: vec2<u32>) -> u32 {
  if (a.y != 0u) { return countLeadingZeros(a.y); }
  return 32u + countLeadingZeros(a.x);
}
// a·b for a, b < 2^24, via 12-bit limbs so every partial product fits in 32 bits.
fn mul24(a: u32, b: u32) -> vec2<u32> {
  let al = a & 0xfffu;
  let ah = a >> 12u;
  let bl = b & 0xfffu;
  let bh = b >> 12u;
  let mid = ah * bl + al * bh;
  var r = vec2<u32>(al * bl, 0u);
  r = add64(r, vec2<u32>((mid & 0xfffffu) << 12u, mid >> 20u));
  let hh = ah * bh;
  return add64(r, vec2<u32>((hh & 0xffu) << 24u, hh >> 8u));
}
struct Unpacked { m: u32, e: i32 }
fn unpack(b: u32) -> Unpacked {
  let ex = (b >> 23u) & 0xffu;
  let fr = b & 0x7fffffu;
  if (ex == 0u) { return Unpacked(fr, -149); }
  return Unpacked(fr | 0x800000u, i32(ex) - 150);
}
// Rounds sign·m·2^e (m ≠ 0, m < 2^63) to float32 bits, half to even, subnormals and overflow included.
fn round_f32(sign: u32, m: vec2<u32>, e: i32) -> u32 {
  let t = 63 - i32(clz64(m));
  let top = t + e;
  if (top >= 128) { return (sign << 31u) | 0x7f800000u; }
  var shift: i32;
  if (top >= -126) { shift = t - 23; } else { shift = -149 - e; }
  var q = 0u;
  if (shift <= 0) {
    q = shl64(m, u32(-shift)).x;
  } else if (shift < 64) {
    let qq = shr64(m, u32(shift));
    q = qq.x;
    let rem = sub64(m, shl64(qq, u32(shift)));
    let half = shl64(vec2<u32>(1u, 0u), u32(shift - 1));
    if (lt64(half, rem) || (eq64(rem, half) && (q & 1u) == 1u)) { q = q + 1u; }
  }
  var bits = q;
  if (top >= -126) { bits = (u32(top + 127) << 23u) + (q - 0x800000u); }
  return (sign << 31u) | bits;
}
// RN_f32(p·f − y) with y = ±ym·2^ye exact (ym < 2^48) and sb the sign bit of −y (IEEE zeros included).
fn exact_sub(pb: u32, fb: u32, ym: vec2<u32>, ye: i32, sb: u32) -> u32 {
  if ((pb & 0x7f800000u) == 0x7f800000u) { return pb; }
  let P = unpack(pb);
  let F = unpack(fb);
  let sx = pb >> 31u;
  let xm = mul24(P.m, F.m);
  let xzero = zero64(xm);
  let yzero = zero64(ym);
  if (xzero && yzero) { return select(0u, 0x80000000u, sx == 1u && sb == 1u); }
  if (yzero) { return round_f32(sx, xm, P.e + F.e); }
  if (xzero) { return round_f32(sb, ym, ye); }
  var am = xm;
  var ae = P.e + F.e;
  var asg = sx;
  var bm = ym;
  var be = ye;
  var bsg = sb;
  let za = clz64(am) - 16u;
  am = shl64(am, za);
  ae = ae - i32(za);
  let zb = clz64(bm) - 16u;
  bm = shl64(bm, zb);
  be = be - i32(zb);
  if (be > ae || (be == ae && lt64(am, bm))) {
    let tm = am; am = bm; bm = tm;
    let te = ae; ae = be; be = te;
    let ts = asg; asg = bsg; bsg = ts;
  }
  let d = u32(ae - be);
  let A = shl64(am, 13u);
  var B = shl64(bm, 13u);
  var sticky = false;
  if (d >= 61u) {
    B = vec2<u32>(0u, 0u);
    sticky = true;
  } else if (d > 0u) {
    let Bs = shr64(B, d);
    sticky = !eq64(shl64(Bs, d), B);
    B = Bs;
  }
  if (sticky) { B.x = B.x | 1u; }
  var S: vec2<u32>;
  if (asg == bsg) { S = add64(A, B); } else { S = sub64(A, B); }
  if (zero64(S)) { return 0u; }
  return round_f32(asg, S, ae - 13);
}
fn exact_update(pb: u32, fb: u32, lb: u32, s: i32) -> u32 {
  let L = unpack(lb);
  var ym = vec2<u32>(L.m, 0u);
  if (s == 0) { ym = vec2<u32>(0u, 0u); }
  return exact_sub(pb, fb, ym, L.e, select(1u, 0u, s < 0));
}
fn exact_update_value(pb: u32, fb: u32, lb: u32, ab: u32) -> u32 {
  let L = unpack(lb);
  let A = unpack(ab);
  return exact_sub(pb, fb, mul24(L.m, A.m), L.e + A.e, 1u - (ab >> 31u));
}
`;

/**
 * The exact integer IDCT of the element's block (the CPU's accumulateExact): S = Σ m·Bq1[b][h]·Bq2[d][w] =
 * H·2^15 + (lo & 0x7fff), H and lo emulated i64. a = m·Bq1 ≤ 2^30 fits i32; a = ah·2^15 + al keeps both
 * partial products ≤ 2^30. Needs ELEMENT_IN_BLOCK's h, w, blk, the bindings bounds (entries
 * [bounds[2·blk], bounds[2·blk + 1]) are the block's), coef, mean, ibasis and the uniforms n1, n2, off1, off2. Shared by the DisTrO apply (sign of S) and SparseLoCo's outer step
 * (value of S).
 */
export const EXACT_IDCT_SUMS = /* wgsl */ `  var hi = vec2<u32>(0u, 0u);
  var lo = vec2<u32>(0u, 0u);
  for (var e = bounds[2u * blk]; e < bounds[2u * blk + 1u]; e++) {
    let cf = coef[e];
    let b = cf / u.n2;
    let d = cf - b * u.n2;
    let a = mean[e] * ibasis[u.off1 + b * u.n1 + h];
    let B = ibasis[u.off2 + d * u.n2 + w];
    hi = add_i32(hi, (a >> 15u) * B);
    lo = add_i32(lo, (a & 0x7fff) * B);
  }
  // carry = ⌊lo / 2^15⌋ (arithmetic shift), remainder = lo's low 15 bits.
  let carry = vec2<u32>((lo.x >> 15u) | (lo.y << 17u), bitcast<u32>(bitcast<i32>(lo.y) >> 15u));
  let H = add64(hi, carry);`;

/** The parameters an exact decode updates (as u32 bits) and the bindings EXACT_IDCT_SUMS reads, in order. */
export const EXACT_IDCT_BUFFERS: readonly string[] = [
  'read_write param: array<u32>',
  'read bounds: array<u32>',
  'read coef: array<u32>',
  'read mean: array<i32>',
  'read ibasis: array<i32>',
];

/**
 * Exact decode + apply, one invocation per parameter: S = Σ_entries m·Bq1[b][h]·Bq2[d][w] as HI·2^15 + LO
 * (the same split as the CPU's decodeSigns: a = m·Bq1 ≤ 2^30 fits i32, a = ah·2^15 + al, partial products
 * ≤ 2^30 accumulated in emulated 64-bit), s = sign(S), then p ← exact_update(p, f, l, s).
 */
export const APPLY = perElement({
  prelude: INT64,
  uniform:
    'cols: u32, n1: u32, n2: u32, blocksX: u32, firstRow: u32, off1: u32, off2: u32, factor: u32, step: u32, p0: u32',
  buffers: EXACT_IDCT_BUFFERS,
  body: `${ELEMENT_IN_BLOCK}
${EXACT_IDCT_SUMS}
  var s = 0;
  if (bitcast<i32>(H.y) < 0) { s = -1; } else if (!zero64(H) || (lo.x & 0x7fffu) != 0u) { s = 1; }
  param[i] = exact_update(param[i], u.factor, u.step, s);`,
});
