// Getting a result's payload by its commitment, in one place: held → peers → relay, retried with a pause
// until a patience deadline (for a result the apply step needs), or a few times with backoff (in the
// background, for an announce). Everything received is verified before it is held: a frame that does not hash
// to the commitment asked for, or a SignedResult with a bad signature, is dropped.
import {
  bytesToHex,
  decodeSignedResult,
  decodeTrainingResult,
  frameCommitment,
  verifySignedResult,
} from '@meshtrain/core';
import type { CoordinatorLink, PeerNetwork } from '../interfaces.ts';
import {
  ANNOUNCE_FETCH_ATTEMPTS,
  ANNOUNCE_FETCH_BACKOFF_MS,
  FETCH_PATIENCE_MS,
  FETCH_RETRY_DELAY_MS,
} from './defaults.ts';
import type { HeldResult, ResultsStore } from './results-store.ts';
import type { ClientStats } from './types.ts';

export interface FetchTimings {
  /** How long `obtain` keeps trying. */
  patienceMs: number;
  /** Pause between two of `obtain`'s tries. */
  retryDelayMs: number;
  /** Tries of a background fetch. */
  backgroundAttempts: number;
  /** First pause of a background fetch, doubled after each failed try. */
  backgroundBackoffMs: number;
}

export const DEFAULT_FETCH_TIMINGS: Readonly<FetchTimings> = {
  patienceMs: FETCH_PATIENCE_MS,
  retryDelayMs: FETCH_RETRY_DELAY_MS,
  backgroundAttempts: ANNOUNCE_FETCH_ATTEMPTS,
  backgroundBackoffMs: ANNOUNCE_FETCH_BACKOFF_MS,
};

export interface ResultFetcherOptions {
  runId: string;
  store: ResultsStore;
  link: Pick<CoordinatorLink, 'fetchResult'>;
  peers?: Pick<PeerNetwork, 'fetch'> | undefined;
  /** Counters of received bytes (`bytesReceived`, `bytesFromPeers`). */
  stats: Pick<ClientStats, 'bytesReceived' | 'bytesFromPeers'>;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  timings?: Partial<FetchTimings>;
  /** Called when a background fetch ends (got it or gave up): whoever waits on results may look again. */
  onSettled?: () => void;
}

export class ResultFetcher {
  readonly timings: Readonly<FetchTimings>;
  private readonly o: ResultFetcherOptions;
  /** Commitments (hex) with a background fetch under way. */
  private readonly fetching = new Set<string>();

  constructor(o: ResultFetcherOptions) {
    this.o = o;
    this.timings = { ...DEFAULT_FETCH_TIMINGS, ...o.timings };
  }

  /**
   * A verified result by commitment: held, else from peers, else from the relay, retried until the patience
   * deadline; null if it could not be had by then. `from`: the trainer the announce or acceptance names.
   */
  async obtain(commitment: Uint8Array, from: string): Promise<HeldResult | null> {
    const deadline = this.o.now() + this.timings.patienceMs;
    for (;;) {
      const have = this.o.store.get(commitment);
      if (have) return have;
      const got = await this.fetchOnce(commitment, from);
      if (got) return got;
      if (this.o.now() >= deadline) return null;
      await this.o.sleep(this.timings.retryDelayMs);
    }
  }

  /** Starts a background fetch of an announced result unless it is held or already being fetched. */
  prefetch(commitment: Uint8Array, from: string): void {
    const key = bytesToHex(commitment);
    if (this.o.store.has(commitment) || this.fetching.has(key)) return;
    this.fetching.add(key);
    void (async () => {
      try {
        const { backgroundAttempts, backgroundBackoffMs } = this.timings;
        for (let attempt = 0; attempt < backgroundAttempts && !this.o.store.has(commitment); attempt++) {
          if (await this.fetchOnce(commitment, from)) break;
          if (attempt + 1 < backgroundAttempts) await this.o.sleep(backgroundBackoffMs * 2 ** attempt);
        }
      } finally {
        this.fetching.delete(key);
        this.o.onSettled?.();
      }
    })();
  }

  /**
   * One try: peers first (a TrainingResult frame addressed by its commitment), then the relay's stored
   * SignedResult. Failures of either path count as "not there".
   */
  async fetchOnce(commitment: Uint8Array, from: string): Promise<HeldResult | null> {
    const p2p = await this.o.peers?.fetch(commitment, [from]).catch(() => null);
    if (p2p) {
      const got = this.acceptTrainingFrame(p2p, commitment, from);
      if (got) {
        this.o.stats.bytesFromPeers += p2p.length;
        return got;
      }
    }
    const frame = await this.o.link.fetchResult(commitment).catch(() => null);
    return frame ? this.acceptSigned(frame, commitment) : null;
  }

  /**
   * Verifies a SignedResult frame (signature, and `expected` commitment if given) and holds it; null if it
   * does not verify, is for another run, or commits to something else.
   */
  acceptSigned(frame: Uint8Array, expected?: Uint8Array): HeldResult | null {
    try {
      const signed = decodeSignedResult(frame);
      const commitment = verifySignedResult(signed.envelope, signed.result);
      if (expected && bytesToHex(commitment) !== bytesToHex(expected)) return null;
      if (signed.result.runId !== this.o.runId) return null;
      return this.keep({ commitment, from: bytesToHex(signed.envelope.from), frame, result: signed.result });
    } catch {
      return null;
    }
  }

  /** A TrainingResult frame fetched by commitment: held if it hashes to `commitment`. */
  private acceptTrainingFrame(frame: Uint8Array, commitment: Uint8Array, from: string): HeldResult | null {
    try {
      if (bytesToHex(frameCommitment(frame)) !== bytesToHex(commitment)) return null;
      const result = decodeTrainingResult(frame);
      if (result.runId !== this.o.runId) return null;
      return this.keep({ commitment, from, frame, result });
    } catch {
      return null;
    }
  }

  private keep(h: HeldResult): HeldResult {
    this.o.store.hold(h);
    this.o.stats.bytesReceived += h.frame.length;
    return h;
  }
}
