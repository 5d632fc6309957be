// Witness attestations (docs/protocol.md "Witnesses and quorum"): one bit per result slot of the attested
// round, in `roundAssignments` order, bit i = byte i >> 3, bit i & 7 (LSB first), padding bits 0. Exact where
// Psyche's blooms are probabilistic, and ⌈slots/8⌉ bytes where two blooms at a 0.001 false-positive rate take
// ~29 bits per client.
import { WitnessError } from './errors.ts';

/** Bytes of an attestation over `slots` result slots. */
export function attestationBytes(slots: number): number {
  if (!Number.isSafeInteger(slots) || slots < 0)
    throw new WitnessError('BadArgument', `slot count must be a non-negative integer, got ${slots}`);
  return Math.ceil(slots / 8);
}

/** An attestation with bit i set where `claimed(i)`. */
export function attestationOf(slots: number, claimed: (slot: number) => boolean): Uint8Array {
  const bits = new Uint8Array(attestationBytes(slots));
  for (let i = 0; i < slots; i++) if (claimed(i)) bits[i >>> 3] = (bits[i >>> 3] as number) | (1 << (i & 7));
  return bits;
}

/**
 * Checks untrusted bits (from the wire or a stored state) against the attested round's slot count: exactly
 * ⌈slots/8⌉ bytes and no bit past the last slot, so every attestation of a round has one canonical form.
 */
export function checkAttestation(bits: unknown, slots: number): asserts bits is Uint8Array {
  const want = attestationBytes(slots);
  if (!(bits instanceof Uint8Array) || bits.length !== want)
    throw new WitnessError(
      'BadAttestation',
      `attestation must be ${want} bytes for ${slots} result slots, got ${bits instanceof Uint8Array ? bits.length : typeof bits}`,
    );
  const rem = slots & 7;
  if (rem !== 0 && (bits[want - 1] as number) >>> rem !== 0)
    throw new WitnessError('BadAttestation', `attestation sets bits past the last of ${slots} result slots`);
}

/** Whether the attestation claims `slot` (false past its end). */
export function attests(bits: Uint8Array, slot: number): boolean {
  return (((bits[slot >>> 3] ?? 0) >>> (slot & 7)) & 1) === 1;
}

/** Number of slots the attestation claims. */
export function attestedCount(bits: Uint8Array): number {
  let n = 0;
  for (const byte of bits) n += POPCOUNT[byte] as number;
  return n;
}

const POPCOUNT = (() => {
  const t = new Uint8Array(256);
  for (let i = 1; i < 256; i++) t[i] = (t[i >> 1] as number) + (i & 1);
  return t;
})();
