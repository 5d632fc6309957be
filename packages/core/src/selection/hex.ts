// u64 seeds as hex and as little-endian bytes (docs/protocol.md "Committee and witness selection").
import { SelectionError } from './errors.ts';

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
