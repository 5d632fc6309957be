// Swap-or-not shuffle exactly as Psyche computes committee and witness positions
// (docs/protocol.md "Committee and witness selection").
//
// Each of the 90 rounds is an involution (an index and its `flip` partner swap or both stay, decided by one
// bit at max(idx, flip)), so the inverse permutation is the same rounds run backwards: that gives us
// `indexAt(position)` (who holds witness slot p?) without computing every client's position.
//
// Hash caching: per round one pivot hash, and one source hash per 256-position block, computed lazily and
// kept for the life of the object. All positions of n clients cost at most 90 * (1 + ceil(n / 256)) SHA-256.
import { sha256 } from '@noble/hashes/sha2.js';
import { SelectionError } from './errors.ts';
import { leBytesToBigInt } from './hex.ts';

export const SWAP_OR_NOT_ROUNDS = 90;

export class SwapOrNot {
  readonly n: number;
  readonly seed: Uint8Array;
  private readonly pivots: number[];
  private readonly sources = new Map<number, Uint8Array>();
  private readonly blocks: number;
  private allPositions: Uint32Array | undefined;

  /** `seed` is the 32-byte salt seed (SHA256(seed32 ‖ purpose)); `n` the number of clients in the round. */
  constructor(n: number, seed: Uint8Array) {
    if (!Number.isSafeInteger(n) || n < 0 || n > 0xffffffff)
      throw new SelectionError('BadArgument', `shuffle size must be a u32, got ${n}`);
    this.n = n;
    this.seed = seed;
    this.blocks = Math.ceil(n / 256);
    this.pivots = [];
    if (n === 0) return;
    const bn = BigInt(n);
    const msg = new Uint8Array(seed.length + 1);
    msg.set(seed);
    for (let r = 0; r < SWAP_OR_NOT_ROUNDS; r++) {
      msg[seed.length] = r;
      this.pivots.push(Number(leBytesToBigInt(sha256(msg), 0, 8) % bn));
    }
  }

  private sourceBlock(round: number, block: number): Uint8Array {
    const key = round * this.blocks + block;
    let src = this.sources.get(key);
    if (src === undefined) {
      // seed ‖ [round] ‖ u32 LE(pos / 256): Psyche hashes the first 4 bytes of the u64 LE block number.
      const msg = new Uint8Array(this.seed.length + 5);
      msg.set(this.seed);
      const o = this.seed.length;
      msg[o] = round;
      msg[o + 1] = block & 0xff;
      msg[o + 2] = (block >>> 8) & 0xff;
      msg[o + 3] = (block >>> 16) & 0xff;
      msg[o + 4] = (block >>> 24) & 0xff;
      src = sha256(msg);
      this.sources.set(key, src);
    }
    return src;
  }

  private step(round: number, idx: number): number {
    const n = this.n;
    const pivot = this.pivots[round] as number;
    const flip = (pivot + n - idx) % n;
    const pos = idx > flip ? idx : flip;
    const src = this.sourceBlock(round, Math.floor(pos / 256));
    const byte = src[(pos % 256) >>> 3] as number;
    return (byte >>> (pos & 7)) & 1 ? flip : idx;
  }

  private checkIndex(i: number): void {
    if (!Number.isInteger(i) || i < 0 || i >= this.n)
      throw new SelectionError('BadArgument', `index ${i} outside 0..${this.n - 1}`);
  }

  /** The shuffled position of client `index`. */
  position(index: number): number {
    this.checkIndex(index);
    if (this.allPositions) return this.allPositions[index] as number;
    let idx = index;
    for (let r = 0; r < SWAP_OR_NOT_ROUNDS; r++) idx = this.step(r, idx);
    return idx;
  }

  /** The client index whose position is `position` (inverse permutation: the rounds in reverse). */
  indexAt(position: number): number {
    this.checkIndex(position);
    let idx = position;
    for (let r = SWAP_OR_NOT_ROUNDS - 1; r >= 0; r--) idx = this.step(r, idx);
    return idx;
  }

  /** Positions of every index, computed once and memoised. */
  positions(): Uint32Array {
    if (!this.allPositions) {
      const out = new Uint32Array(this.n);
      for (let i = 0; i < this.n; i++) out[i] = this.position(i);
      this.allPositions = out;
    }
    return this.allPositions;
  }
}
