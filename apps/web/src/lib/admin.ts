// Signed admin requests (apps/relay/PROTOCOL.md "Admin"): Ed25519 over
// "meshtrain-admin/v1\n" + METHOD + "\n" + PATH(+query) + "\n" + TIMESTAMP + "\n" + sha256hex(body).
import { bytesToHex, publicKeyOf, sha256Hex, sign, utf8Bytes } from '@meshtrain/core';
import { errorOf, readBody } from './api.ts';

export const ADMIN_SIGNATURE_TAG = 'meshtrain-admin/v1';

export function adminCanonical(method: string, path: string, timestamp: string, body: string): string {
  return `${ADMIN_SIGNATURE_TAG}\n${method.toUpperCase()}\n${path}\n${timestamp}\n${sha256Hex(utf8Bytes(body))}`;
}

export function adminHeaders(
  secretKey: Uint8Array,
  method: string,
  path: string,
  body: string,
  timestampMs: number,
): Record<string, string> {
  const ts = String(timestampMs);
  const sig = sign(secretKey, utf8Bytes(adminCanonical(method, path, ts, body)));
  return {
    'X-Meshtrain-Key': bytesToHex(publicKeyOf(secretKey)),
    'X-Meshtrain-Timestamp': ts,
    'X-Meshtrain-Signature': bytesToHex(sig),
  };
}

/** What the relay answered, kept for display whether it succeeded or not. */
export interface AdminReply {
  ok: boolean;
  status: number;
  method: string;
  path: string;
  body: unknown;
}

/**
 * Sends one signed request. `path` includes the query string exactly as sent (it is part of what is signed).
 * Network failures throw; HTTP errors come back as `ok: false` with the relay's error body.
 */
export async function adminRequest(
  secretKey: Uint8Array,
  method: 'POST' | 'PUT',
  path: string,
  body = '',
  contentType = 'text/plain; charset=utf-8',
): Promise<AdminReply> {
  const headers = { ...adminHeaders(secretKey, method, path, body, Date.now()), 'content-type': contentType };
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body });
  } catch (e) {
    throw new Error(`cannot reach the relay (${method} ${path}): ${(e as Error).message}`, { cause: e });
  }
  return { ok: res.ok, status: res.status, method, path, body: await readBody(res) };
}

/** Like adminRequest, but throws the relay's error for a non-2xx reply. */
export async function adminRequestOrThrow(
  secretKey: Uint8Array,
  method: 'POST' | 'PUT',
  path: string,
  body = '',
  contentType?: string,
): Promise<unknown> {
  const r = await adminRequest(secretKey, method, path, body, contentType);
  if (!r.ok) throw errorOf(r.status, r.body);
  return r.body;
}
