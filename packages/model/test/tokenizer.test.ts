import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteTokenizer, TokenizerError, tokenizerByName } from '../src/index.ts';

describe('byte tokenizer', () => {
  const tok = new ByteTokenizer();

  it('round-trips any well-formed Unicode string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (s) => {
        const ids = tok.encode(s);
        expect(ids.every((id) => id < tok.vocabSize)).toBe(true);
        expect(tok.decode(ids)).toBe(s);
      }),
      { numRuns: 500 },
    );
  });

  it('one token per UTF-8 byte', () => {
    expect([...tok.encode('aé€😀')]).toEqual([0x61, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80]);
    expect(tok.encode('').length).toBe(0);
  });

  it('decodes invalid UTF-8 from a model with replacement characters instead of failing', () => {
    expect(tok.decode([0x61, 0xff, 0x62])).toBe('a\uFFFDb');
    expect(tok.decode([0xe2, 0x82])).toBe('\uFFFD');
  });

  it('rejects ids outside the vocabulary', () => {
    expect(() => tok.decode([256])).toThrow(TokenizerError);
    expect(() => tok.decode([-1])).toThrow(/outside 0\.\.255/);
  });

  it('is found by its manifest name', () => {
    expect(tokenizerByName('bytes').vocabSize).toBe(256);
    expect(() => tokenizerByName('gpt2')).toThrow(/unknown tokenizer/);
  });
});
