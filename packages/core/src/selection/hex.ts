// Hex <-> bytes for seeds and ids. Kept local so selection does not depend on the crypto module's evolving API.
import { SelectionError } from './errors.ts';

const HEX = /^(?:[0-9a-f]{2})*$/;

export function hexToBytes(hex: string): Uint8Array {
  const lower = hex.toLowerCase();
  if (!HEX.test(lower))
    throw new SelectionError('BadHex', `not an even-length hex string: ${hex.slice(0, 80)}`);
  const out = new Uint8Array(lower.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(lower.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function bytesToHex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

/** A u64 seed travels as 16 hex digits (most significant first) so state stays JSON-safe without BigInt. */
export function seedToBigInt(seedHex: string): bigint {
  if (!/^[0-9a-f]{16}$/.test(seedHex))
    throw new SelectionError('BadSeed', `u64 seed must be 16 lowercase hex digits, got "${seedHex}"`);
  return BigInt('0x' + seedHex);
}

export function bigIntToSeed(value: bigint): string {
  return BigInt.asUintN(64, value).toString(16).padStart(16, '0');
}

/**
 * Little-endian u64 bytes of a seed, as Psyche hashes `random_seed`
 * (docs/protocol.md "Committee and witness selection").
 */
export function seedToLeBytes(seedHex: string): Uint8Array {
  let v = seedToBigInt(seedHex);
  const out = new Uint8Array(8);
  for (let i = 0; i < 8; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

export function leBytesToBigInt(bytes: Uint8Array, offset: number, length: number): bigint {
  let v = 0n;
  for (let i = length - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[offset + i] ?? 0);
  return v;
}
