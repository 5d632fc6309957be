// HTTP helpers shared by the data provider and the checkpoint store: typed JSON errors and serving a file
// with a single-range `Range` header (RFC 9110 §14). Both resources are plain files on disk whose SHA-256
// we already know (the dataset manifest lists every shard's; a checkpoint's meta.json lists its files'), so
// the strong ETag is that hash and `If-None-Match` / `If-Range` need no extra I/O.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { ApiErrorBody } from '@meshtrain/client/relay-api';

export type { ApiErrorBody };

export function apiError(
  c: Context,
  status: ContentfulStatusCode,
  code: string,
  message: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Response {
  return c.json<ApiErrorBody>({ error: { code, message, ...extra } }, status, headers);
}

export type ByteRange = { start: number; end: number };

/**
 * Parses a `Range` header against a resource of `size` bytes. Returns the inclusive byte range, `null`
 * when the header is absent, or a string saying why it cannot be served. Only one range is supported:
 * multipart/byteranges answers are a complication no client of ours needs, and answering 416 (instead of
 * silently sending the whole file, which RFC 9110 would allow) tells a buggy client at once.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | null | string {
  if (header === undefined) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return `unsupported Range '${header}': send one range, bytes=START-END, bytes=START- or bytes=-N`;
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return `Range '${header}' names no bytes`;
  if (a === '') {
    // Suffix range: the last N bytes (all of them when N ≥ size).
    const n = Number(b);
    if (!Number.isSafeInteger(n) || n === 0 || size === 0)
      return `Range '${header}' selects no bytes of a ${size}-byte resource`;
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end)) return `Range '${header}' is out of range`;
  if (start >= size) return `Range '${header}' starts at or after the end of the ${size}-byte resource`;
  if (end < start) return `Range '${header}' ends before it starts`;
  return { start, end };
}

/** True when an `If-None-Match` header lists `etag` (or `*`). Weak comparison, as RFC 9110 asks for GET. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const bare = etag.replace(/^W\//, '');
  return header
    .split(',')
    .map((t) => t.trim().replace(/^W\//, ''))
    .some((t) => t === '*' || t === bare);
}

export interface ServeFileOptions {
  path: string;
  /** Strong validator, e.g. `"<sha256 hex>"` (with the quotes). */
  etag: string;
  contentType: string;
  cacheControl: string;
  /** Extra headers (e.g. X-Meshtrain-Sha256). */
  headers?: Record<string, string>;
}

/**
 * Answers GET/HEAD for one file with ETag, conditional requests and single-range support (200, 206, 304,
 * 416). The body is streamed from disk, so a multi-gigabyte shard never sits in memory.
 */
export async function serveFile(c: Context, o: ServeFileOptions): Promise<Response> {
  let size: number;
  try {
    const s = await stat(o.path);
    if (!s.isFile()) throw new Error('not a file');
    size = s.size;
  } catch {
    return apiError(
      c,
      404,
      'file_missing',
      `${o.path.split('/').pop() ?? 'file'} is not on the relay's disk`,
    );
  }
  const base: Record<string, string> = {
    'Accept-Ranges': 'bytes',
    ETag: o.etag,
    'Cache-Control': o.cacheControl,
    ...o.headers,
  };
  if (etagMatches(c.req.header('If-None-Match'), o.etag)) return c.body(null, 304, base);

  // If-Range: honour Range only when the client's copy is the one we have; otherwise send everything.
  const ifRange = c.req.header('If-Range');
  const rangeHeader = ifRange !== undefined && ifRange !== o.etag ? undefined : c.req.header('Range');
  const range = parseRange(rangeHeader, size);
  if (typeof range === 'string')
    return apiError(
      c,
      416,
      'range_not_satisfiable',
      range,
      { size },
      {
        ...base,
        'Content-Range': `bytes */${size}`,
      },
    );
  const start = range?.start ?? 0;
  const end = range?.end ?? size - 1;
  const length = size === 0 ? 0 : end - start + 1;
  const headers: Record<string, string> = {
    ...base,
    'Content-Type': o.contentType,
    'Content-Length': String(length),
  };
  if (range !== null) headers['Content-Range'] = `bytes ${start}-${end}/${size}`;
  const status = range === null ? 200 : 206;
  if (c.req.method === 'HEAD' || length === 0) return c.body(null, status, headers);
  const stream = Readable.toWeb(createReadStream(o.path, { start, end })) as ReadableStream<Uint8Array>;
  return c.body(stream, status, headers);
}
