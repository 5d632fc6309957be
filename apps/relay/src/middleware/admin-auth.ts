// Signed admin requests (PROTOCOL.md "Admin"). The middleware proves who signed the request and that it is
// fresh; which key may do what (main authority, join authority, grantee) is the route's decision, because
// it depends on the run. 401 = we don't know who you are; 403 = we know, and you may not.
import type { MiddlewareHandler } from 'hono';
import {
  SIGNED_HEADER_KEY as HEADER_KEY,
  SIGNED_HEADER_SIGNATURE as HEADER_SIGNATURE,
  SIGNED_HEADER_TIMESTAMP as HEADER_TIMESTAMP,
  adminCanonical,
  hexToBytes,
  utf8Bytes,
  verify,
  isHex32,
} from '@meshtrain/core';

// The request format is core's (clients sign with the same code); re-exported for the relay's API.
export { ADMIN_SIGNATURE_TAG, adminCanonical, signAdminRequest } from '@meshtrain/core';
export { HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP };
/** Timestamps further than this from the relay's clock (either way) are refused. */
export const ADMIN_WINDOW_MS = 5 * 60 * 1000;

const SIG_HEX = /^[0-9a-f]{128}$/;
const DIGITS = /^[0-9]{1,16}$/;

export interface AdminEnv {
  Variables: {
    /** Public key (hex) that signed the request. */
    signer: string;
    /** The request body as text (already read to hash it). */
    body: string;
  };
}

function unauthenticated(message: string): Response {
  return Response.json({ error: { code: 'unauthenticated', message } }, { status: 401 });
}

/** A signed request's headers, checked for form and freshness (the signature itself is the caller's check). */
export type SignedHeaders = { key: string; ts: string; sig: string } | { problem: string };

/** Reads the signature headers of an admin request or a checkpoint upload; `now` is the relay's clock. */
export function readSignedHeaders(header: (name: string) => string | undefined, now: number): SignedHeaders {
  const key = header(HEADER_KEY);
  const ts = header(HEADER_TIMESTAMP);
  const sig = header(HEADER_SIGNATURE);
  if (key === undefined || ts === undefined || sig === undefined)
    return {
      problem: `sign the request: ${HEADER_KEY}, ${HEADER_TIMESTAMP} and ${HEADER_SIGNATURE} are required`,
    };
  if (!isHex32(key)) return { problem: `${HEADER_KEY} must be 64 lowercase hex digits` };
  if (!DIGITS.test(ts)) return { problem: `${HEADER_TIMESTAMP} must be unix milliseconds` };
  if (!SIG_HEX.test(sig)) return { problem: `${HEADER_SIGNATURE} must be 128 lowercase hex digits` };
  if (Math.abs(now - Number(ts)) > ADMIN_WINDOW_MS)
    return { problem: 'timestamp outside the 5-minute window; check the clock and sign again' };
  return { key, ts, sig };
}

/** Where accepted signatures are remembered for their window (RelayStore: SQLite, so restarts keep them). */
export interface SignatureLedger {
  rememberAdminSignature(sig: string, expiresAt: number, now: number): 'ok' | 'replay' | 'full';
}

/**
 * Verifies the signature headers and puts the signer and body in the context. A signature is accepted once:
 * replaying the exact request inside the window is refused too, also after a relay restart.
 */
export function adminAuth(
  ledger: SignatureLedger,
  clock: () => number = Date.now,
): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    const now = clock();
    const signed = readSignedHeaders((name) => c.req.header(name), now);
    if ('problem' in signed) return unauthenticated(signed.problem);
    const { key, ts, sig } = signed;
    const body = await c.req.text();
    const url = new URL(c.req.url);
    const canonical = adminCanonical(c.req.method, url.pathname + url.search, ts, body);
    const ok = verify(hexToBytes(key, 32), utf8Bytes(canonical), hexToBytes(sig, 64));
    if (!ok)
      return unauthenticated('signature does not verify for this key, method, path, timestamp and body');
    const remembered = ledger.rememberAdminSignature(sig, Number(ts) + ADMIN_WINDOW_MS, now);
    if (remembered === 'replay')
      return unauthenticated('this exact request was already accepted; sign a new one');
    if (remembered === 'full')
      return Response.json(
        { error: { code: 'busy', message: 'too many admin requests in the last 5 minutes; retry later' } },
        { status: 429, headers: { 'Retry-After': '60' } },
      );
    c.set('signer', key);
    c.set('body', body);
    await next();
  };
}
