import type { Connection } from '@libp2p/interface';
import type { Multiaddr } from '@multiformats/multiaddr';
import { describeCause } from './errors.ts';
import {
  DEFAULT_DIAL_ATTEMPT_TIMEOUT_MS,
  DEFAULT_DIRECT_ATTEMPTS,
  DEFAULT_DIRECT_BACKOFF_MS,
  DEFAULT_DIRECT_INTERVAL_MS,
  DEFAULT_DIRECT_MAX_BACKOFF_MS,
  DEFAULT_DIRECT_MAX_DIALS,
  DEFAULT_DIRECT_MAX_PEERS,
  DEFAULT_DIRECT_YIELD_MS,
} from './defaults.ts';

/**
 * Direct links: keeps WebRTC connections to the peers a client exchanges with, so their data stops crossing
 * the relay. Peers first meet on the relay's circuit (every peer is reachable there); dialling a peer's
 * `<relay>/p2p-circuit/webrtc/p2p/<peer>` address uses that circuit for the WebRTC offer/answer and then moves
 * to a direct connection (`limits` undefined). Streams already prefer an unlimited connection (host.ts), so
 * once a link is up every blob and checkpoint piece to that peer takes it; until then, and whenever WebRTC
 * cannot connect (a peer without RTCPeerConnection, no usable ICE candidates, a NAT without TURN), the
 * circuit carries them as before. Nothing here is needed for correctness: it only moves bytes off the relay.
 *
 * Who dials: of two peers that both want a link, the one with the smaller PeerId dials at once and the other
 * waits `yieldMs` before dialling itself, so two simultaneous offers do not build two links, yet a link still
 * forms when only the larger one can dial (the smaller one has no WebRTC). A failed upgrade is retried after
 * a backoff that doubles per failure, so a peer that can never take WebRTC costs a few dials an hour.
 */

/** How a peer is reached right now: a direct WebRTC connection, another direct one (TCP, WebSockets), or only the relay. */
export type PeerLink = 'webrtc' | 'direct' | 'relayed';

/** The slice of MeshNode that DirectLinks drives (kept narrow so the scheduling is testable on its own). */
export interface DirectLinkHost {
  readonly peerId: string;
  /** Whether this node can make WebRTC connections (it listens on `/webrtc`). */
  readonly webrtc: boolean;
  linkTo(peerId: string): PeerLink | undefined;
  viaRelays(peerId: string, options?: { webrtc?: boolean }): Multiaddr[];
  dial(target: Multiaddr, options: { attempts: number; attemptTimeoutMs: number }): Promise<Connection>;
}

export interface DirectLinksOptions {
  /** Most peers to hold WebRTC links to (default 32): every link is an RTCPeerConnection with its own ICE. */
  maxPeers?: number;
  /** Upgrade dials in flight at once (default 2). */
  maxDials?: number;
  /** How long the peer with the larger PeerId leaves the first dial to the other one (default 5 s). */
  yieldMs?: number;
  /** Delay before retrying a failed upgrade, doubled per failure up to `maxBackoffMs` (default 30 s, 10 min). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Attempts of one upgrade dial and the deadline of each (default 2 and 10 s). */
  attempts?: number;
  attemptTimeoutMs?: number;
  /** How often wanted peers are checked (default 1 s). */
  intervalMs?: number;
  now?: () => number;
}

export type DirectLinkEvent =
  | { type: 'linked'; peer: string; ms: number }
  | { type: 'failed'; peer: string; error: string; failures: number; retryInMs: number };

export interface DirectLinkStats {
  /** Upgrade dials started, succeeded, failed (over the node's life). */
  dials: number;
  linked: number;
  failed: number;
}

interface PeerState {
  /** When this peer was first wanted without a link (for the yield of the larger PeerId). */
  since: number;
  failures: number;
  retryAt: number;
  dialling: boolean;
}

export class DirectLinks {
  readonly stats: DirectLinkStats = { dials: 0, linked: 0, failed: 0 };
  private readonly host: DirectLinkHost;
  private readonly o: Required<Omit<DirectLinksOptions, 'now'>> & { now: () => number };
  private readonly peers = new Map<string, PeerState>();
  private readonly listeners = new Set<(e: DirectLinkEvent) => void>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private inFlight = 0;
  private stopped = false;

  constructor(host: DirectLinkHost, options: DirectLinksOptions = {}) {
    this.host = host;
    this.o = {
      maxPeers: options.maxPeers ?? DEFAULT_DIRECT_MAX_PEERS,
      maxDials: options.maxDials ?? DEFAULT_DIRECT_MAX_DIALS,
      yieldMs: options.yieldMs ?? DEFAULT_DIRECT_YIELD_MS,
      backoffMs: options.backoffMs ?? DEFAULT_DIRECT_BACKOFF_MS,
      maxBackoffMs: options.maxBackoffMs ?? DEFAULT_DIRECT_MAX_BACKOFF_MS,
      attempts: options.attempts ?? DEFAULT_DIRECT_ATTEMPTS,
      attemptTimeoutMs: options.attemptTimeoutMs ?? DEFAULT_DIAL_ATTEMPT_TIMEOUT_MS,
      intervalMs: options.intervalMs ?? DEFAULT_DIRECT_INTERVAL_MS,
      now: options.now ?? (() => Date.now()),
    };
  }

  /** Listens to link events (for logs); returns the unsubscribe function. */
  onEvent(listener: (e: DirectLinkEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The peers to hold direct links to, replacing the previous set (own id and duplicates ignored; beyond
   * `maxPeers`, the first ones win, so callers list the peers they exchange with most first). A node without
   * WebRTC keeps nothing: its peers dial it if they can, and fail over to the circuit if they cannot.
   */
  want(peerIds: readonly string[]): void {
    if (this.stopped || !this.host.webrtc) return;
    const next = [...new Set(peerIds)].filter((p) => p !== this.host.peerId).slice(0, this.o.maxPeers);
    const now = this.o.now();
    for (const p of [...this.peers.keys()]) if (!next.includes(p)) this.peers.delete(p);
    for (const p of next)
      if (!this.peers.has(p)) this.peers.set(p, { since: now, failures: 0, retryAt: 0, dialling: false });
    if (this.peers.size > 0) {
      this.timer ??= setInterval(() => this.tick(), this.o.intervalMs);
      this.tick();
    } else this.clearTimer();
  }

  /** The peers currently wanted. */
  wanted(): string[] {
    return [...this.peers.keys()];
  }

  /** Starts the dials that are due. Public so tests can step it without waiting for the interval. */
  tick(): void {
    if (this.stopped) return;
    const now = this.o.now();
    for (const [peer, s] of this.peers) {
      if (this.inFlight >= this.o.maxDials) return;
      if (s.dialling || now < s.retryAt) continue;
      const link = this.host.linkTo(peer);
      if (link === 'webrtc' || link === 'direct') {
        s.since = now;
        s.failures = 0;
        continue;
      }
      // The smaller PeerId dials first; the other one only once it has waited for that dial in vain.
      if (this.host.peerId > peer && now - s.since < this.o.yieldMs) continue;
      void this.upgrade(peer, s);
    }
  }

  private async upgrade(peer: string, s: PeerState): Promise<void> {
    const target = this.host.viaRelays(peer, { webrtc: true })[0];
    if (target === undefined) return; // no relay connection: nothing can signal the offer
    s.dialling = true;
    this.inFlight++;
    this.stats.dials++;
    const t0 = this.o.now();
    try {
      await this.host.dial(target, { attempts: this.o.attempts, attemptTimeoutMs: this.o.attemptTimeoutMs });
      // libp2p may hand back an existing connection (the peer dialled us meanwhile): count what we now have.
      const link = this.host.linkTo(peer);
      if (link !== 'webrtc' && link !== 'direct') throw new Error('the dial gave no direct connection');
      this.stats.linked++;
      s.failures = 0;
      this.emit({ type: 'linked', peer, ms: this.o.now() - t0 });
    } catch (err) {
      this.stats.failed++;
      s.failures++;
      const retryInMs = Math.min(this.o.maxBackoffMs, this.o.backoffMs * 2 ** (s.failures - 1));
      s.retryAt = this.o.now() + retryInMs;
      this.emit({ type: 'failed', peer, error: describeCause(err), failures: s.failures, retryInMs });
    } finally {
      s.dialling = false;
      this.inFlight--;
    }
  }

  private emit(e: DirectLinkEvent): void {
    if (this.stopped) return;
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        // a listener's failure is not the link's
      }
    }
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  stop(): void {
    this.stopped = true;
    this.clearTimer();
    this.peers.clear();
    this.listeners.clear();
  }
}
