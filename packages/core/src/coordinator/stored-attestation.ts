// Attestations in state are JSON: base64 bits. Decoding is memoised per witness record (records are never
// mutated, only replaced), since the same record is read by every consensus and health query of its round.
import type { Round, WitnessRecord } from '../state/coordinator-state.ts';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const LOOKUP = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < ALPHABET.length; i++) t[ALPHABET.charCodeAt(i)] = i;
  return t;
})();

export function toBase64(bytes: Uint8Array): string {
  const parts: string[] = [];
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] as number;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    const n = (a << 16) | ((b ?? 0) << 8) | (c ?? 0);
    parts.push(
      ALPHABET[(n >>> 18) & 63]! +
        ALPHABET[(n >>> 12) & 63]! +
        (b === undefined ? '=' : ALPHABET[(n >>> 6) & 63]!) +
        (c === undefined ? '=' : ALPHABET[n & 63]!),
    );
  }
  return parts.join('');
}

export function fromBase64(text: string): Uint8Array {
  if (text.length % 4 !== 0) throw new Error('base64 length must be a multiple of 4');
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const ch = text.charCodeAt(i + j);
      const v = ch === 61 && i + j >= text.length - pad ? 0 : ch < 128 ? (LOOKUP[ch] as number) : -1;
      if (v < 0) throw new Error(`invalid base64 character at ${i + j}`);
      n = (n << 6) | v;
    }
    if (o < out.length) out[o++] = (n >>> 16) & 0xff;
    if (o < out.length) out[o++] = (n >>> 8) & 0xff;
    if (o < out.length) out[o++] = n & 0xff;
  }
  return out;
}

const decoded = new WeakMap<WitnessRecord, Uint8Array>();

/** The attestation of a stored witness record; null once pruned (or in a state stored before attestations). */
export function loadAttestation(w: WitnessRecord): Uint8Array | null {
  if (typeof w.attested !== 'string') return null;
  let bits = decoded.get(w);
  if (!bits) {
    try {
      bits = fromBase64(w.attested);
    } catch {
      // A state is checked when it is decoded; a record that still does not parse attests nothing.
      return null;
    }
    decoded.set(w, bits);
  }
  return bits;
}

/** The attestations of `round`'s witnesses (over the round before it); empty once pruned. */
export function roundAttestations(round: Round): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const w of round.witnesses) {
    const bits = loadAttestation(w);
    if (bits) out.push(bits);
  }
  return out;
}

/**
 * A round bitmap stored as base64 (a round outcome's bits, coordinator/round-outcome.ts), decoded: null when it
 * is not base64 or not ⌈slots/8⌉ bytes.
 */
export function loadSlotBits(text: string, slots: number): Uint8Array | null {
  let bits: Uint8Array;
  try {
    bits = fromBase64(text);
  } catch {
    return null;
  }
  return bits.length === Math.ceil(slots / 8) ? bits : null;
}
