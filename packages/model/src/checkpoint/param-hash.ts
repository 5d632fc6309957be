// The parameter hash replicas compare at every epoch end: SHA-256 over every parameter in ascending
// byte-lexicographic name order (the DisTrO variable order), each as float32 little-endian bytes. Names are
// not hashed: the run fixes them, and two replicas that agree on all bytes in this order are identical.
// Clients report it per epoch (core wire `ParamHash`) and the relay keeps the uploaded checkpoint whose hash
// is the coordinator's majority value, so both must compute it here, from one definition.
import { bytesToHex, sha256Concat, variableOrder } from '@meshtrain/core';

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Names in the variable order every result and hash use (docs/protocol.md "Variable order"): core's rule,
 * ascending by UTF-8 bytes (ASCII names: code units).
 */
export const parameterOrder = variableOrder;

function leBytes(x: Float32Array): Uint8Array {
  const view = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  if (LITTLE_ENDIAN) return view;
  const out = new Uint8Array(view.length);
  for (let i = 0; i < view.length; i += 4) for (let b = 0; b < 4; b++) out[i + b] = view[i + 3 - b] as number;
  return out;
}

/** The 32-byte parameter hash (see the module comment for the exact byte stream). */
export function parameterHash(params: ReadonlyMap<string, Float32Array>): Uint8Array {
  return sha256Concat(...parameterOrder(params.keys()).map((n) => leBytes(params.get(n) as Float32Array)));
}

/** parameterHash as lowercase hex: the form the relay's checkpoint API and stored metadata carry. */
export function parameterHashHex(params: ReadonlyMap<string, Float32Array>): string {
  return bytesToHex(parameterHash(params));
}
