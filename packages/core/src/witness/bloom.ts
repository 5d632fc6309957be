// Witness bloom filters, sized for the number of items actually inserted at a target false-positive rate.
// Psyche fixes 1024 bits / 8 hashes, which reaches 31 % FPR at 256 items
// (docs/protocol.md "Differences from Psyche and why").
//
// Hash scheme (deterministic, no BigInt, a few dozen integer ops per item):
//   1. h = FNV-1a-64 over (salt ‖ item), in two u32 halves. The salt is absorbed once per filter, so it acts
//      as a per-filter seed: different witnesses' false positives are independent.
//   2. a = fmix32(lo(h)), b = fmix32(hi(h) ^ 0x9e3779b9) — murmur3's finaliser, because FNV's low bits
//      depend only on the low bits of the input, and positions are taken mod a multiple of 8.
//   3. The k positions come from enhanced double hashing (Dillinger & Manolios): x = a mod m, y = b mod m,
//      then for i = 0..k-1: emit x; x = (x + y) mod m; y = (y + i + 1) mod m.
// Bits are numbered LSB first within each byte (bit i = byte i >> 3, bit i & 7), as BloomFilterData says.
import type { BloomFilterData } from './bloom-data.ts';
import { WitnessError } from './errors.ts';

export const BLOOM_MIN_BITS = 64;
export const BLOOM_MAX_HASHES = 32;
/** Salts longer than this add nothing and would let a peer make us hash large inputs. */
export const BLOOM_MAX_SALT_BYTES = 64;

export interface BloomSize {
  numBits: number;
  numHashes: number;
}

/** m = ceil(-n ln p / ln²2) rounded up to a multiple of 8 (at least 64); k = round(m/n · ln 2) within 1..32. */
export function bloomSize(items: number, falsePositiveRate: number): BloomSize {
  if (!Number.isInteger(items) || items < 0)
    throw new WitnessError('BadArgument', `bloom item count must be a non-negative integer, got ${items}`);
  if (!(falsePositiveRate > 0 && falsePositiveRate < 1))
    throw new WitnessError(
      'BadArgument',
      `bloom false-positive rate must be in (0, 1), got ${falsePositiveRate}`,
    );
  const n = Math.max(items, 1);
  const raw = Math.ceil((-n * Math.log(falsePositiveRate)) / (Math.LN2 * Math.LN2));
  const numBits = Math.max(BLOOM_MIN_BITS, Math.ceil(raw / 8) * 8);
  const numHashes = Math.min(BLOOM_MAX_HASHES, Math.max(1, Math.round((numBits / n) * Math.LN2)));
  return { numBits, numHashes };
}

const FNV_OFFSET_HI = 0xcbf29ce4;
const FNV_OFFSET_LO = 0x84222325;
// FNV-64 prime = 2^40 + 0x1b3: multiplying splits into lo*0x1b3 (with carry) and lo << 40.
const FNV_PRIME_LO = 0x1b3;

function fmix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

export class BloomFilter {
  readonly numBits: number;
  readonly numHashes: number;
  readonly salt: Uint8Array;
  readonly bits: Uint8Array;
  private readonly seedHi: number;
  private readonly seedLo: number;
  private readonly scratch: number[];

  private constructor(numBits: number, numHashes: number, salt: Uint8Array, bits: Uint8Array) {
    this.numBits = numBits;
    this.numHashes = numHashes;
    this.salt = salt;
    this.bits = bits;
    this.scratch = new Array<number>(numHashes).fill(0);
    let hi = FNV_OFFSET_HI;
    let lo = FNV_OFFSET_LO;
    for (const byte of salt) [hi, lo] = fnvByte(hi, lo, byte);
    this.seedHi = hi;
    this.seedLo = lo;
  }

  /** An empty filter for `expectedItems` items at the run's target false-positive rate. */
  static forItems(expectedItems: number, falsePositiveRate: number, salt: Uint8Array): BloomFilter {
    const { numBits, numHashes } = bloomSize(expectedItems, falsePositiveRate);
    checkSalt(salt);
    return new BloomFilter(numBits, numHashes, salt.slice(), new Uint8Array(numBits / 8));
  }

  /** A filter holding exactly `items`, sized for them: what a witness builds from what it received. */
  static of(items: readonly Uint8Array[], falsePositiveRate: number, salt: Uint8Array): BloomFilter {
    const filter = BloomFilter.forItems(items.length, falsePositiveRate, salt);
    for (const item of items) filter.add(item);
    return filter;
  }

  /** Validates untrusted data (from the wire or state); `maxBits` bounds the memory a peer can make us use. */
  static fromData(data: BloomFilterData, maxBits = Number.MAX_SAFE_INTEGER): BloomFilter {
    const { numBits, numHashes, salt, bits } = data;
    if (!Number.isInteger(numBits) || numBits < BLOOM_MIN_BITS || numBits % 8 !== 0) {
      throw new WitnessError(
        'BadBloom',
        `bloom numBits must be a multiple of 8 and >= ${BLOOM_MIN_BITS}, got ${numBits}`,
      );
    }
    if (numBits > maxBits)
      throw new WitnessError(
        'BadBloom',
        `bloom numBits ${numBits} exceeds the limit ${maxBits} for this round`,
      );
    if (!Number.isInteger(numHashes) || numHashes < 1 || numHashes > BLOOM_MAX_HASHES) {
      throw new WitnessError(
        'BadBloom',
        `bloom numHashes must be within 1..${BLOOM_MAX_HASHES}, got ${numHashes}`,
      );
    }
    if (!(bits instanceof Uint8Array) || bits.length !== numBits / 8) {
      throw new WitnessError(
        'BadBloom',
        `bloom bits must be ${numBits / 8} bytes, got ${bits instanceof Uint8Array ? bits.length : typeof bits}`,
      );
    }
    checkSalt(salt);
    return new BloomFilter(numBits, numHashes, salt.slice(), bits.slice());
  }

  toData(): BloomFilterData {
    return {
      numBits: this.numBits,
      numHashes: this.numHashes,
      salt: this.salt.slice(),
      bits: this.bits.slice(),
    };
  }

  private positions(item: Uint8Array): number[] {
    let hi = this.seedHi;
    let lo = this.seedLo;
    // fnvByte inlined: this loop is the hot path when witnesses fill filters for thousands of results.
    for (let i = 0; i < item.length; i++) {
      lo = (lo ^ (item[i] as number)) >>> 0;
      const t = lo * FNV_PRIME_LO;
      // t < 2^41, so the carry t / 2^32 is below 512 and `| 0` truncates it exactly.
      hi = (Math.imul(hi, FNV_PRIME_LO) + (lo << 8) + ((t / 0x100000000) | 0)) >>> 0;
      lo = t >>> 0;
    }
    const m = this.numBits;
    let x = fmix32(lo) % m;
    let y = fmix32((hi ^ 0x9e3779b9) >>> 0) % m;
    const out = this.scratch;
    for (let i = 0; i < this.numHashes; i++) {
      out[i] = x;
      x = (x + y) % m;
      y = (y + i + 1) % m;
    }
    return out;
  }

  add(item: Uint8Array): void {
    for (const p of this.positions(item))
      this.bits[p >>> 3] = (this.bits[p >>> 3] as number) | (1 << (p & 7));
  }

  has(item: Uint8Array): boolean {
    for (const p of this.positions(item))
      if ((((this.bits[p >>> 3] as number) >>> (p & 7)) & 1) === 0) return false;
    return true;
  }

  /** Fraction of bits set; a witness that "saw everything" shows up as a filter near 1. */
  fillRatio(): number {
    let set = 0;
    for (const byte of this.bits) set += POPCOUNT[byte] as number;
    return set / this.numBits;
  }

  /** The false-positive rate this filter actually has for random queries: fill^k. */
  estimatedFalsePositiveRate(): number {
    return Math.pow(this.fillRatio(), this.numHashes);
  }
}

const POPCOUNT = (() => {
  const t = new Uint8Array(256);
  for (let i = 1; i < 256; i++) t[i] = (t[i >> 1] as number) + (i & 1);
  return t;
})();

function checkSalt(salt: unknown): asserts salt is Uint8Array {
  if (!(salt instanceof Uint8Array) || salt.length > BLOOM_MAX_SALT_BYTES) {
    throw new WitnessError(
      'BadBloom',
      `bloom salt must be a byte array of at most ${BLOOM_MAX_SALT_BYTES} bytes`,
    );
  }
}

// One FNV-1a-64 step on (hi, lo) u32 halves: h ^= byte; h *= 2^40 + 0x1b3 (mod 2^64).
function fnvByte(hi: number, lo: number, byte: number): [number, number] {
  lo = (lo ^ byte) >>> 0;
  const t = lo * FNV_PRIME_LO; // < 2^41, exact in a double
  const newLo = t >>> 0;
  const carry = Math.floor(t / 0x100000000);
  const newHi = (Math.imul(hi, FNV_PRIME_LO) + (lo << 8) + carry) >>> 0;
  return [newHi, newLo];
}
