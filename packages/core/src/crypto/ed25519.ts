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
  if (fastVerifier !== null && fastAccepts(fastVerifier, publicKey, message, signature)) return true;
  return strictVerify(publicKey, message, signature);
}

function strictVerify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  try {
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}

/**
 * A platform's Ed25519 verification (e.g. Node's `crypto.verify` on OpenSSL): RFC 8032 with the cofactorless
 * equation `encode([S]B − [k]A) = R` and `S < L`. Only ever asked about a 32-byte key and a 64-byte signature.
 */
export type Ed25519Verifier = (publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array) => boolean;

let fastVerifier: Ed25519Verifier | null = null;

/**
 * Lets a shell speed `verify` up with its platform's native Ed25519 (the relay checks every Join, result and
 * announce; the pure verifier costs milliseconds each). `verify`'s answers do not change: a `true` from the
 * fast verifier is trusted only when the key and R are canonical encodings, S < L and the key is not of small
 * order — then the cofactorless equation it checked implies the cofactored one the strict verifier checks —
 * and every other case (all invalid signatures included) is decided by the strict verifier. `null` removes it.
 */
export function setFastEd25519Verifier(v: Ed25519Verifier | null): void {
  fastVerifier = v;
}

function fastAccepts(
  v: Ed25519Verifier,
  key: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): boolean {
  if (!canonicalPoint(key) || SMALL_ORDER_KEYS.has(bytesToHex(key))) return false;
  if (!canonicalPoint(signature.subarray(0, 32)) || !scalarBelowOrder(signature.subarray(32))) return false;
  try {
    return v(key, message, signature) === true;
  } catch {
    return false;
  }
}

/** p = 2^255 − 19, little-endian. */
const P_LE = Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 0xed : i === 31 ? 0x7f : 0xff));
/** L = 2^252 + 27742317777372353535851937790883648493, little-endian. */
const L_LE = hexToBytes('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010');

/** a < b for 32-byte little-endian numbers. */
function lessThan(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 31; i >= 0; i--) if (a[i] !== b[i]) return (a[i] as number) < (b[i] as number);
  return false;
}

/**
 * A point encoding the strict decoder also takes as canonical: y < p, and no sign bit on x = 0 (the points
 * y = ±1, whose x is 0). Whether it is on the curve is left to the verifiers.
 */
function canonicalPoint(enc: Uint8Array): boolean {
  const y = enc.slice();
  const sign = (y[31] as number) >> 7;
  y[31] = (y[31] as number) & 0x7f;
  if (!lessThan(y, P_LE)) return false;
  if (sign === 0) return true;
  const one = y[0] === 1 && y.subarray(1).every((b) => b === 0);
  const minusOne = y[0] === 0xec && y.subarray(1, 31).every((b) => b === 0xff) && y[31] === 0x7f;
  return !one && !minusOne;
}

function scalarBelowOrder(s: Uint8Array): boolean {
  return lessThan(s, L_LE);
}

/** The canonical encodings of the eight points of order dividing 8 (the strict verifier refuses them as keys). */
const SMALL_ORDER_KEYS = new Set([
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0000000000000000000000000000000000000000000000000000000000000080',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
]);
