import type { Stream } from '@libp2p/interface';
import {
  CheckpointDownloadError,
  HashMismatchError,
  InvalidArgumentError,
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
import { PieceDownload, type PieceDownloadOptions } from './checkpoint-pieces.ts';
import { ProtocolService } from './protocol-service.ts';
import { concatBytes } from '@noble/hashes/utils.js';
import { readU32, u32 } from './stream-io.ts';
import { DEFAULT_FETCH_TIMEOUT_MS, DEFAULT_MAX_CHECKPOINT_BYTES } from './defaults.ts';

export type { CheckpointProgress } from './checkpoint-pieces.ts';

/**
 * `/meshtrain/checkpoint/1.0.0`: a joiner downloads a checkpoint from several peers at once.
 *
 *   request  (downloader -> server): kind[1] | hash[32] | (kind 1 only) pieceIndex[4, u32 BE]
 *            kind 0 = MANIFEST (hash = root), kind 1 = PIECE (hash = root),
 *            kind 2 = MANIFEST_BY_CONTENT (hash = SHA-256 of the whole content)
 *   response (server -> downloader): status[1] (0 OK, 1 NOT_FOUND, 2 BAD_REQUEST)
 *                                    | if OK: length[4, u32 BE] | `length` bytes
 *
 * One request per stream (framing: ./request-response.ts). The downloader checks SHA-256(manifest) against the root it was given, the
 * manifest's own consistency, each piece's exact length and SHA-256 against the manifest, and finally the
 * whole-content hash; nothing unverified reaches the caller.
 *
 * Kind 2 exists for a downloader that knows only the content hash (a coordinator that records a whole-file
 * hash, not a root): the server answers with the manifest of the content it shares under that hash, and the
 * downloader checks the manifest's contentHash against the one it asked for, takes root = SHA-256(manifest)
 * and then fetches pieces by that root as usual. Adding a kind keeps kinds 0 and 1 unchanged; a server that
 * predates kind 2 answers BAD_REQUEST, which the downloader counts as that peer not having it.
 */
export const CHECKPOINT_PROTOCOL = '/meshtrain/checkpoint/1.0.0';

const KIND_MANIFEST = 0;
const KIND_PIECE = 1;
const KIND_MANIFEST_BY_CONTENT = 2;
/** 8 GiB at 1 MiB pieces is a 256 KiB manifest; 4 MiB leaves room without letting a peer flood us. */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

export interface CheckpointExchangeOptions {
  /** Per-request deadline (one manifest or one piece), default 30 s. */
  timeoutMs?: number;
  allowLimitedConnections?: boolean;
  maxInboundStreams?: number;
}

export interface DownloadCheckpointOptions extends PieceDownloadOptions {
  /** Largest checkpoint accepted (default 4 GiB). */
  maxBytes?: number;
  /** Deadline for one piece request (default: the exchange's timeoutMs). */
  pieceTimeoutMs?: number;
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

export class CheckpointExchange extends ProtocolService {
  private readonly timeoutMs: number;
  private readonly shared = new Map<string, Shared>();
  /** contentHash hex -> root hex of the newest share of that content (kind 2 lookups). */
  private readonly byContent = new Map<string, string>();

  constructor(host: ProtocolHost, options: CheckpointExchangeOptions = {}) {
    super(host, CHECKPOINT_PROTOCOL, options, 64);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
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
    this.byContent.set(toHex(manifest.contentHash), toHex(root));
    return root;
  }

  unshare(root: Uint8Array): void {
    const rootHex = toHex(root);
    const entry = this.shared.get(rootHex);
    this.shared.delete(rootHex);
    if (entry === undefined) return;
    const contentHex = toHex(entry.manifest.contentHash);
    if (this.byContent.get(contentHex) !== rootHex) return;
    // The same content may still be shared at another piece size: keep answering lookups with that one.
    const other = [...this.shared].find(([, s]) =>
      sameBytes(s.manifest.contentHash, entry.manifest.contentHash),
    );
    if (other === undefined) this.byContent.delete(contentHex);
    else this.byContent.set(contentHex, other[0]);
  }

  /** The manifest served under `root`, if it is shared. */
  manifestOf(root: Uint8Array): CheckpointManifest | undefined {
    return this.shared.get(toHex(root))?.manifest;
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
    return await this.downloadPieces(root, manifest, peers, failures, options);
  }

  /**
   * Downloads content known only by its SHA-256 (`contentHash`) from `peers` concurrently. Every peer is asked
   * for its manifest of that content at once (kind 2); a manifest counts only if its contentHash is the one
   * asked for, and its root is SHA-256 of the bytes received. Peers that share the content under the same
   * piece size answer the same manifest, so the root most peers answered wins and pieces are pulled from all
   * of those peers as in `download`; the assembled bytes are checked against `contentHash` at the end.
   */
  async downloadByContentHash(
    contentHash: Uint8Array,
    peers: readonly PeerTarget[],
    options: DownloadCheckpointOptions = {},
  ): Promise<DownloadedCheckpoint> {
    assertAddress(contentHash, 'checkpoint content hash');
    const contentHex = toHex(contentHash);
    if (options.expectedContentHash !== undefined && !sameBytes(options.expectedContentHash, contentHash)) {
      throw new InvalidArgumentError('expectedContentHash differs from the content hash being downloaded');
    }
    const failures: PeerFailure[] = [];
    const answers = await Promise.all(
      peers.map(async (peer) => {
        try {
          const bytes = await this.request(
            peer,
            KIND_MANIFEST_BY_CONTENT,
            contentHash,
            0,
            MAX_MANIFEST_BYTES,
            undefined,
            options,
          );
          const manifest = decodeManifest(bytes);
          if (!sameBytes(manifest.contentHash, contentHash)) {
            throw new HashMismatchError(
              'checkpoint manifest content hash',
              contentHex,
              toHex(manifest.contentHash),
            );
          }
          return { peer, manifest, root: sha256Bytes(bytes) };
        } catch (err) {
          failures.push({ peer: describeTarget(peer), error: toError(err) });
          return undefined;
        }
      }),
    );
    const byRoot = new Map<string, { root: Uint8Array; manifest: CheckpointManifest; peers: PeerTarget[] }>();
    for (const a of answers) {
      if (a === undefined) continue;
      const key = toHex(a.root);
      const group = byRoot.get(key) ?? { root: a.root, manifest: a.manifest, peers: [] };
      group.peers.push(a.peer);
      byRoot.set(key, group);
    }
    const best = [...byRoot.values()].sort((x, y) => y.peers.length - x.peers.length)[0];
    if (best === undefined) {
      throw new CheckpointDownloadError(
        `no peer served a manifest for content ${contentHex}: ` +
          failures.map((f) => `${f.peer}: ${f.error.message}`).join('; '),
        failures,
        -1,
      );
    }
    return await this.downloadPieces(best.root, best.manifest, best.peers, failures, {
      ...options,
      expectedContentHash: contentHash,
    });
  }

  /** Fetches and verifies the pieces of a verified `manifest` (whose SHA-256 is `root`) from `peers`. */
  private async downloadPieces(
    root: Uint8Array,
    m: CheckpointManifest,
    peers: readonly PeerTarget[],
    failures: PeerFailure[],
    options: DownloadCheckpointOptions,
  ): Promise<DownloadedCheckpoint> {
    const rootHex = toHex(root);
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_CHECKPOINT_BYTES;
    const pieceTimeoutMs = options.pieceTimeoutMs ?? this.timeoutMs;
    if (m.totalBytes > maxBytes) throw new TooLargeError(`checkpoint ${rootHex}`, m.totalBytes, maxBytes);
    const pieces = new PieceDownload(rootHex, m, peers, failures, options, (target, index, len) =>
      this.request(target, KIND_PIECE, root, index, len, len, { ...options, timeoutMs: pieceTimeoutMs }),
    );
    const bytes = await pieces.run();
    return { bytes, manifest: m, piecesByPeer: pieces.piecesByPeer, failures };
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
      (kind === KIND_MANIFEST
        ? 'checkpoint manifest'
        : kind === KIND_MANIFEST_BY_CONTENT
          ? `checkpoint manifest for content ${toHex(root).slice(0, 16)}…`
          : `checkpoint piece ${index}`) + ` from ${describeTarget(target)}`;
    const req =
      kind === KIND_PIECE
        ? concatBytes(Uint8Array.of(kind), root, u32(index))
        : concatBytes(Uint8Array.of(kind), root);
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

  protected async serve(stream: Stream): Promise<void> {
    await serveRequest(stream, {
      what: 'checkpoint request',
      requestTimeoutMs: 10_000,
      lengthBytes: 4,
      readRequest: async (reader) => {
        const kind = (await reader.readExact(1, 'checkpoint request kind'))[0];
        const root = await reader.readExact(ADDRESS_BYTES, 'checkpoint request root');
        if (kind === KIND_MANIFEST) return { root, index: undefined };
        if (kind === KIND_MANIFEST_BY_CONTENT) {
          // Resolve to the root here; an unknown content hash maps to no root and is answered NOT_FOUND.
          return { root: this.byContent.get(toHex(root)) ?? '', index: undefined };
        }
        if (kind !== KIND_PIECE) return BAD_REQUEST;
        return { root, index: readU32(await reader.readExact(4, 'checkpoint request index')) };
      },
      respond: ({ root, index }) => {
        const entry = this.shared.get(typeof root === 'string' ? root : toHex(root));
        if (entry === undefined) return undefined;
        if (index === undefined) return entry.manifestBytes;
        if (index >= entry.manifest.pieceHashes.length) return undefined;
        const start = index * entry.manifest.pieceSize;
        return entry.bytes.subarray(start, start + pieceLength(entry.manifest, index));
      },
    });
  }
}
