// Signed admin requests (apps/relay/PROTOCOL.md "Admin"): the string an Ed25519 signature covers and the headers
// that carry it. One definition for the relay that verifies and for every client that signs (the web admin
// console, CLIs, tests).
import { bytesToHex, utf8Bytes } from './bytes.ts';
import { publicKeyOf, sign } from './ed25519.ts';
import { sha256Hex } from './hash.ts';

export const ADMIN_SIGNATURE_TAG = 'meshtrain-admin/v1';
export const ADMIN_HEADER_KEY = 'X-Meshtrain-Key';
export const ADMIN_HEADER_TIMESTAMP = 'X-Meshtrain-Timestamp';
export const ADMIN_HEADER_SIGNATURE = 'X-Meshtrain-Signature';

/**
 * `TAG \n METHOD \n PATH(+query) \n TIMESTAMP \n sha256hex(body)`: `path` is the URL path plus query as sent,
 * `timestamp` unix milliseconds as a decimal string.
 */
export function adminCanonical(method: string, path: string, timestamp: string, body: string): string {
  return `${ADMIN_SIGNATURE_TAG}\n${method.toUpperCase()}\n${path}\n${timestamp}\n${sha256Hex(utf8Bytes(body))}`;
}

/** Headers for a signed admin request. */
export function signAdminRequest(
  secretKey: Uint8Array,
  method: string,
  path: string,
  body: string,
  timestampMs: number,
): Record<string, string> {
  const ts = String(timestampMs);
  const sig = sign(secretKey, utf8Bytes(adminCanonical(method, path, ts, body)));
  return {
    [ADMIN_HEADER_KEY]: bytesToHex(publicKeyOf(secretKey)),
    [ADMIN_HEADER_TIMESTAMP]: ts,
    [ADMIN_HEADER_SIGNATURE]: bytesToHex(sig),
  };
}
