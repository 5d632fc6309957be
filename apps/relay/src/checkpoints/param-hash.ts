// The parameter hash: SHA-256 over every parameter tensor's float32 little-endian bytes, tensors in
// ascending name order (JS string comparison = byte order for the ASCII HF names), names themselves not
// hashed. It is the same definition as packages/client's `parameterHash` (a test holds them equal); the
// relay cannot import the client package, so until the function moves to @meshtrain/model or core it lives
// twice. Clients report it per epoch (core wire `ParamHash`) and the coordinator's majority value decides
// which uploaded checkpoint the relay keeps.
import { createHash } from 'node:crypto';

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Lowercase hex SHA-256 of the parameters (see the module comment for the exact byte stream). */
export function computeParamHash(params: ReadonlyMap<string, Float32Array>): string {
  const h = createHash('sha256');
  const names = [...params.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const name of names) {
    const t = params.get(name) as Float32Array;
    const bytes = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
    if (LITTLE_ENDIAN) h.update(bytes);
    else {
      const le = new Uint8Array(bytes.length);
      for (let i = 0; i < bytes.length; i += 4)
        for (let b = 0; b < 4; b++) le[i + b] = bytes[i + 3 - b] as number;
      h.update(le);
    }
  }
  return h.digest('hex');
}
