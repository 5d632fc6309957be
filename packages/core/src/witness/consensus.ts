// Which commitment, if any, the witnesses agree on for one batch (docs/protocol.md "Witnesses and quorum").
//
// Psyche lets each witness vote for the first candidate *in the local arrival order* found in its broadcast
// bloom and breaks ties by "last". Arrival order differs between peers, so two honest peers could pick
// different commitments for the same batch and diverge. Here candidates are put in a canonical order
// (ascending commitment bytes) before voting, and a tie between max-vote candidates goes to the lowest
// commitment: every peer with the same candidate set and blooms picks the same result.
import type { BloomFilter } from './bloom.ts';

export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

export interface ConsensusResult {
  commitment: Uint8Array;
  votes: number;
}

/**
 * Each witness votes for one candidate: the canonically-first one its broadcast bloom contains. Candidates with
 * at least `quorumSize` votes qualify; the one with most votes wins, ties to the lowest commitment.
 */
export function selectConsensusCommitment(
  candidates: readonly Uint8Array[],
  broadcastBlooms: readonly BloomFilter[],
  quorumSize: number,
): ConsensusResult | null {
  if (candidates.length === 0) return null;
  const ordered = [...candidates]
    .sort(compareBytes)
    .filter((c, i, arr) => i === 0 || compareBytes(c, arr[i - 1] as Uint8Array) !== 0);
  const votes = new Array<number>(ordered.length).fill(0);
  for (const bloom of broadcastBlooms) {
    const k = ordered.findIndex((c) => bloom.has(c));
    if (k >= 0) votes[k] = (votes[k] as number) + 1;
  }
  let best = -1;
  for (let k = 0; k < ordered.length; k++) {
    const v = votes[k] as number;
    // Strictly greater: among equal counts the earlier (lowest) commitment stays.
    if (v >= quorumSize && (best < 0 || v > (votes[best] as number))) best = k;
  }
  return best < 0 ? null : { commitment: ordered[best] as Uint8Array, votes: votes[best] as number };
}
