// The canonical hash of a coordinator state: SHA-256 of its JSON text, the same text StateSnapshot carries and
// the relay stores. JSON.stringify follows property insertion order, and every replica builds its state the
// same way (a snapshot's JSON.parse, then core's `tick` on the same events), so equal states print equal text
// — the replay test in packages/core/test holds that. A client that replays deltas to another hash has
// diverged from the relay (or the relay from itself) and asks for a snapshot (ResyncRequest).
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { sha256, utf8Bytes } from '../crypto/index.ts';

export const STATE_HASH_BYTES = 32;

/** The bytes stateHash covers: UTF-8 of JSON.stringify(state). */
export function canonicalStateBytes(state: CoordinatorState): Uint8Array {
  return utf8Bytes(JSON.stringify(state));
}

/** SHA-256 of canonicalStateBytes (any SHA-256 of those bytes is the same value: shells may use a native one). */
export function stateHash(state: CoordinatorState): Uint8Array {
  return sha256(canonicalStateBytes(state));
}
