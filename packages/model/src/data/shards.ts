// Token shards: headerless little-endian streams of u16 or u32 token ids, one file per shard, documents
// already concatenated (the format of Psyche's local/HTTP data provider and nanoGPT's train.bin).
//
// Sample layout. A training row needs T+1 tokens: inputs tokens[0..T) and next-token targets
// tokens[1..T+1). We slice each shard at a fixed stride S = seqLen with rows of S+1 tokens, so
// consecutive rows overlap by exactly one token:
//
//   sample j of a shard = tokens [j·S, j·S + S + 1)      (byte offset j·S·tokenBytes)
//
// Every token after the first of a shard is then a target exactly once, nothing is wasted, and the
// offsets are Psyche's (`0, S, 2S, …` with S = max_seq_len·token_bytes) when max_seq_len = seqLen. Psyche
// reads max_seq_len tokens per sample and shifts inside the model, so its row = our row minus the last
// token. Samples never cross a shard boundary; a shard's tail shorter than S+1 tokens is unused.
import { Rng } from '../init.ts';

export type TokenBytes = 2 | 4;

/** Malformed shard data or an index out of range. */
export class ShardError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ShardError';
  }
}

export interface SampleLocation {
  shard: number;
  byteOffset: number;
  byteLength: number;
}

/** Maps a global sample index to (shard, byte range) for shards given by their byte lengths, in order. */
export class ShardIndex {
  readonly seqLen: number;
  readonly tokenBytes: TokenBytes;
  readonly samplesPerShard: readonly number[];
  readonly sampleCount: number;
  /** starts[k] = global index of shard k's first sample; starts[shards] = sampleCount. */
  private readonly starts: number[];

  constructor(shardByteLengths: readonly number[], options: { seqLen: number; tokenBytes: TokenBytes }) {
    const { seqLen, tokenBytes } = options;
    if (!Number.isInteger(seqLen) || seqLen < 1)
      throw new ShardError(`seqLen must be a positive integer (${seqLen})`);
    if (tokenBytes !== 2 && tokenBytes !== 4)
      throw new ShardError(`tokenBytes must be 2 or 4 (${String(tokenBytes)})`);
    this.seqLen = seqLen;
    this.tokenBytes = tokenBytes;
    const perShard: number[] = [];
    this.starts = [0];
    shardByteLengths.forEach((bytes, k) => {
      if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes % tokenBytes !== 0)
        throw new ShardError(`shard ${k}: ${bytes} bytes is not a whole number of ${tokenBytes}-byte tokens`);
      const tokens = bytes / tokenBytes;
      const n = tokens > seqLen ? Math.floor((tokens - 1) / seqLen) : 0;
      perShard.push(n);
      this.starts.push((this.starts[k] as number) + n);
    });
    this.samplesPerShard = perShard;
    this.sampleCount = this.starts[this.starts.length - 1] as number;
  }

  /** Where sample `i` lives: (S+1)·tokenBytes bytes starting at i's stride offset within its shard. */
  locate(i: number): SampleLocation {
    if (!Number.isInteger(i) || i < 0 || i >= this.sampleCount)
      throw new ShardError(`sample ${i} out of range [0, ${this.sampleCount})`);
    // Binary search for the last shard whose first sample is ≤ i (empty shards share a start and are skipped).
    let lo = 0;
    let hi = this.samplesPerShard.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((this.starts[mid] as number) <= i) lo = mid;
      else hi = mid - 1;
    }
    const j = i - (this.starts[lo] as number);
    return {
      shard: lo,
      byteOffset: j * this.seqLen * this.tokenBytes,
      byteLength: (this.seqLen + 1) * this.tokenBytes,
    };
  }
}

/** Decodes little-endian u16/u32 token ids to int32 (the graph's token type), checking the vocabulary. */
export function decodeTokens(bytes: Uint8Array, tokenBytes: TokenBytes, vocabSize?: number): Int32Array {
  if (bytes.length % tokenBytes !== 0)
    throw new ShardError(`${bytes.length} bytes is not a whole number of ${tokenBytes}-byte tokens`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Int32Array(bytes.length / tokenBytes);
  const limit = vocabSize ?? 2 ** 31;
  for (let i = 0; i < out.length; i++) {
    const id = tokenBytes === 2 ? view.getUint16(i * 2, true) : view.getUint32(i * 4, true);
    if (id >= limit)
      throw new ShardError(`token ${id} at position ${i} is outside the vocabulary (size ${limit})`);
    out[i] = id;
  }
  return out;
}

/** Encodes token ids as a little-endian u16/u32 stream. */
export function encodeTokens(ids: ArrayLike<number>, tokenBytes: TokenBytes): Uint8Array {
  const out = new Uint8Array(ids.length * tokenBytes);
  const view = new DataView(out.buffer);
  const max = tokenBytes === 2 ? 0xffff : 0xffffffff;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as number;
    if (!Number.isInteger(id) || id < 0 || id > max)
      throw new ShardError(`token ${id} at position ${i} does not fit in ${tokenBytes} bytes`);
    if (tokenBytes === 2) view.setUint16(i * 2, id, true);
    else view.setUint32(i * 4, id, true);
  }
  return out;
}

/**
 * Reads a batch of samples as one row-major Int32Array [indices.length, seqLen + 1]. `read(shard, offset,
 * length)` returns the bytes of one shard range (from memory, a file, or an HTTP range request).
 */
export function readBatch(
  index: ShardIndex,
  indices: ArrayLike<number>,
  read: (shard: number, byteOffset: number, byteLength: number) => Uint8Array,
  vocabSize?: number,
): Int32Array {
  const row = index.seqLen + 1;
  const out = new Int32Array(indices.length * row);
  for (let b = 0; b < indices.length; b++) {
    const loc = index.locate(indices[b] as number);
    const bytes = read(loc.shard, loc.byteOffset, loc.byteLength);
    if (bytes.length !== loc.byteLength)
      throw new ShardError(
        `shard ${loc.shard}: read ${bytes.length} bytes at ${loc.byteOffset}, expected ${loc.byteLength}`,
      );
    out.set(decodeTokens(bytes, index.tokenBytes, vocabSize), b * row);
  }
  return out;
}

/** A seeded permutation of 0..n-1 (Fisher–Yates over our xoshiro stream); same seed → same order. */
export function shuffledOrder(n: number, seed: number | bigint): Uint32Array {
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  const rng = new Rng(seed, 'data:order');
  for (let i = n - 1; i > 0; i--) {
    const j = rng.nextBelow(i + 1);
    const t = order[i] as number;
    order[i] = order[j] as number;
    order[j] = t;
  }
  return order;
}
