// One GET against the relay's HTTP API: network failures, error replies and replies of the wrong shape all
// become a RelayApiError; an abort stays the AbortError the caller asked for.
import { readBody, RelayApiError, relayApiErrorOf } from './errors.ts';

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

/** Throws the relay's error for a non-2xx `res`. */
export async function ensureOk(res: Response, path: string): Promise<Response> {
  if (res.ok) return res;
  throw relayApiErrorOf(`GET ${path}`, res.status, await readBody(res).catch(() => null));
}

/**
 * The JSON body of a 2xx `res` if `check` accepts it (null), else a `bad_response` error saying what is
 * wrong; the relay's error for any other status.
 */
export async function jsonOf<T>(
  res: Response,
  path: string,
  check: (body: unknown) => string | null,
): Promise<T> {
  await ensureOk(res, path);
  const body = await readBody(res);
  const wrong = check(body);
  if (wrong !== null)
    throw new RelayApiError({
      status: res.status,
      code: 'bad_response',
      message: `not the relay's answer: ${wrong}`,
      body,
      request: `GET ${path}`,
    });
  return body as T;
}

/** GET `path` as JSON of the shape `check` accepts (see jsonOf). */
export async function getJson<T>(
  relayUrl: string,
  path: string,
  check: (body: unknown) => string | null,
  o: RequestOptions = {},
): Promise<T> {
  return jsonOf<T>(await get(relayUrl, path, { ...o, accept: 'application/json' }), path, check);
}
