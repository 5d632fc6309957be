/**
 * Witnesses needed out of W (docs/protocol.md "Witnesses and quorum"): 1→1, 2→2, 3→2, else floor(2W/3), never
 * below 1. W is the round's effective witness count, never "how many happened to submit" (see
 * effectiveWitnessCount).
 */
export function quorum(witnessCount: number): number {
  if (witnessCount <= 1) return 1;
  if (witnessCount === 2) return 2;
  if (witnessCount === 3) return 2;
  return Math.max(1, Math.floor((witnessCount * 2) / 3));
}
