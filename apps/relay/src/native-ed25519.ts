// Ed25519 verification on Node's OpenSSL, installed as core's fast verifier (core's setFastEd25519Verifier):
// the relay verifies every Join, result and announce, and the pure verifier costs ~2.5 ms of its one thread
// each. Core keeps the answers identical to its strict verifier (see setFastEd25519Verifier).
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

/** SubjectPublicKeyInfo DER prefix of an Ed25519 key (RFC 8410); the raw 32-byte key follows. */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** Parsed keys kept for reuse: each client verifies with its one key many times. */
const MAX_CACHED_KEYS = 16_384;
const keys = new Map<string, KeyObject>();

function keyObject(publicKey: Uint8Array): KeyObject {
  const hex = Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('hex');
  let k = keys.get(hex);
  if (k === undefined) {
    k = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' });
    if (keys.size >= MAX_CACHED_KEYS) keys.delete(keys.keys().next().value as string);
    keys.set(hex, k);
  }
  return k;
}

/** OpenSSL's Ed25519 verify; false (never a throw) for keys OpenSSL cannot parse. */
export function nativeEd25519Verify(
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): boolean {
  try {
    return nodeVerify(null, message, keyObject(publicKey), signature);
  } catch {
    return false;
  }
}
