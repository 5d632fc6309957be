import type { Stream } from '@libp2p/interface';
import type { BlobStore } from './blob-store.ts';
import { FetchFailedError, HashMismatchError, toError, InvalidArgumentError } from './errors.ts';
import type { PeerFailure } from './errors.ts';
import { ADDRESS_BYTES, assertAddress, blobAddress, sameBytes, toHex } from './hash.ts';
import { describeTarget } from './host.ts';
import type { PeerTarget, ProtocolHost } from './host.ts';
import { ProtocolService } from './protocol-service.ts';
import {
  STATUS_BAD_REQUEST,
  STATUS_NOT_FOUND,
  STATUS_OK,
  requestResponse,
  serveRequest,
} from './request-response.ts';
import { DEFAULT_FETCH_TIMEOUT_MS, DEFAULT_MAX_BLOB_BYTES, DEFAULT_REQUEST_TIMEOUT_MS } from './defaults.ts';

/**
 * `/meshtrain/blob/1.0.0`: fetch one content-addressed blob.
 *
 *   request  (fetcher -> server): address[32]                       SHA-256 of the wanted bytes
 *   response (server -> fetcher): status[1]                         0 OK, 1 NOT_FOUND, 2 BAD_REQUEST
 *                                 if OK: length[8, u64 big-endian] then `length` raw bytes
 *
 * One request per stream (framing: ./request-response.ts); the server closes its side after the last byte. The fetcher checks the length
 * against its own limit before reading the body and SHA-256(body) against the address before returning it:
 * a peer can waste our time but cannot make us accept bytes that are not the ones asked for.
 */
export const BLOB_PROTOCOL = '/meshtrain/blob/1.0.0';

export const BLOB_STATUS_OK = STATUS_OK;
export const BLOB_STATUS_NOT_FOUND = STATUS_NOT_FOUND;
export const BLOB_STATUS_BAD_REQUEST = STATUS_BAD_REQUEST;

export interface BlobExchangeOptions {
  store: BlobStore;
  /** Default largest blob a fetch accepts, in bytes (64 MiB). Per-call `maxBytes` overrides it. */
  maxBlobBytes?: number;
  /** Default deadline for one attempt against one peer, request to last byte (30 s). */
  timeoutMs?: number;
  /** How long the server waits for the 32-byte request before dropping the stream (10 s). */
  requestTimeoutMs?: number;
  /** Serve and fetch over relayed (limited) connections too. Default true: the relay is the guaranteed path. */
  allowLimitedConnections?: boolean;
  /** Concurrent inbound blob streams per connection (default 32). */
  maxInboundStreams?: number;
}

export interface FetchBlobOptions {
  maxBytes?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
  allowLimited?: boolean;
  /** Keep the verified bytes in our store so we can serve them on (default true). */
  store?: boolean;
  onProgress?: (received: number, total: number) => void;
}

export interface FetchedBlob {
  bytes: Uint8Array;
  /** Peer the bytes came from ('local' when the store already had them). */
  peer: string;
  /** Remote multiaddr of the connection used (empty when local). */
  remoteAddr: string;
  /** Whether that connection was relayed/limited. */
  limited: boolean;
  /** Candidates that were tried first and failed, in order, with typed errors. */
  failures: PeerFailure[];
}

export class BlobExchange extends ProtocolService {
  readonly store: BlobStore;
  private readonly maxBlobBytes: number;
  private readonly timeoutMs: number;
  private readonly requestTimeoutMs: number;

  constructor(host: ProtocolHost, options: BlobExchangeOptions) {
    super(host, BLOB_PROTOCOL, options, 32);
    this.store = options.store;
    this.maxBlobBytes = options.maxBlobBytes ?? DEFAULT_MAX_BLOB_BYTES;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /** Stores `bytes` so peers can fetch them; returns the address (SHA-256 of the bytes). */
  async put(bytes: Uint8Array): Promise<Uint8Array> {
    return await this.store.put(bytes);
  }

  /**
   * Fetches `address` from the first candidate that delivers verified bytes, trying them in order; each
   * failure (not found, timeout, too large, truncated, wrong hash, dial error) moves on to the next one.
   * Throws FetchFailedError (with every peer's typed error) when none delivers.
   */
  async fetch(
    address: Uint8Array,
    candidates: readonly PeerTarget[],
    options: FetchBlobOptions = {},
  ): Promise<FetchedBlob> {
    assertAddress(address);
    const local = await this.store.get(address);
    if (local !== undefined && sameBytes(blobAddress(local), address)) {
      return { bytes: local, peer: 'local', remoteAddr: '', limited: false, failures: [] };
    }
    const failures: PeerFailure[] = [];
    for (const candidate of candidates) {
      if (options.signal?.aborted === true) break;
      try {
        const got = await this.fetchOne(candidate, address, options);
        if (options.store ?? true) await this.store.put(got.bytes);
        return { ...got, failures };
      } catch (err) {
        failures.push({ peer: describeTarget(candidate), error: toError(err) });
      }
    }
    throw new FetchFailedError(`blob ${toHex(address)}`, failures);
  }

  /** Fetches from one peer; throws the typed error of that attempt. */
  async fetchFrom(
    target: PeerTarget,
    address: Uint8Array,
    options: FetchBlobOptions = {},
  ): Promise<Uint8Array> {
    assertAddress(address);
    return (await this.fetchOne(target, address, options)).bytes;
  }

  private async fetchOne(
    target: PeerTarget,
    address: Uint8Array,
    options: FetchBlobOptions,
  ): Promise<Omit<FetchedBlob, 'failures'>> {
    const maxBytes = options.maxBytes ?? this.maxBlobBytes;
    if (!(maxBytes >= 0)) throw new InvalidArgumentError('maxBytes must be >= 0');
    const what = `blob ${toHex(address).slice(0, 16)}… from ${describeTarget(target)}`;
    const { body, connection } = await requestResponse(this.host, target, BLOB_PROTOCOL, address, {
      what,
      notFound: `blob ${toHex(address)}`,
      lengthBytes: 8,
      maxBytes,
      timeoutMs: options.timeoutMs ?? this.timeoutMs,
      signal: options.signal,
      allowLimited: options.allowLimited ?? this.allowLimited,
      onProgress: options.onProgress,
      check: (bytes) => {
        const actual = blobAddress(bytes);
        if (!sameBytes(actual, address)) throw new HashMismatchError(what, toHex(address), toHex(actual));
      },
    });
    return {
      bytes: body,
      peer: connection.remotePeer.toString(),
      remoteAddr: connection.remoteAddr.toString(),
      limited: connection.limits !== undefined,
    };
  }

  protected async serve(stream: Stream): Promise<void> {
    await serveRequest(stream, {
      what: 'blob request',
      requestTimeoutMs: this.requestTimeoutMs,
      lengthBytes: 8,
      readRequest: (reader) => reader.readExact(ADDRESS_BYTES, 'blob request'),
      respond: (address) => this.store.get(address),
    });
  }
}
