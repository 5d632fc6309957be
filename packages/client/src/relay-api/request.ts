// One GET against the relay's HTTP API: network failures, error replies and replies of the wrong shape all
// become a RelayApiError; an abort stays the AbortError the caller asked for.
import type { z } from 'zod';
import { readBody, RelayApiError, relayApiErrorOf } from './errors.ts';
import { mismatch } from './schemas.ts';

export interface RequestOptions {
  signal?: AbortSignal;
}

/** `relayUrl` without trailing slashes; '' addresses the page's own origin (the web app on the relay). */
export function relayRoot(relayUrl: string): string {
  return relayUrl.replace(/\/+$/, '');
}

/** `/api/runs/<id>` with the id escaped. */
export function runPath(runId: string): string {
  return `/api/runs/${encodeURIComponent(runId)}`;
}

function isAbort(e: unknown): boolean {
  return (e as { name?: unknown } | null)?.name === 'AbortError';
}

/** The response to GET `path`, whatever its status; throws only when no answer came. */
export async function get(
  relayUrl: string,
  path: string,
  o: RequestOptions & { accept?: string } = {},
): Promise<Response> {
  try {
    return await fetch(`${relayRoot(relayUrl)}${path}`, {
      ...(o.accept ? { headers: { accept: o.accept } } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
    });
  } catch (e) {
    if (isAbort(e)) throw e;
    throw new RelayApiError(
      {
        status: 0,
        code: 'unreachable',
        message: `cannot reach the relay${relayUrl ? ` at ${relayUrl}` : ''} (${(e as Error).message})`,
        request: `GET ${path}`,
      },
      { cause: e },
    );
  }
}

/** Throws the relay's error for a non-2xx `res` to `method path`. */
export async function ensureOk(res: Response, path: string, method = 'GET'): Promise<Response> {
  if (res.ok) return res;
  throw relayApiErrorOf(`${method} ${path}`, res.status, await readBody(res).catch(() => null));
}

/**
 * The JSON body of a 2xx `res` if it fits `schema`, else a `bad_response` error saying what is wrong; the
 * relay's error for any other status.
 */
export async function jsonOf<S extends z.ZodType>(
  res: Response,
  path: string,
  schema: S,
): Promise<z.infer<S>> {
  await ensureOk(res, path);
  const body = await readBody(res);
  const wrong = mismatch(schema, body);
  if (wrong !== null)
    throw new RelayApiError({
      status: res.status,
      code: 'bad_response',
      message: `not the relay's answer: ${wrong}`,
      body,
      request: `GET ${path}`,
    });
  return body as z.infer<S>;
}

/** GET `path` as JSON that fits `schema` (see jsonOf). */
export async function getJson<S extends z.ZodType>(
  relayUrl: string,
  path: string,
  schema: S,
  o: RequestOptions = {},
): Promise<z.infer<S>> {
  return jsonOf(await get(relayUrl, path, { ...o, accept: 'application/json' }), path, schema);
}
