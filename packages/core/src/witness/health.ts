// Health scores (docs/protocol.md "Health checks and client removal"): a trainer is seen alive if enough of
// the next round's witnesses attest its result slot.
import { attests } from './attestation.ts';
import { quorum } from './quorum.ts';

/** Number of attestations that claim `slot`. */
export function healthScore(slot: number, attestations: readonly Uint8Array[]): number {
  let score = 0;
  for (const bits of attestations) if (attests(bits, slot)) score++;
  return score;
}

/** Healthy iff the score reaches the quorum of the attesting round's effective witness count W. */
export function isHealthy(slot: number, attestations: readonly Uint8Array[], witnessCount: number): boolean {
  return healthScore(slot, attestations) >= quorum(witnessCount);
}
