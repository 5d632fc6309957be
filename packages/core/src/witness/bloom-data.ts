// The serialisable form of a witness bloom filter: what goes on the wire and into coordinator state. The
// filter itself (sizing, hashing, membership) lives beside this file; the wire codec only moves these bytes.
export interface BloomFilterData {
  /** Number of bits in the filter; sized from the expected item count and the run's target false-positive rate. */
  numBits: number;
  /** Number of hash functions. */
  numHashes: number;
  /** Per-filter salt so that different witnesses' false positives are independent (Psyche: 8 random u64 keys). */
  salt: Uint8Array;
  /** ceil(numBits / 8) bytes, bit i = byte i>>3, bit (i & 7) (LSB first). */
  bits: Uint8Array;
}
