// Why a relay request failed, as one typed error: the relay's own `{error: {code, message}}` when it sent one,
// else what went wrong on the way (unreachable, not JSON, not the shape the API documents).

/** Codes this module assigns; any other code is the relay's (PROTOCOL.md lists them, e.g. `unknown_run`). */
export type RelayApiFailure =
  /** No HTTP answer at all (connection refused, DNS, CORS). `status` is 0. */
  | 'unreachable'
  /** A non-2xx answer without the relay's JSON error body. */
  | 'http_error'
  /** A 2xx answer that is not what the route documents. */
  | 'bad_response';

export class RelayApiError extends Error {
  /** HTTP status, 0 when the relay could not be reached. */
  readonly status: number;
  /** The relay's error code, or a RelayApiFailure. */
  readonly code: string;
  /** The reply body (parsed JSON, text, or null). */
  readonly body: unknown;
  /** The request, e.g. `GET /api/runs/default`. */
  readonly request: string;

  constructor(
    o: { status: number; code: string; message: string; body?: unknown; request: string },
    options?: ErrorOptions,
  ) {
    super(`${o.request}: ${o.status === 0 ? '' : `${o.status} `}${o.code}: ${o.message}`, options);
    this.name = 'RelayApiError';
    this.status = o.status;
    this.code = o.code;
    this.body = o.body ?? null;
    this.request = o.request;
  }
}

/** Reads a reply body as JSON when it is JSON, else as text (null when empty). */
export async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** The error for a non-2xx reply: the relay's code and message when the body carries them. */
export function relayApiErrorOf(request: string, status: number, body: unknown): RelayApiError {
  const e = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const relays = typeof e?.code === 'string' && typeof e.message === 'string';
  return new RelayApiError({
    status,
    code: relays ? (e.code as string) : 'http_error',
    message: relays
      ? (e.message as string)
      : typeof body === 'string' && body !== ''
        ? body.slice(0, 300)
        : 'request failed',
    body,
    request,
  });
}
