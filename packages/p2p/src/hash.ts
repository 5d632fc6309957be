import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils.js';
import { InvalidArgumentError } from './errors.ts';

/**
 * Content addresses. A blob's address is SHA-256 of its bytes, nothing else: the fetcher must be able to
 * check what it got with no other input. A client whose commitment hashes more than the payload (step,
 * batch ids, ...) announces the commitment together with the blob address and checks the commitment itself.
 */

export const ADDRESS_BYTES = 32;

/** SHA-256 of `bytes`: the address a blob is stored and fetched under. */
export function blobAddress(bytes: Uint8Array): Uint8Array {
  return sha256(bytes);
}

export function sha256Bytes(bytes: Uint8Array): Uint8Array {
  return sha256(bytes);
}

export function toHex(bytes: Uint8Array): string {
  return bytesToHex(bytes);
}

/** Parses a 64-character hex address; throws InvalidArgumentError otherwise. */
export function addressFromHex(hex: string): Uint8Array {
  if (!/^[0-9a-fA-F]{64}$/.test(hex))
    throw new InvalidArgumentError(`address must be 64 hex characters, got "${hex}"`);
  return hexToBytes(hex);
}

/** Checks an address argument before it goes on the wire. */
export function assertAddress(address: Uint8Array, what = 'address'): void {
  if (!(address instanceof Uint8Array) || address.length !== ADDRESS_BYTES) {
    throw new InvalidArgumentError(
      `${what} must be ${ADDRESS_BYTES} bytes (SHA-256), got ${address?.length ?? 'none'}`,
    );
  }
}

/** Constant-shape comparison of two digests (timing does not matter here; equality does). */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
