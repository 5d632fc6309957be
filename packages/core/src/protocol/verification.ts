// Verification of work (the run's `verification_percent`, which Psyche codes but leaves at 0). Witnesses only
// attest that a result was delivered; verification checks that it is the work it claims to be.
//
// How a round h result is checked (docs/protocol.md "Verification of work"):
//  - The trainer computes its gradient on its assigned batch at the round's shared parameters (no lookahead
//    when the run verifies), and puts in its result a fingerprint: the sign bits of that gradient at
//    FINGERPRINT_BITS positions derived from round h's seed and its slot — unknown before the round starts,
//    so the bits cannot be produced without computing the gradient of that batch at those parameters.
//  - Round h+1's seed (unknown while round h's results are made) samples each admitted result with
//    probability verification_percent / 100 and names two verifiers among round h+1's clients, never the
//    trainer. At the start of round h+1, before applying anything new, each verifier holds exactly the
//    parameters the trainer trained on; it recomputes the gradient on the trainer's batch and measures
//      * fingerprint agreement: the share of fingerprint bits that match its own gradient's signs, over the
//        positions where its gradient is largest (the others flip under rounding differences between
//        devices) — a result computed on another batch, replayed from an earlier round, or made up fails;
//      * update agreement: how much the result's transmitted coefficients agree in sign with its own gradient
//        there, weighted by magnitude — random signs score about 0, a sign-flipped honest result about −1.
//    It reports pass or fail (a Verdict); thresholds are protocol constants calibrated on honest CPU and
//    WebGPU trainers (docs/protocol.md records the measurements).
//  - One failing verdict keeps the result from being applied (and its batch is retried). A cheat is confirmed
//    (the trainer is ejected for the run and every result it sent in the epoch is excluded; replicas that
//    already applied some of them rebuild their parameters without them, queries.replayExclusions) when both
//    independent verifiers fail a result conclusively (a fingerprint that does not match, or an update that
//    opposes the gradient: `conclusiveFailure`), or fail CONFIRMING_STRIKES of the trainer's last
//    STRIKE_WINDOW verified results (coordinator/verification.ts). One inconclusive failure is not proof: an honest DisTrO result sends
//    the top of its momentum, which can hold directions the current gradient no longer shares, and on some
//    rounds every honest result scores low (docs/protocol.md "Verification of work" has the measurements).
//    How much a verdict weighs depends on its sender: a run that names trusted verifiers takes their word and that
//    of verifiers with a verified history over the others' (coordinator/trust.ts, docs/protocol.md "Trust").
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { below, hashOf, u32le } from '../coordinator/verification.ts';
import { hexToBytes } from '../crypto/bytes.ts';

/** Gradient sign bits a result carries when its run verifies: 256 bytes. */
export const FINGERPRINT_BITS = 2048;
/** Share of fingerprint positions (those where the verifier's |gradient| is largest) that are compared. */
export const FINGERPRINT_COMPARED_SHARE = 0.5;
/** Least agreement of the compared fingerprint bits for a pass. */
export const MIN_FINGERPRINT_AGREEMENT = 0.95;
/** Least magnitude-weighted sign agreement of the transmitted coefficients with the verifier's gradient. */
export const MIN_UPDATE_AGREEMENT = 0.5;
/**
 * SparseLoCo: least magnitude-weighted sign agreement of the sent values with the verifier's gradient of the
 * first inner step at the sent entries (docs/protocol.md "Verification of work" has the measurements).
 */
export const MIN_SPARSELOCO_UPDATE_AGREEMENT = 0.3;
/**
 * Update agreement at or below which a failure is conclusive: the result opposes the gradient (a sign-flipped
 * result scores about −1; the lowest honest results measured, about −0.25, are random-like, not opposed).
 */
export const CONCLUSIVE_UPDATE_AGREEMENT = -0.5;

const FINGERPRINT_TAG = new TextEncoder().encode('meshtrain/fingerprint/v1');

export function verificationActive(state: CoordinatorState): boolean {
  return state.config.verification_percent > 0;
}

/**
 * The FINGERPRINT_BITS positions of a result, as indices into all parameters laid end to end in variable order
 * (`totalParams` values): four positions per SHA-256 block of (round seed ‖ slot ‖ counter).
 */
export function fingerprintPositions(roundSeed: string, slot: number, totalParams: number): Float64Array {
  const out = new Float64Array(FINGERPRINT_BITS);
  const seed = hexToBytes(roundSeed);
  for (let block = 0; block * 4 < FINGERPRINT_BITS; block++) {
    const h = hashOf(FINGERPRINT_TAG, seed, u32le(slot), u32le(block));
    for (let j = 0; j < 4 && block * 4 + j < FINGERPRINT_BITS; j++)
      out[block * 4 + j] = below(h, 8 * j, totalParams);
  }
  return out;
}

/** Sign bits of `values` (LSB first, 1 = negative, as the wire packs 1-bit values). */
export function fingerprintOf(values: ArrayLike<number>): Uint8Array {
  const bits = new Uint8Array(Math.ceil(values.length / 8));
  for (let i = 0; i < values.length; i++)
    if ((values[i] as number) < 0 || Object.is(values[i], -0)) bits[i >> 3]! |= 1 << (i & 7);
  return bits;
}

/**
 * Share of agreeing signs between a fingerprint and the verifier's own gradient values at the same positions,
 * over the FINGERPRINT_COMPARED_SHARE of positions where the verifier's gradient is largest in magnitude.
 */
export function fingerprintAgreement(fingerprint: Uint8Array, own: ArrayLike<number>): number {
  const n = own.length;
  if (n === 0 || fingerprint.length * 8 < n) return 0;
  const order = Array.from({ length: n }, (_, i) => i).sort(
    (a, b) => Math.abs(own[b] as number) - Math.abs(own[a] as number) || a - b,
  );
  const compared = Math.max(1, Math.floor(n * FINGERPRINT_COMPARED_SHARE));
  let agree = 0;
  for (let k = 0; k < compared; k++) {
    const i = order[k] as number;
    const negative = ((fingerprint[i >> 3] as number) >> (i & 7)) & 1;
    if (negative === ((own[i] as number) < 0 ? 1 : 0)) agree++;
  }
  return agree / compared;
}

/** The verdict a verifier reports for its two measurements of a result of a run with `optimizer`. */
export function verificationPasses(
  m: { fingerprintAgreement: number; updateAgreement: number },
  optimizer: 'distro' | 'sparseloco' = 'distro',
): boolean {
  const minUpdate = optimizer === 'sparseloco' ? MIN_SPARSELOCO_UPDATE_AGREEMENT : MIN_UPDATE_AGREEMENT;
  return m.fingerprintAgreement >= MIN_FINGERPRINT_AGREEMENT && m.updateAgreement >= minUpdate;
}

/**
 * A failure that proves a cheat on its own when every verifier of the result reports one: the fingerprint
 * does not match the verifier's gradient (computed on another batch, at other parameters, or made up), or the
 * sent update opposes it. Honest results, whose agreement can dip near or below 0 on some rounds, never
 * measured either.
 */
export function conclusiveFailure(m: { fingerprintAgreement: number; updateAgreement: number }): boolean {
  return (
    m.fingerprintAgreement < MIN_FINGERPRINT_AGREEMENT || m.updateAgreement <= CONCLUSIVE_UPDATE_AGREEMENT
  );
}
