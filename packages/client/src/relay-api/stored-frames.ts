// The relay's HTTP route for stored results (PROTOCOL.md "HTTP API"): the bytes of a SignedResult frame by
// its commitment. Isomorphic (global fetch).
import { bytesToHex } from '@meshtrain/core';
import { relayRoot, runPath } from './request.ts';

/**
 * GET /api/runs/:id/results/:commitment: the stored frame, or null when the relay does not hold it (any
 * non-2xx answer). A network failure throws, as fetch does. The caller checks what the bytes say.
 */
export async function fetchStoredResult(
  relayUrl: string,
  runId: string,
  commitment: Uint8Array,
): Promise<Uint8Array | null> {
  const res = await fetch(`${relayRoot(relayUrl)}${runPath(runId)}/results/${bytesToHex(commitment)}`);
  if (!res.ok) return null;
  return new Uint8Array(await res.arrayBuffer());
}

/**
 * GET /api/runs/:id/admitted/:address: a closed round's AdmittedList frame by its admitted_list, or null when
 * the relay does not hold it (any non-2xx answer). The caller checks it against the address.
 */
export async function fetchAdmittedList(
  relayUrl: string,
  runId: string,
  address: string,
): Promise<Uint8Array | null> {
  const res = await fetch(`${relayRoot(relayUrl)}${runPath(runId)}/admitted/${address}`);
  if (!res.ok) return null;
  return new Uint8Array(await res.arrayBuffer());
}
