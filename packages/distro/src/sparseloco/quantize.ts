// n-bit quantisation of a sparse result with a per-chunk level table (SparseLoCo's 2-bit values,
// generalised to 1..8 bits). Each entry becomes a code: bit 0 = sign (1 = negative, −0 included), bits
// 1..bits−1 = a level ℓ < L = 2^(bits−1); each chunk sends L magnitudes (`scales`, float32). The receiver's
// value is ±scales[chunk·L + ℓ]: an exact float32, no arithmetic, so every replica reads the same number.
//
// The sender picks the table by Lloyd-Max on the chunk's k magnitudes (1-D k-means: groups of adjacent
// magnitudes, each scale the mean of its group, each entry at its nearest scale). With bits = 2 that is
// the "two scales per chunk, the mean |value| of the small and the large group" of SparseLoCo, with the
// split point refined until it is the midpoint of the two means (the least-squares optimum). Quantisation
// runs only on the sender, so it need not be bit-identical anywhere; the decode is exact by construction.
//
// Codes are packed as core's wire codec sends them (valueKind 2): entry i at stream bits [i·bits,
// i·bits + bits), stream bit j = bit j%8 of byte ⌊j/8⌋. With bits = 1 that is the 1-bit sign layout.
import { DistroShapeError, sameShape, type BlockLayout } from '../layout.ts';
import { checkResult, type TensorResult } from '../result.ts';

/** Widest code (1 sign bit + 7 level bits); the same bound as core's wire codec. */
export const MAX_QUANT_BITS = 8;

/** A chunk-wise top-k result with n-bit quantised values: what a SparseLoCo peer sends for one tensor. */
export interface QuantTensorResult {
  /** Psyche's encoded shape (see layout.ts), as in TensorResult. */
  readonly xshape: readonly number[];
  readonly totalk: number;
  /** Entries per chunk. */
  readonly k: number;
  /** chunks × k in-block indices (row·n2 + col), chunk-grid order, distinct within a chunk. */
  readonly indices: Uint32Array;
  /** Bits per code, 1..MAX_QUANT_BITS. */
  readonly bits: number;
  /** chunks × quantLevels(bits) magnitudes, chunk-major; finite, sign bit clear. */
  readonly scales: Float32Array;
  /** chunks × k packed codes (see the header). */
  readonly codes: Uint8Array;
}

/** Magnitude levels per chunk: 2^(bits−1). */
export function quantLevels(bits: number): number {
  return 2 ** (bits - 1);
}

function checkBits(bits: number): void {
  if (!Number.isInteger(bits) || bits < 1 || bits > MAX_QUANT_BITS)
    throw new DistroShapeError(`bits must be an integer in [1, ${MAX_QUANT_BITS}], got ${bits}`);
}

/** Packs one code per entry (each < 2^bits) LSB-first. */
export function packCodes(codes: Uint8Array, bits: number): Uint8Array {
  checkBits(bits);
  const out = new Uint8Array(Math.ceil((codes.length * bits) / 8));
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i] as number;
    if (c >>> bits !== 0) throw new DistroShapeError(`code ${c} does not fit in ${bits} bits`);
    const pos = i * bits;
    // A code spans at most two bytes (bits ≤ 8).
    const word = c << (pos & 7);
    out[pos >> 3]! |= word & 0xff;
    if (word > 0xff) out[(pos >> 3) + 1]! |= word >> 8;
  }
  return out;
}

export function unpackCodes(packed: Uint8Array, bits: number, count: number): Uint8Array {
  checkBits(bits);
  if (packed.length !== Math.ceil((count * bits) / 8))
    throw new DistroShapeError(
      `code payload has ${packed.length} bytes, ${count} ${bits}-bit codes need ${Math.ceil((count * bits) / 8)}`,
    );
  const out = new Uint8Array(count);
  const mask = (1 << bits) - 1;
  for (let i = 0; i < count; i++) {
    const pos = i * bits;
    const word = (packed[pos >> 3] as number) | ((packed[(pos >> 3) + 1] ?? 0) << 8);
    out[i] = (word >> (pos & 7)) & mask;
  }
  return out;
}

const LLOYD_ROUNDS = 32;

/** Work arrays for one chunk's level table, allocated once per result instead of once per chunk. */
interface LloydScratch {
  group: Int32Array;
  sum: Float64Array;
  count: Uint32Array;
  centre: Float64Array;
  /** The levels with members (their indices, then their centres), rebuilt each round. */
  live: Int32Array;
  liveCentres: Float64Array;
}

function lloydScratch(k: number, levels: number): LloydScratch {
  return {
    group: new Int32Array(k),
    sum: new Float64Array(levels),
    count: new Uint32Array(levels),
    centre: new Float64Array(levels),
    live: new Int32Array(levels),
    liveCentres: new Float64Array(levels),
  };
}

/** Index of the level nearest to `m` among `table[at..at + n)` (ties to the lower level). */
function nearestOf(table: ArrayLike<number>, at: number, n: number, m: number): number {
  let best = 0;
  let dist = Math.abs(m - (table[at] as number));
  for (let l = 1; l < n; l++) {
    const d = Math.abs(m - (table[at + l] as number));
    if (d < dist) {
      dist = d;
      best = l;
    }
  }
  return best;
}

/**
 * Lloyd-Max level table for `mags` (ascending, k of them): groups are runs of adjacent magnitudes, starting
 * from equal counts; then alternately each level becomes its group's mean and each magnitude joins its nearest
 * level, until nothing moves. A level whose group is empty stays 0. Writes float32 levels (means rounded once)
 * to out[at..at + levels).
 */
function levelTable(
  mags: Float64Array,
  k: number,
  levels: number,
  out: Float32Array,
  at: number,
  w: LloydScratch,
): void {
  const { group, sum, count, centre, live, liveCentres } = w;
  for (let i = 0; i < k; i++) group[i] = Math.min(levels - 1, Math.floor((i * levels) / k));
  for (let round = 0; round < LLOYD_ROUNDS; round++) {
    sum.fill(0);
    count.fill(0);
    for (let i = 0; i < k; i++) {
      const g = group[i] as number;
      sum[g]! += mags[i] as number;
      count[g]! += 1;
    }
    let nLive = 0;
    for (let l = 0; l < levels; l++) {
      const c = count[l] as number;
      centre[l] = c ? (sum[l] as number) / c : 0;
      if (c) {
        live[nLive] = l;
        liveCentres[nLive++] = centre[l] as number;
      }
    }
    let moved = false;
    for (let i = 0; i < k; i++) {
      const g = live[nearestOf(liveCentres, 0, nLive, mags[i] as number)] as number;
      if (g !== group[i]) {
        group[i] = g;
        moved = true;
      }
    }
    if (!moved) break;
  }
  for (let l = 0; l < levels; l++) out[at + l] = centre[l] as number;
}

/**
 * Quantises every chunk of `r` to `bits` bits with its own level table (see the header). Values must be
 * finite (they come from the sender's own error-feedback buffer).
 */
export function quantizeResult(r: TensorResult, bits: number): QuantTensorResult {
  checkBits(bits);
  const L = quantLevels(bits);
  const k = r.k;
  const chunks = r.values.length / k;
  if (!Number.isInteger(chunks) || r.indices.length !== r.values.length)
    throw new DistroShapeError(`result has ${r.values.length} values for k = ${k}`);
  const scales = new Float32Array(chunks * L);
  const codes = new Uint8Array(chunks * k);
  const mags = new Float64Array(k);
  const bitsOfValues = new Uint32Array(r.values.buffer, r.values.byteOffset, r.values.length);
  const w = lloydScratch(k, L);
  for (let c = 0; c < chunks; c++) {
    const base = c * k;
    for (let j = 0; j < k; j++) {
      const v = r.values[base + j] as number;
      if (!Number.isFinite(v)) throw new DistroShapeError(`cannot quantise the non-finite value ${v}`);
      mags[j] = Math.abs(v);
    }
    mags.sort(); // numeric: the chunk's magnitudes ascending (equal ones are interchangeable)
    levelTable(mags, k, L, scales, c * L, w);
    for (let j = 0; j < k; j++) {
      const v = r.values[base + j] as number;
      // The nearest level of the float32 table actually sent, so rounding the means cannot misplace one.
      codes[base + j] =
        ((bitsOfValues[base + j] as number) >>> 31) | (nearestOf(scales, c * L, L, Math.abs(v)) << 1);
    }
  }
  return {
    xshape: r.xshape,
    totalk: r.totalk,
    k,
    indices: r.indices,
    bits,
    scales,
    codes: packCodes(codes, bits),
  };
}

/** The values a quantised result stands for, exactly: ±scales[chunk·L + level] (a sign bit on −0 too). */
export function dequantizeResult(q: QuantTensorResult): TensorResult {
  const L = quantLevels(q.bits);
  const n = q.indices.length;
  const codes = unpackCodes(q.codes, q.bits, n);
  const values = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const code = codes[i] as number;
    const s = q.scales[Math.floor(i / q.k) * L + (code >> 1)] as number;
    values[i] = code & 1 ? -s : s;
  }
  return {
    xshape: q.xshape,
    totalk: q.totalk,
    k: q.k,
    indices: q.indices,
    values,
    quantized: false,
  };
}

/** Checks a (possibly untrusted) quantised result against the layout the run's chunk gives the tensor. */
export function checkQuantResult(q: QuantTensorResult, l: BlockLayout, what = 'result'): void {
  if (!sameShape(q.xshape, l.xshape))
    throw new DistroShapeError(
      `${what}: xshape [${q.xshape.join(', ')}] does not match the expected [${l.xshape.join(', ')}]`,
    );
  if (!(q.scales instanceof Float32Array) || !(q.codes instanceof Uint8Array))
    throw new DistroShapeError(`${what}: scales must be a Float32Array and codes a Uint8Array`);
  checkBits(q.bits);
  const L = quantLevels(q.bits);
  if (q.scales.length !== l.blocks * L)
    throw new DistroShapeError(`${what}: ${q.scales.length} scales, expected ${l.blocks} chunks × ${L}`);
  const raw = new Uint32Array(q.scales.buffer, q.scales.byteOffset, q.scales.length);
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i] as number;
    if (b >>> 31 || (b & 0x7f800000) === 0x7f800000)
      throw new DistroShapeError(`${what}: scale ${q.scales[i]} is not a finite magnitude`);
  }
  // Index checks are TensorResult's; the values array only has to have the right length for them.
  checkResult({ ...q, values: new Float32Array(q.indices.length), quantized: false }, l, what);
  const bytes = Math.ceil((q.indices.length * q.bits) / 8);
  if (q.codes.length !== bytes)
    throw new DistroShapeError(`${what}: ${q.codes.length} code bytes, expected ${bytes}`);
}
