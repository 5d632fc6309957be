// Health scores (docs/protocol.md "Health checks and client removal"): a client is healthy if enough of the
// round's witnesses say they downloaded and verified its result, i.e. put SHA256(its signer key) in their
// participant bloom.
import { sha256 } from '@noble/hashes/sha2.js';
import type { BloomFilter } from './bloom.ts';
import { quorum } from './quorum.ts';

/** The participant-bloom item for a client: SHA-256 of its 32-byte Ed25519 public key. */
export function participantItem(signerPublicKey: Uint8Array): Uint8Array {
  return sha256(signerPublicKey);
}

/** Number of witnesses whose participant bloom contains the client. */
export function healthScore(item: Uint8Array, participantBlooms: readonly BloomFilter[]): number {
  let score = 0;
  for (const bloom of participantBlooms) if (bloom.has(item)) score++;
  return score;
}

/** Healthy iff the score reaches the quorum of the round's effective witness count W. */
export function isHealthy(
  item: Uint8Array,
  participantBlooms: readonly BloomFilter[],
  witnessCount: number,
): boolean {
  return healthScore(item, participantBlooms) >= quorum(witnessCount);
}
