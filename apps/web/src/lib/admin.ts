// Signed admin requests (apps/relay/PROTOCOL.md "Admin"), signed with core's signAdminRequest: the same code the
// relay verifies with.
import { signAdminRequest } from '@meshtrain/core';
import { readBody, relayApiErrorOf } from '@meshtrain/client/relay-api';

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
  const headers = {
    ...signAdminRequest(secretKey, method, path, body, Date.now()),
    'content-type': contentType,
  };
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
  if (!r.ok) throw relayApiErrorOf(`${method} ${path}`, r.status, r.body);
  return r.body;
}
