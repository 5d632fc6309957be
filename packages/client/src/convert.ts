// DisTrO results between packages/distro's in-memory form (TensorResult: wide indices, float values) and
// core's wire form (DistroResult: indices at their narrowed width, 1-bit signs packed).
import { chunkSizeOf, indexWidth, packSigns, unpackSigns, type DistroResult } from '@meshtrain/core';
import type { TensorResult } from '@meshtrain/distro';

export function toWire(r: TensorResult): DistroResult {
  const width = indexWidth(r.totalk);
  const indices =
    width === 1
      ? Uint8Array.from(r.indices)
      : width === 2
        ? Uint16Array.from(r.indices)
        : Uint32Array.from(r.indices);
  return {
    xshape: [...r.xshape],
    totalk: r.totalk,
    indices,
    values: r.quantized ? packSigns(r.values) : { kind: 'f32', values: Float32Array.from(r.values) },
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
