// Crypto helpers: hex, constant-time compare, SHA-256 vectors, domain tags, Ed25519 (RFC 8032 vectors).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  bytesEqual,
  bytesToHex,
  concatBytes,
  domainTag,
  hexToBytes,
  identityFromSeed,
  publicKeyOf,
  sha256,
  sha256Concat,
  sha256Hex,
  sign,
  taggedHash,
  utf8Bytes,
  verify,
} from '../src/index.ts';
import { constantTimeEqual } from '../src/crypto/bytes.ts';
import { publicKeyFromHex, publicKeyToHex } from '../src/crypto/ed25519.ts';
import { CryptoError } from '../src/crypto/errors.ts';

function cryptoCode(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof CryptoError) return e.code;
    throw e;
  }
  return 'no-error';
}

describe('hex and bytes', () => {
  it('round-trips and accepts either case', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        const hex = bytesToHex(b);
        expect(hex).toMatch(/^[0-9a-f]*$/);
        expect(hexToBytes(hex)).toEqual(b);
        expect(hexToBytes(hex.toUpperCase())).toEqual(b);
      }),
    );
  });
  it('rejects bad hex with typed errors', () => {
    expect(cryptoCode(() => hexToBytes('abc'))).toBe('bad_hex');
    expect(cryptoCode(() => hexToBytes('zz'))).toBe('bad_hex');
    expect(cryptoCode(() => hexToBytes('0g'))).toBe('bad_hex');
    expect(cryptoCode(() => hexToBytes('abcd', 3))).toBe('bad_length');
  });
  it('constantTimeEqual agrees with plain equality', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 8 }), fc.uint8Array({ maxLength: 8 }), (a, b) => {
        expect(constantTimeEqual(a, b)).toBe(bytesEqual(a, b));
        expect(constantTimeEqual(a, a.slice())).toBe(true);
      }),
    );
  });
  it('concatBytes', () => {
    expect(Array.from(concatBytes(Uint8Array.from([1]), new Uint8Array(0), Uint8Array.from([2, 3])))).toEqual(
      [1, 2, 3],
    );
  });
});

describe('SHA-256', () => {
  it('matches the FIPS 180-2 vectors', () => {
    expect(sha256Hex(new Uint8Array(0))).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
    expect(sha256Hex(utf8Bytes('abc'))).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });
  it('sha256Concat equals hashing the concatenation', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 4 }), (parts) => {
        expect(sha256Concat(...parts)).toEqual(sha256(concatBytes(...parts)));
      }),
    );
  });
  it('domain tags are length-prefixed, so one tag never extends another', () => {
    expect(Array.from(domainTag('ab'))).toEqual([2, 97, 98]);
    // Without the prefix, tag "a" + data "b…" and tag "ab" + data "…" would hash the same bytes.
    expect(taggedHash('a', utf8Bytes('bx'))).not.toEqual(taggedHash('ab', utf8Bytes('x')));
  });
});

describe('Ed25519', () => {
  // RFC 8032 §7.1, tests 1 and 2.
  const vectors = [
    {
      seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
      pub: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
      msg: '',
      sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
    },
    {
      seed: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
      pub: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
      msg: '72',
      sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
    },
  ];

  it.each(vectors)('RFC 8032 vector $pub', (v) => {
    const id = identityFromSeed(hexToBytes(v.seed));
    expect(publicKeyToHex(id.publicKey)).toBe(v.pub);
    expect(publicKeyOf(id.secretKey)).toEqual(id.publicKey);
    const sig = sign(id.secretKey, hexToBytes(v.msg));
    expect(bytesToHex(sig)).toBe(v.sig);
    expect(verify(publicKeyFromHex(v.pub), hexToBytes(v.msg), sig)).toBe(true);
  });

  it('rejects a wrong key, a changed message or a changed signature', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ maxLength: 64 }),
        fc.nat(),
        (s1, s2, msg, at) => {
          fc.pre(!bytesEqual(s1, s2));
          const a = identityFromSeed(s1);
          const b = identityFromSeed(s2);
          const sig = sign(a.secretKey, msg);
          expect(verify(a.publicKey, msg, sig)).toBe(true);
          expect(verify(b.publicKey, msg, sig)).toBe(false);
          const m2 = concatBytes(msg, Uint8Array.from([0]));
          expect(verify(a.publicKey, m2, sig)).toBe(false);
          const sig2 = sig.slice();
          sig2[at % 64]! ^= 1 << (at % 8);
          expect(verify(a.publicKey, msg, sig2)).toBe(false);
        },
      ),
      { numRuns: 30 },
    );
  });

  it('rejects the malleated signature (S + L): strict verification', () => {
    const id = identityFromSeed(new Uint8Array(32).fill(1));
    const msg = utf8Bytes('meshtrain');
    const sig = sign(id.secretKey, msg);
    // L = 2^252 + 27742317777372353535851937790883648493, little-endian.
    const L = hexToBytes('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010');
    const mall = sig.slice();
    let carry = 0;
    for (let i = 0; i < 32; i++) {
      const s = mall[32 + i]! + L[i]! + carry;
      mall[32 + i] = s & 0xff;
      carry = s >> 8;
    }
    expect(verify(id.publicKey, msg, mall)).toBe(false);
  });

  it('answers false (never throws) for malformed inputs from the network', () => {
    const id = identityFromSeed(new Uint8Array(32).fill(2));
    const sig = sign(id.secretKey, new Uint8Array(0));
    expect(verify(id.publicKey.subarray(0, 31), new Uint8Array(0), sig)).toBe(false);
    expect(verify(id.publicKey, new Uint8Array(0), sig.subarray(0, 63))).toBe(false);
    expect(verify(new Uint8Array(32).fill(0xff), new Uint8Array(0), sig)).toBe(false); // not a point
    expect(verify('x' as unknown as Uint8Array, new Uint8Array(0), sig)).toBe(false);
  });

  it('rejects seeds and keys of the wrong size with typed errors', () => {
    expect(cryptoCode(() => identityFromSeed(new Uint8Array(31)))).toBe('bad_length');
    expect(cryptoCode(() => sign(new Uint8Array(64), new Uint8Array(0)))).toBe('bad_length');
    expect(cryptoCode(() => publicKeyFromHex('00'))).toBe('bad_length');
    expect(cryptoCode(() => publicKeyToHex(new Uint8Array(31)))).toBe('bad_length');
  });

  it('identityFromSeed copies the seed (later changes to the caller buffer do not alter the key)', () => {
    const seed = new Uint8Array(32).fill(3);
    const id = identityFromSeed(seed);
    seed.fill(0);
    expect(id.secretKey).toEqual(new Uint8Array(32).fill(3));
  });
});
