// SparseLoCo's outer step: every replica applies the same accepted results and must end with bit-identical
// parameters. Aggregation uses integers and exactly rounded float64 steps only, on the host (shared by both
// backends) or on a backend that does it itself (the WGSL one, on the device); the backends apply it with
// one correctly rounded float32 operation per parameter:
//   p ← RN_f32(p − l·A),  l = fround(outer lr), A = the parameter's aggregate (a float32 defined below).
//
// Raw domain (top-k on the entries themselves), per coordinate c sent by `count` entries v_1..v_count
// (each an exact float32: ±scale, see quantize.ts):
//   s = 23 − ⌊log2 max_j |v_j|⌋        (from the float bits; no Math.log2)
//   q_j = roundHalfEven(v_j·2^s)       (exact: v·2^s is a float64 product by a power of two, |q_j| ≤ 2^24)
//   M = round-half-away(Σ q_j / d)     (safe integers; d = count, or the number of results)
//   A = RN_f32(M·2^−s)                 (Math.fround of an exact float64), saturated to ±FLT_MAX
// so A is the mean to float32 precision relative to the coordinate's largest contribution. Coordinates no
// result sent, or whose A is 0, are not touched.
//
// DCT domain: the dequantised coefficients go through aggregate.ts (one fixed point per block, |mean| ≤
// 2^15, value = mean·2^−shift), the exact integer IDCT S = Σ mean·Bq1·Bq2 (integer basis, 2^15 scale per
// axis), and A = RN_f32(S·2^−(30+shift)) rounded once from the exact integer, saturated to ±FLT_MAX. The
// coefficient resolution is 2^−15 of the block's largest |value| and the basis is round(2^15·F) (relative
// error ≈ 1e-4 of each basis entry), far below the 2-bit quantisation error; what matters is that it is
// the same number everywhere. Every parameter of a block that received something is updated.
import { aggregateTensor, fixedMean, floorLog2, roundHalfEven, type AggregatedTensor } from '../aggregate.ts';
import type { DistroBackend, DistroTensor } from '../backend.ts';
import { DistroShapeError, elementIndex, tensorLayout, type BlockLayout } from '../layout.ts';
import type { TensorResult } from '../result.ts';
import { checkQuantResult, dequantizeResult, type QuantTensorResult } from './quantize.ts';

/** Where top-k selects: the chunk's DCT-II coefficients, or its entries themselves. */
export type SparseDomain = 'dct' | 'raw';

export const F32_MAX = 3.4028234663852886e38;

export interface RawOuterAggregate {
  readonly domain: 'raw';
  readonly layout: BlockLayout;
  /** CSR offsets into element/value, one per block plus one (so a segment of block rows is one range). */
  readonly blockStart: Uint32Array;
  /** Flat element index in the tensor, ascending within a block. */
  readonly element: Uint32Array;
  /** The aggregate A of that element: finite, nonzero. */
  readonly value: Float32Array;
}

export interface DctOuterAggregate {
  readonly domain: 'dct';
  readonly layout: BlockLayout;
  readonly agg: AggregatedTensor;
}

export type OuterAggregate = RawOuterAggregate | DctOuterAggregate;

export interface OuterAggregateOptions {
  domain: SparseDomain;
  /**
   * Divide each coordinate's sum by the number of results that sent it ('senders', default: it measured
   * much better with sparse updates) or by the number of results ('results': SparseLoCo as published).
   */
  divideBy?: 'senders' | 'results';
}

const VALUE_TOP = 23;

const saturate = (a: number): number => (Number.isFinite(a) ? a : Math.sign(a) * F32_MAX);

/** 2^(VALUE_TOP − e) and 2^(e − VALUE_TOP) for every ⌊log2 |v|⌋ e of a nonzero float32 (−149..127). */
const SCALE_UP = Float64Array.from({ length: 277 }, (_, i) => 2 ** (VALUE_TOP - (i - 149)));
const SCALE_DOWN = Float64Array.from({ length: 277 }, (_, i) => 2 ** (i - 149 - VALUE_TOP));
const NO_EXP = -1000;

function aggregateRaw(
  l: BlockLayout,
  results: readonly TensorResult[],
  byResults: boolean,
): RawOuterAggregate {
  if (l.size > 0xffffffff) throw new DistroShapeError(`tensor of ${l.size} elements exceeds u32 indexing`);
  const maxExp = new Int32Array(l.totalk).fill(NO_EXP);
  const sum = new Float64Array(l.totalk);
  const count = new Uint32Array(l.totalk);
  let entries = 0;
  for (const r of results) entries += r.indices.length;
  const touched = new Uint32Array(Math.min(l.totalk, entries));
  const blockStart = new Uint32Array(l.blocks + 1);
  const element = new Uint32Array(entries);
  const value = new Float32Array(entries);
  let out = 0;
  for (let b = 0; b < l.blocks; b++) {
    let nTouched = 0;
    for (const r of results)
      for (let j = b * r.k; j < (b + 1) * r.k; j++) {
        const c = r.indices[j] as number;
        const x = r.values[j] as number;
        if (count[c] === 0) touched[nTouched++] = c;
        count[c]! += 1;
        if (x !== 0) maxExp[c] = Math.max(maxExp[c] as number, floorLog2(x));
      }
    for (const r of results)
      for (let j = b * r.k; j < (b + 1) * r.k; j++) {
        const c = r.indices[j] as number;
        const e = maxExp[c] as number;
        if (e !== NO_EXP) sum[c]! += roundHalfEven((r.values[j] as number) * (SCALE_UP[e + 149] as number));
      }
    const block = touched.subarray(0, nTouched).sort();
    for (const c of block) {
      const e = maxExp[c] as number;
      if (e !== NO_EXP) {
        const m = fixedMean(sum[c] as number, byResults ? results.length : (count[c] as number));
        const a = saturate(Math.fround(m * (SCALE_DOWN[e + 149] as number)));
        if (a !== 0) {
          const h = Math.floor(c / l.n2);
          element[out] = elementIndex(l, b, h, c - h * l.n2);
          value[out++] = a;
        }
      }
      maxExp[c] = NO_EXP;
      sum[c] = 0;
      count[c] = 0;
    }
    blockStart[b + 1] = out;
  }
  return { domain: 'raw', layout: l, blockStart, element: element.slice(0, out), value: value.slice(0, out) };
}

/** Checks every (untrusted) result against the layout and returns the values each stands for. */
function checkedValues(layout: BlockLayout, results: readonly QuantTensorResult[]): TensorResult[] {
  results.forEach((r, i) => checkQuantResult(r, layout, `result ${i}`));
  return results.map(dequantizeResult);
}

function aggregateValues(
  layout: BlockLayout,
  deq: readonly TensorResult[],
  options: OuterAggregateOptions,
): OuterAggregate {
  const byResults = options.divideBy === 'results';
  if (options.domain === 'raw') return aggregateRaw(layout, deq, byResults);
  if (options.domain !== 'dct') throw new DistroShapeError(`unknown domain ${String(options.domain)}`);
  return {
    domain: 'dct',
    layout,
    agg: aggregateTensor(layout, deq, { divideBy: byResults ? 'results' : 'senders' }),
  };
}

/** Checks every result against the layout and aggregates them (see the header). */
export function aggregateOuter(
  layout: BlockLayout,
  results: readonly QuantTensorResult[],
  options: OuterAggregateOptions,
): OuterAggregate {
  return aggregateValues(layout, checkedValues(layout, results), options);
}

/** fround(lr), checked: the outer learning rate the kernels read. */
export function outerStepScalar(lr: number): number {
  const l = Math.fround(lr);
  if (!Number.isFinite(l) || l < 0) throw new RangeError(`outer lr must be a finite float32 ≥ 0, got ${lr}`);
  return l;
}

export interface OuterStepOptions extends OuterAggregateOptions {
  /** The outer learning rate α: p ← p − α·aggregate. */
  lr: number;
}

/**
 * One round's outer step over every tensor: results[peer][tensor] (tensors in the parameter order, as
 * applyResults takes them). Nothing changes when no result was accepted.
 */
export function outerStep(
  backend: DistroBackend,
  params: readonly DistroTensor[],
  results: readonly (readonly QuantTensorResult[])[],
  options: OuterStepOptions,
): void {
  const step = outerStepScalar(options.lr);
  if (options.domain !== 'raw' && options.domain !== 'dct')
    throw new DistroShapeError(`unknown domain ${String(options.domain)}`);
  if (results.length === 0) return;
  for (const [peer, r] of results.entries())
    if (r.length !== params.length)
      throw new DistroShapeError(`peer ${peer}: ${r.length} tensor results for ${params.length} parameters`);
  params.forEach((p, i) => {
    const layout = tensorLayout(p.shape, backend.chunk);
    const deq = checkedValues(
      layout,
      results.map((r) => r[i] as QuantTensorResult),
    );
    // A backend that aggregates results itself (on the GPU) saves the host's pass over every entry.
    if (backend.applyOuterResults?.(p, deq, options.domain, options.divideBy ?? 'senders', step)) return;
    backend.applyOuter(p, aggregateValues(layout, deq, options), step);
  });
}
