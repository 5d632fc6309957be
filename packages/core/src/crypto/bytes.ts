// Byte helpers that work the same in browsers and Node (no Buffer).
import { CryptoError } from './errors.ts';

export { concatBytes } from '@noble/hashes/utils.js';

const HEX_DIGITS = '0123456789abcdef';

/** Lower-case hex of `bytes`. */
export function bytesToHex(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    out += HEX_DIGITS[b >> 4]! + HEX_DIGITS[b & 15]!;
  }
  return out;
}

function nibble(code: number): number {
  if (code >= 48 && code <= 57) return code - 48; // 0-9
  if (code >= 97 && code <= 102) return code - 87; // a-f
  if (code >= 65 && code <= 70) return code - 55; // A-F
  return -1;
}

/**
 * Parse hex (either case). `expectedBytes`, when given, is enforced so that a key of the wrong size is
 * rejected here rather than deep inside a signature check.
 */
export function hexToBytes(hex: string, expectedBytes?: number): Uint8Array {
  if (hex.length % 2 !== 0) throw new CryptoError('bad_hex', `hex string has odd length ${hex.length}`);
  const n = hex.length / 2;
  if (expectedBytes !== undefined && n !== expectedBytes) {
    throw new CryptoError('bad_length', `expected ${expectedBytes} bytes of hex, got ${n}`);
  }
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const hi = nibble(hex.charCodeAt(2 * i));
    const lo = nibble(hex.charCodeAt(2 * i + 1));
    if (hi < 0 || lo < 0) throw new CryptoError('bad_hex', `invalid hex digit near offset ${2 * i}`);
    out[i] = (hi << 4) | lo;
  }
  return out;
}

/**
 * Compare without an early exit, so the time taken does not reveal how many leading bytes of a secret
 * value (a commitment, a MAC, a challenge) an attacker guessed right. Lengths are public and compared first.
 */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** Plain equality for public data (no timing concerns). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const encoder = new TextEncoder();

/** UTF-8 bytes of a string. */
export function utf8Bytes(s: string): Uint8Array {
  return encoder.encode(s);
}

/** Throw unless `bytes` has exactly `n` bytes; `what` names the value in the message. */
export function assertLength(bytes: Uint8Array, n: number, what: string): void {
  if (!(bytes instanceof Uint8Array)) throw new CryptoError('bad_length', `${what}: expected Uint8Array`);
  if (bytes.length !== n)
    throw new CryptoError('bad_length', `${what}: expected ${n} bytes, got ${bytes.length}`);
}

const HEX32 = /^[0-9a-f]{64}$/;

/** 32 bytes as 64 lower-case hex digits: how keys, client ids, commitments and seeds are written. */
export function isHex32(v: unknown): v is string {
  return typeof v === 'string' && HEX32.test(v);
}
