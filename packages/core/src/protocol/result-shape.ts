// What a valid result looks like for a run: one tensor per model parameter, in the variable order, each cut
// into chunks as the optimizer cuts that parameter, with exactly `compression_topk` entries per chunk and the
// value kind (for SparseLoCo also the code width) the run quantises to. The wire decoder already refuses
// what cannot be spelled (indices out of range or repeated in a chunk, padding bits, non-finite values);
// this checks a decoded result against the model, so that the host refuses anything the apply step could
// not use — or that would weigh more than an honest result (a "dense" result with every coefficient,
// another xshape, f32 values in a 1-bit run) — before it is stored, announced or witnessed. Clients run the
// same check on what reaches them from peers.
//
// The layout rules (variable order, chunk per dimension, encoded shape) are protocol, not optimizer detail:
// the i-th tensor of every result is the i-th parameter, and every peer must cut it the same way.
import type { DistroOptimizer, Optimizer } from '../config/types.ts';
import { chunkSizeOf, encodedDistroResultSize, type DistroResult } from '../wire/distro-result.ts';
import { RESULT_ENVELOPE_BYTES } from '../wire/commitment.ts';
import type { TrainingResult } from '../wire/training-result.ts';
import { ProtocolRefusal } from './refusal.ts';
import { FINGERPRINT_BITS } from './verification.ts';

/**
 * The chunk for one dimension: `chunk` itself when it divides `size`, else the largest divisor of `size`
 * below `chunk`; `size` when `size < chunk`. Nothing is ever padded, so awkward sizes get small chunks
 * (50257 → 29).
 */
export function smallerSplit(size: number, chunk: number): number {
  if (size <= chunk) return size;
  // Divisors come in pairs (d, size/d) up to √size: the answer is the largest one ≤ chunk.
  let best = 1;
  for (let d = 1; d * d <= size; d++) {
    if (size % d !== 0) continue;
    const e = size / d;
    if (d <= chunk && d > best) best = d;
    if (e <= chunk && e > best) best = e;
  }
  return best;
}

/**
 * The encoded shape of a parameter cut into chunks: [L/n, n] for vectors (n = smallerSplit(L)), and
 * [..., R/n1, C/n2, n1, n2] for matrices (an independent n1×n2 block per chunk); `totalk` is the chunk size.
 */
export function encodedShape(shape: readonly number[], chunk: number): { xshape: number[]; totalk: number } {
  const dims = shape.length === 0 ? [1] : shape;
  if (dims.length === 1) {
    const n = smallerSplit(dims[0] as number, chunk);
    return { xshape: [(dims[0] as number) / n, n], totalk: n };
  }
  const R = dims[dims.length - 2] as number;
  const C = dims[dims.length - 1] as number;
  const n1 = smallerSplit(R, chunk);
  const n2 = smallerSplit(C, chunk);
  return { xshape: [...dims.slice(0, -2), R / n1, C / n2, n1, n2], totalk: n1 * n2 };
}

/** Parameter names in the order every result lists its tensors: ascending byte order of the name. */
export function variableOrder(names: Iterable<string>): string[] {
  return [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

export interface TensorSpec {
  name: string;
  xshape: readonly number[];
  totalk: number;
  /** Entries per chunk: the run's top-k, clamped to 1..totalk. */
  k: number;
}

export interface ResultSpec {
  /** In variable order. */
  tensors: readonly TensorSpec[];
  valueKind: DistroResult['values']['kind'];
  /** Bits per code of 'quant' values (SparseLoCo's quantization_bits); absent for the other kinds. */
  bits?: number;
  /** Bytes of gradient fingerprint every result carries: FINGERPRINT_BITS / 8 when the run verifies, else 0. */
  fingerprintBytes: number;
}

type ParamShapes = ReadonlyArray<{ name: string; shape: readonly number[] }>;

function tensorSpecs(params: ParamShapes, chunk: number, topk: number): TensorSpec[] {
  const byName = new Map(params.map((p) => [p.name, p.shape]));
  return variableOrder(byName.keys()).map((name) => {
    const { xshape, totalk } = encodedShape(byName.get(name) as readonly number[], chunk);
    return { name, xshape, totalk, k: Math.min(Math.max(topk, 1), totalk) };
  });
}

const fingerprintBytesOf = (verification_percent: number): number =>
  verification_percent > 0 ? FINGERPRINT_BITS / 8 : 0;

/** The result spec of a DisTrO run over parameters `{name, shape}` (any order). */
export function resultSpecOf(
  params: ParamShapes,
  distro: Pick<DistroOptimizer, 'compression_chunk' | 'compression_topk' | 'quantize_1bit'>,
  verification_percent = 0,
): ResultSpec {
  return {
    tensors: tensorSpecs(params, distro.compression_chunk, distro.compression_topk),
    valueKind: distro.quantize_1bit ? 'sign' : 'f32',
    fingerprintBytes: fingerprintBytesOf(verification_percent),
  };
}

/**
 * The result spec of a run with either optimizer: DisTrO's (resultSpecOf), or SparseLoCo's — n-bit quantised
 * values (valueKind 2) with exactly the run's `quantization_bits`, top-k of its chunks. Null for an optimizer
 * whose peers exchange no results (AdamW).
 */
export function runResultSpec(
  params: ParamShapes,
  optimizer: Optimizer,
  verification_percent = 0,
): ResultSpec | null {
  if ('Distro' in optimizer) return resultSpecOf(params, optimizer.Distro, verification_percent);
  if (!('SparseLoCo' in optimizer)) return null;
  const s = optimizer.SparseLoCo;
  return {
    tensors: tensorSpecs(params, s.compression_chunk, s.compression_topk),
    valueKind: 'quant',
    bits: s.quantization_bits,
    fingerprintBytes: fingerprintBytesOf(verification_percent),
  };
}

/**
 * The largest SignedResult frame a result fitting `spec` can be (every varint at its widest, the longest run
 * id): a host may refuse anything bigger before decoding it.
 */
export function maxSignedResultBytes(spec: ResultSpec): number {
  const HEADER = 4;
  const RUN_ID = 1 + 64;
  const VARINTS = 9 * 5; // step, batch start and end, nonce, tensor count
  let size = HEADER + RESULT_ENVELOPE_BYTES + RUN_ID + VARINTS + 9 + spec.fingerprintBytes;
  for (const t of spec.tensors)
    size += encodedDistroResultSize(t.xshape, t.k, spec.valueKind, spec.bits ?? 8);
  return size;
}

/** Why `result` does not fit `spec`, or null when it does. */
export function checkResultShape(result: TrainingResult, spec: ResultSpec): ProtocolRefusal | null {
  const bad = (message: string) => new ProtocolRefusal('bad_result', message);
  const fingerprint = result.fingerprint?.length ?? 0;
  if (fingerprint !== spec.fingerprintBytes)
    return bad(
      `the result has a ${fingerprint}-byte gradient fingerprint; the run's results carry ${spec.fingerprintBytes}`,
    );
  if (result.tensors.length !== spec.tensors.length)
    return bad(`the result has ${result.tensors.length} tensors; the model has ${spec.tensors.length}`);
  for (let i = 0; i < spec.tensors.length; i++) {
    const want = spec.tensors[i] as TensorSpec;
    const got = result.tensors[i] as DistroResult;
    const at = `tensor ${i} (${want.name})`;
    if (got.xshape.length !== want.xshape.length || got.xshape.some((d, j) => d !== want.xshape[j]))
      return bad(`${at}: xshape [${got.xshape.join(', ')}], expected [${want.xshape.join(', ')}]`);
    if (got.totalk !== want.totalk || chunkSizeOf(got.xshape) !== want.totalk)
      return bad(`${at}: chunk size ${got.totalk}, expected ${want.totalk}`);
    let elements = 1;
    for (const d of want.xshape) elements *= d;
    const chunks = elements / want.totalk;
    if (got.indices.length !== chunks * want.k)
      return bad(`${at}: ${got.indices.length / chunks} entries per chunk, expected exactly ${want.k}`);
    if (got.values.kind !== spec.valueKind)
      return bad(`${at}: ${got.values.kind} values, the run sends ${spec.valueKind}`);
    // A code's width is the run's: a result with wider codes would claim finer values than every other one.
    if (got.values.kind === 'quant' && got.values.bits !== spec.bits)
      return bad(`${at}: ${got.values.bits}-bit codes, the run sends ${spec.bits ?? '?'}-bit`);
  }
  return null;
}
