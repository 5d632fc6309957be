// Results between packages/distro's in-memory forms (TensorResult: wide indices, float values; SparseLoCo's
// QuantTensorResult: wide indices, packed n-bit codes and level tables) and core's wire form (DistroResult:
// indices at their narrowed width, 1-bit signs packed, n-bit values as valueKind 2).
import { chunkSizeOf, indexWidth, packSigns, unpackSigns, type DistroResult } from '@meshtrain/core';
import type { QuantTensorResult, TensorResult } from '@meshtrain/distro';

function narrowed(totalk: number, indices: Uint32Array): DistroResult['indices'] {
  const width = indexWidth(totalk);
  return width === 1
    ? Uint8Array.from(indices)
    : width === 2
      ? Uint16Array.from(indices)
      : Uint32Array.from(indices);
}

export function toWire(r: TensorResult): DistroResult {
  return {
    xshape: [...r.xshape],
    totalk: r.totalk,
    indices: narrowed(r.totalk, r.indices),
    values: r.quantized ? packSigns(r.values) : { kind: 'f32', values: Float32Array.from(r.values) },
  };
}

/** A SparseLoCo result as core sends it (valueKind 2: bits ‖ scales ‖ codes). */
export function quantToWire(q: QuantTensorResult): DistroResult {
  return {
    xshape: [...q.xshape],
    totalk: q.totalk,
    indices: narrowed(q.totalk, q.indices),
    values: { kind: 'quant', bits: q.bits, scales: q.scales, codes: q.codes },
  };
}

/**
 * A received SparseLoCo result in distro's form. Only the values' kind is checked here; the layout is
 * checked against the model where it is used (outerStep's checkQuantResult, core's checkResultShape).
 */
export function quantFromWire(d: DistroResult): QuantTensorResult {
  if (d.values.kind !== 'quant')
    throw new TypeError(`${d.values.kind} values are not SparseLoCo's n-bit quantised values`);
  let elements = 1;
  for (const x of d.xshape) elements *= x;
  const chunks = elements / chunkSizeOf(d.xshape);
  return {
    xshape: [...d.xshape],
    totalk: d.totalk,
    k: d.indices.length / chunks,
    indices: Uint32Array.from(d.indices),
    bits: d.values.bits,
    scales: d.values.scales,
    codes: d.values.codes,
  };
}

export function fromWire(d: DistroResult): TensorResult {
  let elements = 1;
  for (const x of d.xshape) elements *= x;
  const chunks = elements / chunkSizeOf(d.xshape);
  const k = d.indices.length / chunks;
  if (d.values.kind === 'quant')
    throw new TypeError('n-bit quantised values are SparseLoCo results, not DisTrO TensorResults');
  const values = d.values.kind === 'sign' ? unpackSigns(d.values) : d.values.values;
  return {
    xshape: [...d.xshape],
    totalk: d.totalk,
    k,
    indices: Uint32Array.from(d.indices),
    values,
    quantized: d.values.kind === 'sign',
  };
}
