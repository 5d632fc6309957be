import type { Stream } from '@libp2p/interface';
import {
  CheckpointDownloadError,
  HashMismatchError,
  NotFoundError,
  TooLargeError,
  toError,
} from './errors.ts';
import type { PeerFailure } from './errors.ts';
import { ADDRESS_BYTES, assertAddress, sameBytes, sha256Bytes, toHex } from './hash.ts';
import { describeTarget } from './host.ts';
import type { PeerTarget, ProtocolHost } from './host.ts';
import {
  buildManifest,
  decodeManifest,
  encodeManifest,
  pieceLength,
  DEFAULT_PIECE_SIZE,
} from './checkpoint-manifest.ts';
import type { CheckpointManifest } from './checkpoint-manifest.ts';
import { BAD_REQUEST, requestResponse, serveRequest } from './request-response.ts';
import { concatBytes, readU32, u32 } from './stream-io.ts';

/**
 * `/meshtrain/checkpoint/1.0.0`: a joiner downloads a checkpoint from several peers at once.
 *
 *   request  (downloader -> server): kind[1] | rootHash[32] | (kind 1 only) pieceIndex[4, u32 BE]
 *            kind 0 = MANIFEST, kind 1 = PIECE
 *   response (server -> downloader): status[1] (0 OK, 1 NOT_FOUND, 2 BAD_REQUEST)
 *                                    | if OK: length[4, u32 BE] | `length` bytes
 *
 * One request per stream (framing: ./request-response.ts). The downloader checks SHA-256(manifest) against the root it was given, the
 * manifest's own consistency, each piece's exact length and SHA-256 against the manifest, and finally the
 * whole-content hash; nothing unverified reaches the caller.
 */
export const CHECKPOINT_PROTOCOL = '/meshtrain/checkpoint/1.0.0';

const KIND_MANIFEST = 0;
const KIND_PIECE = 1;
/** 8 GiB at 1 MiB pieces is a 256 KiB manifest; 4 MiB leaves room without letting a peer flood us. */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

export interface CheckpointExchangeOptions {
  /** Per-request deadline (one manifest or one piece), default 30 s. */
  timeoutMs?: number;
  allowLimitedConnections?: boolean;
  maxInboundStreams?: number;
}

export interface CheckpointProgress {
  piecesDone: number;
  piecesTotal: number;
  bytesDone: number;
  totalBytes: number;
  /** Peer the last piece came from. */
  peer: string;
}

export interface DownloadCheckpointOptions {
  /** Largest checkpoint accepted (default 4 GiB). */
  maxBytes?: number;
  /** In-flight piece requests per peer (default 2). */
  concurrencyPerPeer?: number;
  /** Deadline for one piece request (default: the exchange's timeoutMs). */
  pieceTimeoutMs?: number;
  /** Failures after which a peer is dropped from the download (default 3; a wrong hash drops it at once). */
  maxPeerFailures?: number;
  /** Also require SHA-256 of the assembled bytes to equal this (e.g. a whole-file hash the coordinator holds). */
  expectedContentHash?: Uint8Array;
  onProgress?: (progress: CheckpointProgress) => void;
  signal?: AbortSignal;
  allowLimited?: boolean;
}

export interface DownloadedCheckpoint {
  bytes: Uint8Array;
  manifest: CheckpointManifest;
  /** Number of pieces delivered by each peer (peer id or target string). */
  piecesByPeer: Map<string, number>;
  /** Failed attempts that were retried elsewhere. */
  failures: PeerFailure[];
}

interface Shared {
  manifestBytes: Uint8Array;
  manifest: CheckpointManifest;
  bytes: Uint8Array;
}

export class CheckpointExchange {
  private readonly host: ProtocolHost;
  private readonly timeoutMs: number;
  private readonly allowLimited: boolean;
  private readonly maxInboundStreams: number;
  private readonly shared = new Map<string, Shared>();
  private started = false;

  constructor(host: ProtocolHost, options: CheckpointExchangeOptions = {}) {
    this.host = host;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.allowLimited = options.allowLimitedConnections ?? true;
    this.maxInboundStreams = options.maxInboundStreams ?? 64;
  }

  async start(): Promise<void> {
    if (this.started) return;
    await this.host.handle(CHECKPOINT_PROTOCOL, (stream) => this.serve(stream), {
      maxInboundStreams: this.maxInboundStreams,
      runOnLimitedConnection: this.allowLimited,
    });
    this.started = true;
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    await this.host.unhandle(CHECKPOINT_PROTOCOL);
  }

  /**
   * Serves `bytes` as a checkpoint and returns its root hash. The bytes are kept by reference (not copied):
   * do not mutate them while shared.
   */
  share(bytes: Uint8Array, pieceSize = DEFAULT_PIECE_SIZE): Uint8Array {
    const manifest = buildManifest(bytes, pieceSize);
    const manifestBytes = encodeManifest(manifest);
    const root = sha256Bytes(manifestBytes);
    this.shared.set(toHex(root), { manifestBytes, manifest, bytes });
    return root;
  }

  unshare(root: Uint8Array): void {
    this.shared.delete(toHex(root));
  }

  /** Root hashes currently served. */
  sharedRoots(): Uint8Array[] {
    return [...this.shared.values()].map((s) => sha256Bytes(s.manifestBytes));
  }

  /**
   * Downloads the checkpoint `root` from `peers` concurrently. The manifest comes from the first peer that
   * has one matching `root`; pieces are then pulled from a shared queue by `concurrencyPerPeer` workers per
   * peer, so fast peers take more pieces (work stealing) and a failed piece goes back to the front of the
   * queue for another peer. A peer that serves a wrong hash is dropped at once; one that errors
   * `maxPeerFailures` times is dropped too. Fails with CheckpointDownloadError when no peer is left.
   */
  async download(
    root: Uint8Array,
    peers: readonly PeerTarget[],
    options: DownloadCheckpointOptions = {},
  ): Promise<DownloadedCheckpoint> {
    assertAddress(root, 'checkpoint root');
    const rootHex = toHex(root);
    const failures: PeerFailure[] = [];
    const maxBytes = options.maxBytes ?? 4 * 1024 * 1024 * 1024;
    const pieceTimeoutMs = options.pieceTimeoutMs ?? this.timeoutMs;

    let manifest: CheckpointManifest | undefined;
    for (const peer of peers) {
      if (options.signal?.aborted === true) break;
      try {
        const bytes = await this.request(
          peer,
          KIND_MANIFEST,
          root,
          0,
          MAX_MANIFEST_BYTES,
          undefined,
          options,
        );
        const actual = sha256Bytes(bytes);
        if (!sameBytes(actual, root))
          throw new HashMismatchError('checkpoint manifest', rootHex, toHex(actual));
        manifest = decodeManifest(bytes);
        break;
      } catch (err) {
        failures.push({ peer: describeTarget(peer), error: toError(err) });
      }
    }
    if (manifest === undefined) {
      throw new CheckpointDownloadError(
        `no peer served the manifest of checkpoint ${rootHex}: ` +
          failures.map((f) => `${f.peer}: ${f.error.message}`).join('; '),
        failures,
        -1,
      );
    }
    if (manifest.totalBytes > maxBytes)
      throw new TooLargeError(`checkpoint ${rootHex}`, manifest.totalBytes, maxBytes);

    const m = manifest;
    const total = m.pieceHashes.length;
    const out = new Uint8Array(m.totalBytes);
    const queue: number[] = Array.from({ length: total }, (_, i) => i);
    const piecesByPeer = new Map<string, number>();
    const attempts = new Array<number>(total).fill(0);
    const maxPeerFailures = options.maxPeerFailures ?? 3;
    let piecesDone = 0;
    let bytesDone = 0;
    let inFlight = 0;
    let fatal: Error | undefined;
    // Idle workers wait here until a piece is re-queued or the download ends.
    let wake: (() => void) | undefined;
    let wakePromise = new Promise<void>((r) => (wake = r));
    const notify = (): void => {
      const w = wake;
      wakePromise = new Promise<void>((r) => (wake = r));
      w?.();
    };
    const finished = (): boolean =>
      piecesDone === total || fatal !== undefined || options.signal?.aborted === true;

    const peerStates = peers.map((target) => ({
      target,
      label: describeTarget(target),
      failures: 0,
      dropped: false,
    }));
    const livePeers = (): number => peerStates.filter((p) => !p.dropped).length;

    const worker = async (peer: (typeof peerStates)[number]): Promise<void> => {
      while (!finished() && !peer.dropped) {
        const index = queue.shift();
        if (index === undefined) {
          if (inFlight === 0) return; // nothing queued and nothing that could come back
          await wakePromise;
          continue;
        }
        inFlight++;
        attempts[index] = (attempts[index] ?? 0) + 1;
        try {
          const len = pieceLength(m, index);
          const bytes = await this.request(peer.target, KIND_PIECE, root, index, len, len, {
            ...options,
            timeoutMs: pieceTimeoutMs,
          });
          const actual = sha256Bytes(bytes);
          const expected = m.pieceHashes[index] ?? new Uint8Array(ADDRESS_BYTES);
          if (!sameBytes(actual, expected)) {
            throw new HashMismatchError(`checkpoint piece ${index}`, toHex(expected), toHex(actual));
          }
          out.set(bytes, index * m.pieceSize);
          piecesDone++;
          bytesDone += bytes.length;
          peer.failures = 0;
          piecesByPeer.set(peer.label, (piecesByPeer.get(peer.label) ?? 0) + 1);
          options.onProgress?.({
            piecesDone,
            piecesTotal: total,
            bytesDone,
            totalBytes: m.totalBytes,
            peer: peer.label,
          });
        } catch (err) {
          const error = toError(err);
          failures.push({ peer: peer.label, error });
          queue.unshift(index);
          peer.failures++;
          // A wrong hash or a missing checkpoint will not get better with retries from the same peer.
          if (
            error instanceof HashMismatchError ||
            error instanceof NotFoundError ||
            peer.failures >= maxPeerFailures
          ) {
            peer.dropped = true;
          }
          // Bound the total work: a piece nobody can deliver after every peer tried it twice is fatal.
          if ((attempts[index] ?? 0) > 2 * peerStates.length) {
            fatal = new Error(`piece ${index} failed ${attempts[index]} times`);
          }
        } finally {
          inFlight--;
          notify();
        }
      }
    };

    const perPeer = Math.max(1, options.concurrencyPerPeer ?? 2);
    const workers: Promise<void>[] = [];
    for (const peer of peerStates) for (let i = 0; i < perPeer; i++) workers.push(worker(peer));
    // A worker whose peer is dropped exits; wake the others so they re-check the queue.
    await Promise.all(workers);

    if (piecesDone !== total) {
      const reason =
        options.signal?.aborted === true
          ? 'aborted'
          : (fatal?.message ??
            (livePeers() === 0 ? 'every peer failed or was dropped' : 'no peer could serve the rest'));
      throw new CheckpointDownloadError(
        `checkpoint ${rootHex}: ${total - piecesDone} of ${total} pieces missing (${reason}); ` +
          `last errors: ${failures
            .slice(-3)
            .map((f) => `${f.peer}: ${f.error.message}`)
            .join('; ')}`,
        failures,
        total - piecesDone,
      );
    }
    const content = sha256Bytes(out);
    if (!sameBytes(content, m.contentHash)) {
      // Every piece matched the verified manifest, so this means the manifest itself was built wrongly.
      throw new HashMismatchError(`checkpoint ${rootHex} content`, toHex(m.contentHash), toHex(content));
    }
    if (options.expectedContentHash !== undefined && !sameBytes(content, options.expectedContentHash)) {
      throw new HashMismatchError(
        `checkpoint ${rootHex} content`,
        toHex(options.expectedContentHash),
        toHex(content),
      );
    }
    return { bytes: out, manifest: m, piecesByPeer, failures };
  }

  /** One request/response. `exact` pins the response length (pieces); `max` bounds it (manifest). */
  private async request(
    target: PeerTarget,
    kind: number,
    root: Uint8Array,
    index: number,
    max: number,
    exact: number | undefined,
    options: { timeoutMs?: number; signal?: AbortSignal; allowLimited?: boolean },
  ): Promise<Uint8Array> {
    const what =
      (kind === KIND_MANIFEST ? 'checkpoint manifest' : `checkpoint piece ${index}`) +
      ` from ${describeTarget(target)}`;
    const req =
      kind === KIND_MANIFEST
        ? concatBytes(Uint8Array.of(kind), root)
        : concatBytes(Uint8Array.of(kind), root, u32(index));
    const { body } = await requestResponse(this.host, target, CHECKPOINT_PROTOCOL, req, {
      what,
      notFound: what,
      lengthBytes: 4,
      maxBytes: max,
      exactBytes: exact,
      timeoutMs: options.timeoutMs ?? this.timeoutMs,
      signal: options.signal,
      allowLimited: options.allowLimited ?? this.allowLimited,
    });
    return body;
  }

  private async serve(stream: Stream): Promise<void> {
    await serveRequest(stream, {
      what: 'checkpoint request',
      requestTimeoutMs: 10_000,
      lengthBytes: 4,
      readRequest: async (reader) => {
        const kind = (await reader.readExact(1, 'checkpoint request kind'))[0];
        const root = await reader.readExact(ADDRESS_BYTES, 'checkpoint request root');
        if (kind === KIND_MANIFEST) return { root, index: undefined };
        if (kind !== KIND_PIECE) return BAD_REQUEST;
        return { root, index: readU32(await reader.readExact(4, 'checkpoint request index')) };
      },
      respond: ({ root, index }) => {
        const entry = this.shared.get(toHex(root));
        if (entry === undefined) return undefined;
        if (index === undefined) return entry.manifestBytes;
        if (index >= entry.manifest.pieceHashes.length) return undefined;
        const start = index * entry.manifest.pieceSize;
        return entry.bytes.subarray(start, start + pieceLength(entry.manifest, index));
      },
    });
  }
}
