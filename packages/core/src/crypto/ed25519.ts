// Ed25519 identities and signatures (RFC 8032, via @noble/curves). Key material is supplied by the caller
// (32 random bytes from the platform CSPRNG): this module never draws randomness itself.
import { ed25519 } from '@noble/curves/ed25519.js';
import { assertLength, bytesToHex, hexToBytes } from './bytes.ts';

export const PUBLIC_KEY_BYTES = 32;
export const SECRET_KEY_BYTES = 32;
export const SIGNATURE_BYTES = 64;

/** A participant's signing identity. `secretKey` is the RFC 8032 32-byte seed. */
export interface Identity {
  readonly secretKey: Uint8Array;
  readonly publicKey: Uint8Array;
}

/** Derive the identity for a 32-byte seed (the caller draws the seed from a CSPRNG and stores it). */
export function identityFromSeed(seed: Uint8Array): Identity {
  assertLength(seed, SECRET_KEY_BYTES, 'identity seed');
  const secretKey = Uint8Array.from(seed);
  return { secretKey, publicKey: ed25519.getPublicKey(secretKey) };
}

/** Public key of a secret key. */
export function publicKeyOf(secretKey: Uint8Array): Uint8Array {
  assertLength(secretKey, SECRET_KEY_BYTES, 'secret key');
  return ed25519.getPublicKey(secretKey);
}

/** Lower-case hex of a 32-byte public key. */
export function publicKeyToHex(publicKey: Uint8Array): string {
  assertLength(publicKey, PUBLIC_KEY_BYTES, 'public key');
  return bytesToHex(publicKey);
}

/** Parse a 64-character hex public key. */
export function publicKeyFromHex(hex: string): Uint8Array {
  return hexToBytes(hex, PUBLIC_KEY_BYTES);
}

/** Ed25519 signature (64 bytes) of `message`. Deterministic, as RFC 8032 specifies. */
export function sign(secretKey: Uint8Array, message: Uint8Array): Uint8Array {
  assertLength(secretKey, SECRET_KEY_BYTES, 'secret key');
  return ed25519.sign(message, secretKey);
}

/**
 * True iff `signature` is a valid signature of `message` by `publicKey`. Never throws: inputs of the
 * wrong size or keys that are not curve points just answer false, because they arrive from the network.
 * Strict RFC 8032 verification (zip215: false): non-canonical point encodings are rejected, so a valid
 * signature cannot be re-encoded into a second valid byte string (no malleability to confuse dedup).
 */
export function verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== PUBLIC_KEY_BYTES) return false;
  if (!(signature instanceof Uint8Array) || signature.length !== SIGNATURE_BYTES) return false;
  try {
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}
