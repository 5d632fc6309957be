// The piece phase of a checkpoint download: pieces of a verified manifest pulled from several peers at once
// through a shared queue (work stealing), each checked against the manifest before it is kept, and the whole
// content checked at the end. How one piece is requested is the caller's (checkpoint-exchange.ts).
import { CheckpointDownloadError, HashMismatchError, NotFoundError, toError } from './errors.ts';
import type { PeerFailure } from './errors.ts';
import { ADDRESS_BYTES, sameBytes, sha256Bytes, toHex } from './hash.ts';
import { describeTarget } from './host.ts';
import type { PeerTarget } from './host.ts';
import { pieceLength } from './checkpoint-manifest.ts';
import type { CheckpointManifest } from './checkpoint-manifest.ts';
import { DEFAULT_MAX_PEER_FAILURES, DEFAULT_PIECE_CONCURRENCY_PER_PEER } from './defaults.ts';

export interface CheckpointProgress {
  piecesDone: number;
  piecesTotal: number;
  bytesDone: number;
  totalBytes: number;
  /** Peer the last piece came from. */
  peer: string;
}

export interface PieceDownloadOptions {
  /** In-flight piece requests per peer (default 2). */
  concurrencyPerPeer?: number;
  /** Failures after which a peer is dropped from the download (default 3; a wrong hash drops it at once). */
  maxPeerFailures?: number;
  /** Also require SHA-256 of the assembled bytes to equal this (e.g. a whole-file hash the coordinator holds). */
  expectedContentHash?: Uint8Array;
  onProgress?: (progress: CheckpointProgress) => void;
  signal?: AbortSignal;
}

/** Requests piece `index` (exactly `length` bytes) from `target`; throws the typed error of the attempt. */
export type FetchPiece = (target: PeerTarget, index: number, length: number) => Promise<Uint8Array>;

interface PeerState {
  target: PeerTarget;
  label: string;
  failures: number;
  dropped: boolean;
}

export class PieceDownload {
  readonly out: Uint8Array;
  readonly piecesByPeer = new Map<string, number>();
  private readonly total: number;
  private readonly queue: number[];
  private readonly attempts: number[];
  private readonly peers: PeerState[];
  private piecesDone = 0;
  private bytesDone = 0;
  private inFlight = 0;
  private fatal: Error | undefined;
  // Idle workers wait here until a piece is re-queued or the download ends.
  private wake: (() => void) | undefined;
  private wakePromise: Promise<void>;

  private readonly rootHex: string;
  private readonly m: CheckpointManifest;
  private readonly failures: PeerFailure[];
  private readonly options: PieceDownloadOptions;
  private readonly fetchPiece: FetchPiece;

  /** `failures` collects every failed attempt (the caller's list, which may already hold manifest failures). */
  constructor(
    rootHex: string,
    m: CheckpointManifest,
    peers: readonly PeerTarget[],
    failures: PeerFailure[],
    options: PieceDownloadOptions,
    fetchPiece: FetchPiece,
  ) {
    this.rootHex = rootHex;
    this.m = m;
    this.failures = failures;
    this.options = options;
    this.fetchPiece = fetchPiece;
    this.total = m.pieceHashes.length;
    this.out = new Uint8Array(m.totalBytes);
    this.queue = Array.from({ length: this.total }, (_, i) => i);
    this.attempts = new Array<number>(this.total).fill(0);
    this.peers = peers.map((target) => ({
      target,
      label: describeTarget(target),
      failures: 0,
      dropped: false,
    }));
    this.wakePromise = new Promise<void>((r) => (this.wake = r));
  }

  /** Every piece, verified, and then the content; throws CheckpointDownloadError when pieces stay missing. */
  async run(): Promise<Uint8Array> {
    const perPeer = Math.max(1, this.options.concurrencyPerPeer ?? DEFAULT_PIECE_CONCURRENCY_PER_PEER);
    const workers: Promise<void>[] = [];
    // Start workers round-robin over the peers: each takes its first piece synchronously, so this spreads the
    // first pieces over all peers (a checkpoint of fewer pieces than workers still comes from several peers).
    for (let i = 0; i < perPeer; i++) for (const peer of this.peers) workers.push(this.worker(peer));
    // A worker whose peer is dropped exits; wake the others so they re-check the queue.
    await Promise.all(workers);
    if (this.piecesDone !== this.total) throw this.missing();
    this.checkContent();
    return this.out;
  }

  private notify(): void {
    const w = this.wake;
    this.wakePromise = new Promise<void>((r) => (this.wake = r));
    w?.();
  }

  private finished(): boolean {
    return (
      this.piecesDone === this.total || this.fatal !== undefined || this.options.signal?.aborted === true
    );
  }

  private async worker(peer: PeerState): Promise<void> {
    while (!this.finished() && !peer.dropped) {
      const index = this.queue.shift();
      if (index === undefined) {
        if (this.inFlight === 0) return; // nothing queued and nothing that could come back
        await this.wakePromise;
        continue;
      }
      this.inFlight++;
      this.attempts[index] = (this.attempts[index] ?? 0) + 1;
      try {
        this.keep(peer, index, await this.fetchPiece(peer.target, index, pieceLength(this.m, index)));
      } catch (err) {
        this.failed(peer, index, toError(err));
      } finally {
        this.inFlight--;
        this.notify();
      }
    }
  }

  /** Verifies piece `index` against the manifest and stores it. */
  private keep(peer: PeerState, index: number, bytes: Uint8Array): void {
    const actual = sha256Bytes(bytes);
    const expected = this.m.pieceHashes[index] ?? new Uint8Array(ADDRESS_BYTES);
    if (!sameBytes(actual, expected)) {
      throw new HashMismatchError(`checkpoint piece ${index}`, toHex(expected), toHex(actual));
    }
    this.out.set(bytes, index * this.m.pieceSize);
    this.piecesDone++;
    this.bytesDone += bytes.length;
    peer.failures = 0;
    this.piecesByPeer.set(peer.label, (this.piecesByPeer.get(peer.label) ?? 0) + 1);
    this.options.onProgress?.({
      piecesDone: this.piecesDone,
      piecesTotal: this.total,
      bytesDone: this.bytesDone,
      totalBytes: this.m.totalBytes,
      peer: peer.label,
    });
  }

  private failed(peer: PeerState, index: number, error: Error): void {
    this.failures.push({ peer: peer.label, error });
    this.queue.unshift(index);
    peer.failures++;
    // A wrong hash or a missing checkpoint will not get better with retries from the same peer.
    if (
      error instanceof HashMismatchError ||
      error instanceof NotFoundError ||
      peer.failures >= (this.options.maxPeerFailures ?? DEFAULT_MAX_PEER_FAILURES)
    ) {
      peer.dropped = true;
    }
    // Bound the total work: a piece nobody can deliver after every peer tried it twice is fatal.
    if ((this.attempts[index] ?? 0) > 2 * this.peers.length) {
      this.fatal = new Error(`piece ${index} failed ${this.attempts[index]} times`);
    }
  }

  private missing(): CheckpointDownloadError {
    const live = this.peers.filter((p) => !p.dropped).length;
    const reason =
      this.options.signal?.aborted === true
        ? 'aborted'
        : (this.fatal?.message ??
          (live === 0 ? 'every peer failed or was dropped' : 'no peer could serve the rest'));
    const left = this.total - this.piecesDone;
    return new CheckpointDownloadError(
      `checkpoint ${this.rootHex}: ${left} of ${this.total} pieces missing (${reason}); ` +
        `last errors: ${this.failures
          .slice(-3)
          .map((f) => `${f.peer}: ${f.error.message}`)
          .join('; ')}`,
      this.failures,
      left,
    );
  }

  private checkContent(): void {
    const content = sha256Bytes(this.out);
    if (!sameBytes(content, this.m.contentHash)) {
      // Every piece matched the verified manifest, so this means the manifest itself was built wrongly.
      throw new HashMismatchError(
        `checkpoint ${this.rootHex} content`,
        toHex(this.m.contentHash),
        toHex(content),
      );
    }
    const expected = this.options.expectedContentHash;
    if (expected !== undefined && !sameBytes(content, expected)) {
      throw new HashMismatchError(`checkpoint ${this.rootHex} content`, toHex(expected), toHex(content));
    }
  }
}
