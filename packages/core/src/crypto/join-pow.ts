// The proof of work a permissionless run asks of every Join: identities are free, so each one must at least
// cost its creator some seconds of CPU (docs/protocol.md "Threat model"). The puzzle binds the relay's fresh
// per-connection challenge and the joining key, so a solution is good for one connection of one identity and
// cannot be computed ahead of time or reused.
//
//   digest = SHA-256( tag("meshtrain/v1/join-pow") ‖ challenge (32 B) ‖ public key (32 B) ‖ nonce (8 B) )
//   valid ⇔ digest starts with `bits` zero bits (most significant bit of byte 0 first)
//
// Solving takes 2^bits hashes on average (20 bits ≈ one million: about a second of one core in JS).
import { sha256 } from '@noble/hashes/sha2.js';
import { domainTag } from './hash.ts';

/** Hardest puzzle a relay may ask (2^32 hashes ≈ an hour): anything above is a misconfiguration. */
export const MAX_JOIN_POW_BITS = 32;
export const JOIN_POW_NONCE_BYTES = 8;
const TAG = domainTag('meshtrain/v1/join-pow');

function message(challenge: Uint8Array, publicKey: Uint8Array): Uint8Array {
  const m = new Uint8Array(TAG.length + challenge.length + publicKey.length + JOIN_POW_NONCE_BYTES);
  m.set(TAG);
  m.set(challenge, TAG.length);
  m.set(publicKey, TAG.length + challenge.length);
  return m;
}

/** Leading zero bits of `h` (most significant bit of byte 0 first). */
export function leadingZeroBits(h: Uint8Array): number {
  let n = 0;
  for (const b of h) {
    if (b === 0) {
      n += 8;
      continue;
    }
    return n + Math.clz32(b) - 24;
  }
  return n;
}

/** Whether `nonce` solves the puzzle of `bits` for this challenge and key. */
export function checkJoinPow(
  challenge: Uint8Array,
  publicKey: Uint8Array,
  nonce: Uint8Array,
  bits: number,
): boolean {
  if (bits <= 0) return true;
  if (!(nonce instanceof Uint8Array) || nonce.length !== JOIN_POW_NONCE_BYTES) return false;
  const m = message(challenge, publicKey);
  m.set(nonce, m.length - JOIN_POW_NONCE_BYTES);
  return leadingZeroBits(sha256(m)) >= bits;
}

/**
 * A nonce solving the puzzle (2^bits tries on average). Synchronous: call it where blocking for a second is
 * fine (a worker, a CLI). `onTry` is called every 65,536 tries, e.g. for a progress line.
 */
export function solveJoinPow(
  challenge: Uint8Array,
  publicKey: Uint8Array,
  bits: number,
  onTry?: (tries: number) => void,
): Uint8Array {
  if (bits <= 0) return new Uint8Array(JOIN_POW_NONCE_BYTES);
  if (bits > MAX_JOIN_POW_BITS)
    throw new RangeError(`a join puzzle of ${bits} bits is more than ${MAX_JOIN_POW_BITS}`);
  const m = message(challenge, publicKey);
  const at = m.length - JOIN_POW_NONCE_BYTES;
  const view = new DataView(m.buffer, m.byteOffset + at, JOIN_POW_NONCE_BYTES);
  for (let hi = 0; ; hi++) {
    view.setUint32(4, hi, true);
    for (let lo = 0; lo <= 0xffff_ffff; lo++) {
      view.setUint32(0, lo, true);
      if (leadingZeroBits(sha256(m)) >= bits) return m.slice(at);
      if ((lo & 0xffff) === 0xffff) onTry?.(hi * 2 ** 32 + lo + 1);
    }
  }
}
