// A run's sample order: which sample of the training split the run's sample id reads. The coordinator hands out
// ids 0, 1, 2, …; in corpus order id i reads sample i mod n, so a run walks the corpus document after document.
// A seeded order (the run's `shuffle = { Seeded = [32 bytes] }`) reads sample π_p(i mod n) instead, where
// p = ⌊i / n⌋ is the pass over the split and π_p is a permutation of [0, n) keyed by the seed and p: every pass
// visits every sample once, and a sample's neighbours differ from pass to pass.
//
// π_p is a keyed Feistel network on [0, 2^k), 2^k the smallest power of two ≥ n, walked back into [0, n) (an
// index that lands at or past n is permuted again until it lands inside; since 2^k < 2n that takes under two
// passes through the network on average). It needs no table, so a relay with millions of samples maps an id in
// constant memory and time, and every peer, relay and benchmark computes the same order from the config alone.
// Round keys come from SHA-256(tag ‖ seed ‖ n ‖ p ‖ block); the round function is a 32-bit integer mixer, which
// is plenty for an order (nothing here needs to be unpredictable to someone who knows the seed: it is in the
// run's config). Rounds add modulo the half's size rather than XOR, and there are 12 of them: with XOR or with
// 8 rounds, the 3-bit networks of 5- to 8-sample splits put samples at positions measurably unevenly.
import { sha256 } from '@meshtrain/core';
import type { DataLocation } from '@meshtrain/core';

export type SampleOrderKind = 'corpus' | 'seeded';

/** Splits of up to 2^52 samples: both halves of the Feistel network fit in 26 bits, ids stay exact doubles. */
export const MAX_ORDERED_SAMPLES = 2 ** 52;
/** Bytes of a seed (`Seeded = [32 bytes]`). */
export const SAMPLE_ORDER_SEED_BYTES = 32;

const ROUNDS = 12;
const KEY_TAG = new TextEncoder().encode('meshtrain/sample-order/v1');

export interface SampleOrder {
  readonly kind: SampleOrderKind;
  /** Samples in the split. */
  readonly size: number;
  /** The split sample that run sample `id` reads; `id` is any non-negative safe integer. */
  at(id: number): number;
}

function checkSize(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > MAX_ORDERED_SAMPLES)
    throw new RangeError(`a sample order needs 1..2^52 samples, got ${n}`);
}

function checkId(id: number): void {
  if (!Number.isSafeInteger(id) || id < 0)
    throw new RangeError(`run sample ids are non-negative safe integers, got ${id}`);
}

/** Murmur3's 32-bit finalizer: every input bit flips each output bit with probability about 1/2. */
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** One pass's permutation π_p of [0, n). */
export class PassPermutation {
  readonly size: number;
  readonly pass: number;
  private readonly keys: Uint32Array;
  /** A k-bit index is hi · lowSpan + lo: hi has ⌈k/2⌉ bits, lo ⌊k/2⌋ (masks of those widths). */
  private readonly lowSpan: number;
  private readonly highMask: number;
  private readonly lowMask: number;

  constructor(seed: Uint8Array, n: number, pass: number) {
    checkSize(n);
    checkId(pass);
    if (seed.length !== SAMPLE_ORDER_SEED_BYTES)
      throw new RangeError(`a sample order seed has ${SAMPLE_ORDER_SEED_BYTES} bytes, got ${seed.length}`);
    this.size = n;
    this.pass = pass;
    let k = 0;
    while (2 ** k < n) k++;
    const lowBits = Math.floor(k / 2);
    this.lowSpan = 2 ** lowBits;
    this.lowMask = this.lowSpan - 1;
    this.highMask = 2 ** (k - lowBits) - 1;
    const msg = new Uint8Array(KEY_TAG.length + SAMPLE_ORDER_SEED_BYTES + 17);
    msg.set(KEY_TAG, 0);
    msg.set(seed, KEY_TAG.length);
    const dv = new DataView(msg.buffer, KEY_TAG.length + SAMPLE_ORDER_SEED_BYTES);
    // n and p as little-endian u64 (both below 2^53).
    dv.setUint32(0, n % 2 ** 32, true);
    dv.setUint32(4, Math.floor(n / 2 ** 32), true);
    dv.setUint32(8, pass % 2 ** 32, true);
    dv.setUint32(12, Math.floor(pass / 2 ** 32), true);
    // Two blocks of 8 words (the last byte numbers the block); the first ROUNDS words are the round keys.
    const blocks = [0, 1].map((b) => {
      msg[msg.length - 1] = b;
      const d = sha256(msg);
      return new DataView(d.buffer, d.byteOffset, d.byteLength);
    });
    this.keys = Uint32Array.from({ length: ROUNDS }, (_, r) =>
      (blocks[r >> 3] as DataView).getUint32(4 * (r & 7), true),
    );
  }

  /** π_p(j) for j in [0, n). */
  at(j: number): number {
    if (!Number.isInteger(j) || j < 0 || j >= this.size)
      throw new RangeError(`sample ${j} is not in 0..${this.size - 1}`);
    let x = this.encrypt(j);
    // Cycle walking: the cycle through j returns to [0, n) before it returns to j, so this ends.
    while (x >= this.size) x = this.encrypt(x);
    return x;
  }

  /** The Feistel network on [0, 2^k): each round adds a keyed mix of one half to the other, modulo its size. */
  private encrypt(x: number): number {
    const { lowSpan, highMask, lowMask, keys } = this;
    let hi = Math.floor(x / lowSpan);
    let lo = x - hi * lowSpan;
    for (let r = 0; r < ROUNDS; r++) {
      const key = keys[r] as number;
      // The sum is below 2^33, exact in a double; & reduces it to the half's width (at most 26 bits, so ≥ 0).
      if (r % 2 === 0) hi = (hi + mix32(lo ^ key)) & highMask;
      else lo = (lo + mix32(hi ^ key)) & lowMask;
    }
    return hi * lowSpan + lo;
  }
}

/** Run sample id i reads sample i mod n: the corpus in order, pass after pass. */
export function corpusOrder(n: number): SampleOrder {
  checkSize(n);
  return {
    kind: 'corpus',
    size: n,
    at(id) {
      checkId(id);
      return id % n;
    },
  };
}

/** Run sample id i reads π_p(i mod n) with p = ⌊i / n⌋ (see the top of this file). */
export function seededOrder(n: number, seed: Uint8Array): SampleOrder {
  checkSize(n);
  // A request reads consecutive ids, nearly always within one pass: keep the last pass's round keys.
  let last = new PassPermutation(seed, n, 0);
  return {
    kind: 'seeded',
    size: n,
    at(id) {
      checkId(id);
      const pass = Math.floor(id / n);
      if (pass !== last.pass) last = new PassPermutation(seed, n, pass);
      return last.at(id - pass * n);
    },
  };
}

/** The seed of a data location's `shuffle = { Seeded = [...] }`, or null for DontShuffle / no shuffle key. */
export function shuffleSeedOf(location: DataLocation): Uint8Array | null {
  if (typeof location !== 'object') return null;
  const shuffle =
    'Relay' in location ? location.Relay.shuffle : 'Http' in location ? location.Http.shuffle : undefined;
  if (shuffle === undefined || shuffle === 'DontShuffle') return null;
  return Uint8Array.from(shuffle.Seeded);
}

/** The order a run with this data location reads a training split of `n` samples in. */
export function sampleOrderFor(location: DataLocation, n: number): SampleOrder {
  const seed = shuffleSeedOf(location);
  return seed === null ? corpusOrder(n) : seededOrder(n, seed);
}
