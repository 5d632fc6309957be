// A shell's native Ed25519 verifier (setFastEd25519Verifier) speeds `verify` up without changing one answer:
// checked with Node's OpenSSL against the strict pure verifier on valid signatures, every kind of tampering,
// non-canonical encodings, small-order keys and mixed-order keys (where the cofactorless and cofactored
// equations disagree).
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { sha512 } from '@noble/hashes/sha2.js';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bytesToHex,
  hexToBytes,
  identityFromSeed,
  setFastEd25519Verifier,
  sign,
  verify,
} from '../src/index.ts';

const SPKI = hexToBytes('302a300506032b6570032100');
let nativeCalls = 0;
function openssl(pk: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean {
  nativeCalls++;
  try {
    const key = createPublicKey({ key: Buffer.from([...SPKI, ...pk]), format: 'der', type: 'spki' });
    return nodeVerify(null, msg, key, sig);
  } catch {
    return false;
  }
}

function both(pk: Uint8Array, msg: Uint8Array, sig: Uint8Array): { strict: boolean; fast: boolean } {
  setFastEd25519Verifier(null);
  const strict = verify(pk, msg, sig);
  setFastEd25519Verifier(openssl);
  const fast = verify(pk, msg, sig);
  setFastEd25519Verifier(null);
  return { strict, fast };
}

afterEach(() => setFastEd25519Verifier(null));

const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const P = 2n ** 255n - 19n;
const le = (n: bigint): Uint8Array => {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = Number((n >> BigInt(8 * i)) & 0xffn);
  return out;
};
const fromLe = (b: Uint8Array): bigint => b.reduce((a, x, i) => a | (BigInt(x) << BigInt(8 * i)), 0n);
const Point = ed25519.Point;

const SMALL_ORDER = [
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0000000000000000000000000000000000000000000000000000000000000080',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
];

/** A signature by hand: key a·B + T (T of small order), so the two verification equations can disagree. */
function mixedOrderSignature(seed: number, msg: Uint8Array): { pk: Uint8Array; sig: Uint8Array } {
  const a = (BigInt(seed) * 7919n + 12345n) % L;
  const T = Point.fromBytes(hexToBytes(SMALL_ORDER[4]!));
  const pk = Point.BASE.multiply(a).add(T).toBytes();
  const r = (BigInt(seed) * 104729n + 99n) % L;
  const R = Point.BASE.multiply(r).toBytes();
  const k = fromLe(sha512(Uint8Array.from([...R, ...pk, ...msg]))) % L;
  const s = (r + k * a) % L;
  return { pk, sig: Uint8Array.from([...R, ...le(s)]) };
}

describe('fast Ed25519 verification', () => {
  it('the small-order table is exactly the eight points of order dividing 8', () => {
    const pts = SMALL_ORDER.map((h) => Point.fromBytes(hexToBytes(h)));
    for (const p of pts) expect(p.isSmallOrder()).toBe(true);
    expect(new Set(pts.map((p) => bytesToHex(p.toBytes()))).size).toBe(8);
  });

  it('gives the strict answer on valid signatures, via the native verifier', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ maxLength: 300 }),
        (seed, msg) => {
          const id = identityFromSeed(seed);
          const sig = sign(id.secretKey, msg);
          const before = nativeCalls;
          expect(both(id.publicKey, msg, sig)).toEqual({ strict: true, fast: true });
          expect(nativeCalls).toBe(before + 1);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('gives the strict answer on every tampering of key, message and signature', () => {
    const id = identityFromSeed(new Uint8Array(32).fill(9));
    const msg = new TextEncoder().encode('meshtrain join');
    const sig = sign(id.secretKey, msg);
    for (let bit = 0; bit < 64 * 8; bit += 3) {
      const s2 = sig.slice();
      s2[bit >> 3]! ^= 1 << (bit & 7);
      expect(both(id.publicKey, msg, s2)).toEqual({ strict: false, fast: false });
    }
    for (let bit = 0; bit < 32 * 8; bit += 5) {
      const k2 = id.publicKey.slice();
      k2[bit >> 3]! ^= 1 << (bit & 7);
      const r = both(k2, msg, sig);
      expect(r.fast).toBe(r.strict);
    }
    const m2 = msg.slice();
    m2[0]! ^= 1;
    expect(both(id.publicKey, m2, sig)).toEqual({ strict: false, fast: false });
  });

  it('refuses S + L, non-canonical R and keys, and small-order keys exactly as the strict verifier does', () => {
    const id = identityFromSeed(new Uint8Array(32).fill(4));
    const msg = Uint8Array.of(1, 2, 3);
    const sig = sign(id.secretKey, msg);
    const sPlusL = Uint8Array.from([...sig.subarray(0, 32), ...le(fromLe(sig.subarray(32)) + L)]);
    expect(both(id.publicKey, msg, sPlusL)).toEqual({ strict: false, fast: false });
    // y ≥ p: the non-canonical spellings of y = 0..18 (with and without the sign bit).
    for (let y = 0n; y < 19n; y++)
      for (const sign of [0, 0x80]) {
        const enc = le(P + y);
        enc[31]! |= sign;
        const r = both(enc, msg, sig);
        expect(r.fast).toBe(r.strict);
        const r2 = both(id.publicKey, msg, Uint8Array.from([...enc, ...sig.subarray(32)]));
        expect(r2.fast).toBe(r2.strict);
      }
    // Small-order keys with a signature of S = 0 and R = the identity verify under the cofactorless equation.
    for (const h of SMALL_ORDER) {
      const zeroSig = Uint8Array.from([...hexToBytes(SMALL_ORDER[0]!), ...new Uint8Array(32)]);
      expect(both(hexToBytes(h), msg, zeroSig)).toEqual({ strict: false, fast: false });
    }
  });

  it('decides mixed-order keys by the strict (cofactored) rule even when OpenSSL says no', () => {
    let disagreements = 0;
    for (let seed = 1; seed <= 24; seed++) {
      const msg = Uint8Array.of(seed, 7);
      const { pk, sig } = mixedOrderSignature(seed, msg);
      const r = both(pk, msg, sig);
      expect(r.strict).toBe(true);
      expect(r.fast).toBe(true);
      if (!openssl(pk, msg, sig)) disagreements++;
    }
    // Most such signatures fail OpenSSL's cofactorless check: the fallback is what keeps the answers equal.
    expect(disagreements).toBeGreaterThan(12);
  });

  it('a throwing native verifier changes nothing', () => {
    const id = identityFromSeed(new Uint8Array(32).fill(5));
    const msg = Uint8Array.of(9);
    const sig = sign(id.secretKey, msg);
    setFastEd25519Verifier(() => {
      throw new Error('boom');
    });
    expect(verify(id.publicKey, msg, sig)).toBe(true);
    expect(verify(id.publicKey, Uint8Array.of(8), sig)).toBe(false);
  });
});
