import type { Connection, Stream } from '@libp2p/interface';
import { NotFoundError, ProtocolError, TooLargeError, toError } from './errors.ts';
import { openProtocolStream } from './host.ts';
import type { PeerTarget, ProtocolHost } from './host.ts';
import { concatBytes } from '@noble/hashes/utils.js';
import { Deadline, StreamReader, readU32, readU64, u32, u64, writeAll } from './stream-io.ts';

/**
 * The request/response framing our stream protocols (blob, checkpoint) share, one request per stream:
 *
 *   request  (client -> server): protocol-specific bytes, then the client half-closes
 *   response (server -> client): status[1] (0 OK, 1 NOT_FOUND, 2 BAD_REQUEST)
 *                                | if OK: length[LENGTH_BYTES, big-endian] | `length` bytes
 *
 * The protocols differ only in the request bytes and the width of the length (the blob protocol's is 8 bytes,
 * the checkpoint protocol's 4), so both sides of that exchange live here once: the client checks the
 * announced length against its limit before allocating, and either side resets the stream on any failure.
 */
export const STATUS_OK = 0;
export const STATUS_NOT_FOUND = 1;
export const STATUS_BAD_REQUEST = 2;

/** Width of the response's length field, in bytes. */
export type LengthBytes = 4 | 8;

export interface RequestOptions {
  /** Names the request in errors ("blob 1234… from PEER"). */
  what: string;
  /** The subject of the NotFoundError a NOT_FOUND status becomes. */
  notFound: string;
  lengthBytes: LengthBytes;
  /** Largest response body accepted. */
  maxBytes: number;
  /** When set, the body must be exactly this long (checked after `maxBytes`). */
  exactBytes?: number;
  /** Deadline for the whole exchange, request to last byte. */
  timeoutMs: number;
  signal?: AbortSignal;
  allowLimited: boolean;
  onProgress?: (received: number, total: number) => void;
  /** Checks the body (e.g. its hash); what it throws fails the exchange like a protocol error, stream reset. */
  check?: (body: Uint8Array) => void;
}

/** Sends `request` on a new `protocol` stream to `target` and returns the verified-length response body. */
export async function requestResponse(
  host: ProtocolHost,
  target: PeerTarget,
  protocol: string,
  request: Uint8Array,
  options: RequestOptions,
): Promise<{ body: Uint8Array; connection: Connection }> {
  const { what } = options;
  const deadline = new Deadline(what, options.timeoutMs, options.signal);
  let stream: Stream | undefined;
  try {
    let connection: Connection;
    ({ stream, connection } = await openProtocolStream(host, target, protocol, {
      signal: deadline.signal,
      allowLimited: options.allowLimited,
    }));
    deadline.attach(stream);
    const reader = new StreamReader(stream, deadline.signal);
    await writeAll(stream, request, { signal: deadline.signal });
    // Half-close: tells the server the request is complete; we keep reading the response.
    await stream.close({ signal: deadline.signal });
    const status = (await reader.readExact(1, `${what} status`))[0];
    if (status === STATUS_NOT_FOUND) throw new NotFoundError(options.notFound);
    if (status !== STATUS_OK) throw new ProtocolError(`${what}: server answered status ${status}`);
    const lengthField = await reader.readExact(options.lengthBytes, `${what} length`);
    const length = options.lengthBytes === 8 ? readU64(lengthField) : readU32(lengthField);
    if (length > options.maxBytes) throw new TooLargeError(what, length, options.maxBytes);
    if (options.exactBytes !== undefined && length !== options.exactBytes) {
      throw new ProtocolError(`${what}: ${length} bytes announced, the manifest says ${options.exactBytes}`);
    }
    const body = new Uint8Array(length);
    const onProgress = options.onProgress;
    await reader.readInto(body, what, onProgress && ((n) => onProgress(n, length)));
    options.check?.(body);
    return { body, connection };
  } catch (err) {
    // Whatever went wrong, this stream is done: reset it so neither side keeps sending.
    stream?.abort(toError(err));
    return deadline.rethrow(err);
  } finally {
    deadline.clear();
  }
}

/** Returned by a server's `readRequest` for a request it does not understand: answered BAD_REQUEST. */
export const BAD_REQUEST = Symbol('bad request');

export interface ServeOptions<T> {
  /** Names the request in errors ("blob request"). */
  what: string;
  /** How long the client may take to send the request; the response is not bounded by it. */
  requestTimeoutMs: number;
  lengthBytes: LengthBytes;
  /** Reads the request from the stream (under the request deadline). */
  readRequest: (reader: StreamReader) => Promise<T | typeof BAD_REQUEST>;
  /** The body to answer with, or undefined for NOT_FOUND. */
  respond: (request: T) => Promise<Uint8Array | undefined> | Uint8Array | undefined;
}

/** Serves one request on an inbound stream; any failure resets the stream. */
export async function serveRequest<T>(stream: Stream, options: ServeOptions<T>): Promise<void> {
  const deadline = new Deadline(options.what, options.requestTimeoutMs);
  deadline.attach(stream);
  try {
    const request = await options.readRequest(new StreamReader(stream, deadline.signal));
    deadline.clear(); // the response may legitimately take longer than the request deadline
    const body = request === BAD_REQUEST ? undefined : await options.respond(request);
    if (body === undefined) {
      await writeAll(stream, Uint8Array.of(request === BAD_REQUEST ? STATUS_BAD_REQUEST : STATUS_NOT_FOUND));
    } else {
      const length = options.lengthBytes === 8 ? u64(body.length) : u32(body.length);
      await writeAll(stream, concatBytes(Uint8Array.of(STATUS_OK), length));
      await writeAll(stream, body);
    }
    await stream.close();
  } catch (err) {
    stream.abort(toError(err));
  } finally {
    deadline.clear();
  }
}
