// SHA-256 helpers. Every protocol hash in meshtrain is SHA-256 (commitments, committee seeds).
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8Bytes } from './bytes.ts';

/** SHA-256 of one byte array. */
export function sha256(data: Uint8Array): Uint8Array {
  return nobleSha256(data);
}

/** SHA-256 over the concatenation of `parts`, streamed (no concatenated copy). */
export function sha256Concat(...parts: readonly Uint8Array[]): Uint8Array {
  const h = nobleSha256.create();
  for (const p of parts) h.update(p);
  return h.digest();
}

/** Lower-case hex SHA-256. */
export function sha256Hex(data: Uint8Array): string {
  return bytesToHex(nobleSha256(data));
}

/**
 * Domain separation tag: one length byte, then the ASCII tag. The length prefix makes sure no tag is a
 * prefix of another tag's encoding, so a hash or signature made for one purpose can never be replayed
 * as another.
 */
export function domainTag(tag: string): Uint8Array {
  const b = utf8Bytes(tag);
  if (b.length === 0 || b.length > 255) throw new RangeError(`domain tag must be 1..255 bytes: ${tag}`);
  const out = new Uint8Array(1 + b.length);
  out[0] = b.length;
  out.set(b, 1);
  return out;
}

/** SHA-256 of `domainTag(tag) ‖ parts...`. */
export function taggedHash(tag: string, ...parts: readonly Uint8Array[]): Uint8Array {
  return sha256Concat(domainTag(tag), ...parts);
}
