// Blooms in state are JSON: hex salt, base64 bits. Decoding is memoised per stored object, since the same
// stored bloom is read by every consensus and health query of its round.
import { bytesToHex, hexToBytes } from '../selection/hex.ts';
import { BloomFilter } from '../witness/bloom.ts';
import type { BloomFilterData } from '../witness/bloom-data.ts';
import type { StoredBloom } from './state.ts';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const LOOKUP = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < ALPHABET.length; i++) t[ALPHABET.charCodeAt(i)] = i;
  return t;
})();

export function toBase64(bytes: Uint8Array): string {
  const parts: string[] = [];
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] as number;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    const n = (a << 16) | ((b ?? 0) << 8) | (c ?? 0);
    parts.push(
      ALPHABET[(n >>> 18) & 63]! +
        ALPHABET[(n >>> 12) & 63]! +
        (b === undefined ? '=' : ALPHABET[(n >>> 6) & 63]!) +
        (c === undefined ? '=' : ALPHABET[n & 63]!),
    );
  }
  return parts.join('');
}

export function fromBase64(text: string): Uint8Array {
  if (text.length % 4 !== 0) throw new Error('base64 length must be a multiple of 4');
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const ch = text.charCodeAt(i + j);
      const v = ch === 61 && i + j >= text.length - pad ? 0 : ch < 128 ? (LOOKUP[ch] as number) : -1;
      if (v < 0) throw new Error(`invalid base64 character at ${i + j}`);
      n = (n << 6) | v;
    }
    if (o < out.length) out[o++] = (n >>> 16) & 0xff;
    if (o < out.length) out[o++] = (n >>> 8) & 0xff;
    if (o < out.length) out[o++] = n & 0xff;
  }
  return out;
}

export function storeBloom(filter: BloomFilter): StoredBloom {
  const stored: StoredBloom = {
    num_bits: filter.numBits,
    num_hashes: filter.numHashes,
    salt: bytesToHex(filter.salt),
    bits: toBase64(filter.bits),
  };
  decoded.set(stored, filter);
  return stored;
}

const decoded = new WeakMap<StoredBloom, BloomFilter>();

/** The filter for a stored bloom; throws WitnessError if the stored data is corrupt. */
export function loadBloom(stored: StoredBloom): BloomFilter {
  let filter = decoded.get(stored);
  if (!filter) {
    const data: BloomFilterData = {
      numBits: stored.num_bits,
      numHashes: stored.num_hashes,
      salt: hexToBytes(stored.salt),
      bits: fromBase64(stored.bits),
    };
    filter = BloomFilter.fromData(data);
    decoded.set(stored, filter);
  }
  return filter;
}
