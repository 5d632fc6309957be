// Tokenizers turn text into token ids and back. The default is byte-level: no vocabulary file to ship,
// every UTF-8 string is representable, and it is what the `tiny` preset (vocab 256) was measured with.

export interface Tokenizer {
  /** Name written into data manifests so shards are never read with the wrong tokenizer. */
  readonly name: string;
  readonly vocabSize: number;
  encode(text: string): Uint32Array;
  decode(ids: ArrayLike<number>): string;
}

/** Token id out of the tokenizer's range. */
export class TokenizerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenizerError';
  }
}

/**
 * Token = one UTF-8 byte (ids 0–255). encode/decode round-trips every JS string that is valid UTF-16
 * (lone surrogates become U+FFFD, as TextEncoder does); decoding an arbitrary id sequence that is not
 * valid UTF-8 replaces the bad bytes with U+FFFD instead of throwing, because models do emit those.
 */
export class ByteTokenizer implements Tokenizer {
  readonly name = 'bytes';
  readonly vocabSize = 256;
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder('utf-8');

  encode(text: string): Uint32Array {
    return Uint32Array.from(this.encoder.encode(text));
  }

  /** The raw UTF-8 bytes, without widening to u32 (prepare-data writes these straight into shards). */
  encodeBytes(text: string): Uint8Array {
    return this.encoder.encode(text);
  }

  decode(ids: ArrayLike<number>): string {
    const bytes = new Uint8Array(ids.length);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] as number;
      if (!Number.isInteger(id) || id < 0 || id > 255)
        throw new TokenizerError(`byte tokenizer: id ${id} at position ${i} is outside 0..255`);
      bytes[i] = id;
    }
    return this.decoder.decode(bytes);
  }
}

/** Looks a tokenizer up by the name stored in a data manifest. */
export function tokenizerByName(name: string): Tokenizer {
  if (name === 'bytes') return new ByteTokenizer();
  throw new TokenizerError(`unknown tokenizer '${name}' (known: bytes)`);
}
