import { generateKeyPairFromSeed } from '@libp2p/crypto/keys';
import { createLibp2p } from 'libp2p';
import type { Libp2pOptions } from 'libp2p';
import { multiaddr } from '@multiformats/multiaddr';
import type { Multiaddr } from '@multiformats/multiaddr';
import { Circuit, WebRTC } from '@multiformats/multiaddr-matcher';
import { isPeerId } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import type { Connection, Libp2p, PrivateKey, ServiceMap } from '@libp2p/interface';
import type { GossipSub, Message } from '@libp2p/gossipsub';
import { BlobExchange } from './blob-exchange.ts';
import { DirectLinks } from './direct-links.ts';
import type { DirectLinksOptions, PeerLink } from './direct-links.ts';
import type { BlobExchangeOptions, FetchBlobOptions, FetchedBlob } from './blob-exchange.ts';
import { MemoryBlobStore } from './blob-store.ts';
import type { BlobStore } from './blob-store.ts';
import { CheckpointExchange } from './checkpoint-exchange.ts';
import type {
  CheckpointExchangeOptions,
  DownloadCheckpointOptions,
  DownloadedCheckpoint,
} from './checkpoint-exchange.ts';
import {
  AnnouncementTooLargeError,
  DialError,
  InvalidArgumentError,
  RelayUnreachableError,
  TimeoutError,
} from './errors.ts';
import { describeTarget, targetPeerId } from './host.ts';
import type { PeerTarget } from './host.ts';
import {
  DEFAULT_BLOB_STORE_BYTES,
  DEFAULT_DIAL_ATTEMPT_TIMEOUT_MS,
  DEFAULT_RELAY_DIAL_TIMEOUT_MS,
} from './defaults.ts';

/**
 * MeshNode: one libp2p node plus our protocols, whatever the environment. The per-environment factories
 * (node.ts for Node, browser.ts for browsers) only choose transports and listen addresses and hand the
 * libp2p options to `MeshNode.create`; everything a client does with the network goes through this class.
 */

/** Default cap on one announcement. Gossipsub drops messages near 4 MiB; announcements are addresses + metadata. */
export const DEFAULT_MAX_ANNOUNCEMENT_BYTES = 64 * 1024;

export interface Announcement {
  topic: string;
  data: Uint8Array;
  /** Peer id of the publisher (gossipsub signs messages, so this is authenticated at the libp2p level). */
  from: string;
}

export interface DialOptions {
  signal?: AbortSignal;
  /** Attempts before giving up (default 3 for WebRTC addresses, 1 otherwise). */
  attempts?: number;
  /** Deadline of one attempt (default 10 s). */
  attemptTimeoutMs?: number;
}

export type AnnouncementHandler = (announcement: Announcement) => void;

/** Options every factory accepts. */
export interface MeshNodeOptions {
  /**
   * 32-byte Ed25519 seed for the libp2p identity. Pass the protocol identity's seed to make the PeerId
   * derive from the same key; omit for a fresh random identity.
   */
  privateKeySeed?: Uint8Array;
  /** Store the blob service serves from (default: in-memory LRU of `blobStoreBytes`). */
  blobStore?: BlobStore;
  /** Budget of the default in-memory blob store (default 256 MiB). */
  blobStoreBytes?: number;
  blobs?: Omit<BlobExchangeOptions, 'store'>;
  checkpoints?: CheckpointExchangeOptions;
  maxAnnouncementBytes?: number;
  /** How `directLinks` upgrades peers to WebRTC (limits, backoff). */
  directLinks?: DirectLinksOptions;
  /** Runs once libp2p stopped (after `stop()`, or a failed start): releases what the factory holds for it. */
  onStopped?: () => void;
}

/** The services every MeshNode's libp2p carries (the relay adds its `relay` service). */
export interface MeshServices extends ServiceMap {
  pubsub: GossipSub;
}

export async function privateKeyFromSeed(seed: Uint8Array): Promise<PrivateKey> {
  if (!(seed instanceof Uint8Array) || seed.length !== 32) {
    throw new InvalidArgumentError(`privateKeySeed must be 32 bytes, got ${seed?.length ?? 'none'}`);
  }
  return await generateKeyPairFromSeed('Ed25519', seed);
}

export class MeshNode<S extends MeshServices = MeshServices> {
  readonly libp2p: Libp2p<S>;
  readonly blobs: BlobExchange;
  readonly checkpoints: CheckpointExchange;
  /** Whether this node makes WebRTC connections to peers (it listens on `/webrtc`). */
  readonly webrtc: boolean;
  /** WebRTC links to the peers named by `directLinks.want(…)` (see direct-links.ts). */
  readonly directLinks: DirectLinks;
  private readonly maxAnnouncementBytes: number;
  private readonly onStopped: (() => void) | undefined;
  private readonly handlers = new Map<string, Set<AnnouncementHandler>>();
  private readonly relays: Multiaddr[] = [];
  private readonly onMessage = (evt: CustomEvent<Message>): void => this.dispatch(evt.detail);

  private constructor(libp2p: Libp2p<S>, options: MeshNodeOptions, webrtc: boolean) {
    this.libp2p = libp2p;
    this.blobs = new BlobExchange(libp2p, {
      ...options.blobs,
      store:
        options.blobStore ??
        new MemoryBlobStore({ maxBytes: options.blobStoreBytes ?? DEFAULT_BLOB_STORE_BYTES }),
    });
    this.checkpoints = new CheckpointExchange(libp2p, options.checkpoints);
    this.webrtc = webrtc;
    this.onStopped = options.onStopped;
    this.directLinks = new DirectLinks(this, options.directLinks);
    this.maxAnnouncementBytes = options.maxAnnouncementBytes ?? DEFAULT_MAX_ANNOUNCEMENT_BYTES;
  }

  /**
   * Builds the libp2p node unstarted, registers our protocol handlers, then starts it, so that no peer can
   * open a stream before we can answer it.
   */
  static async create<S extends MeshServices>(
    libp2pOptions: Libp2pOptions<S>,
    options: MeshNodeOptions,
  ): Promise<MeshNode<S>> {
    const privateKey =
      options.privateKeySeed === undefined
        ? libp2pOptions.privateKey
        : await privateKeyFromSeed(options.privateKeySeed);
    const libp2p = await createLibp2p<S>({ ...libp2pOptions, privateKey, start: false });
    const webrtc = (libp2pOptions.addresses?.listen ?? []).includes('/webrtc');
    const node = new MeshNode<S>(libp2p, options, webrtc);
    try {
      await node.blobs.start();
      await node.checkpoints.start();
      libp2p.services.pubsub.addEventListener('message', node.onMessage);
      await libp2p.start();
    } catch (err) {
      try {
        await libp2p.stop();
      } catch {
        // the start error below is the one worth reporting
      }
      options.onStopped?.();
      throw err;
    }
    return node;
  }

  get peerId(): string {
    return this.libp2p.peerId.toString();
  }

  multiaddrs(): Multiaddr[] {
    return this.libp2p.getMultiaddrs();
  }

  /**
   * Dials `target`; failures come back as DialError whatever libp2p threw. WebRTC dials (`/p2p-circuit/webrtc`)
   * are retried: with @libp2p/webrtc 6.0 + node-datachannel we see a first attempt's peer connection close
   * right after ICE connects in roughly one dial out of three on a veth pair, and a fresh attempt succeeds.
   */
  async dial(target: PeerTarget | string, options: DialOptions = {}): Promise<Connection> {
    const t = typeof target === 'string' ? multiaddr(target) : target;
    const isWebRTC = (Array.isArray(t) ? t : [t]).some((m) => !isPeerId(m) && WebRTC.matches(m));
    const attempts = options.attempts ?? (isWebRTC ? 3 : 1);
    const attemptTimeoutMs = options.attemptTimeoutMs ?? DEFAULT_DIAL_ATTEMPT_TIMEOUT_MS;
    let last: unknown;
    for (let i = 0; i < attempts; i++) {
      if (options.signal?.aborted === true) break;
      const signals = [AbortSignal.timeout(attemptTimeoutMs)];
      if (options.signal !== undefined) signals.push(options.signal);
      try {
        return await this.libp2p.dial(t, { signal: AbortSignal.any(signals) });
      } catch (err) {
        last = err;
      }
    }
    throw new DialError(describeTarget(t), last ?? options.signal?.reason);
  }

  /**
   * Connects to every relay it can (a reservation follows automatically because peers listen on
   * `/p2p-circuit`). Throws RelayUnreachableError when relays were given and none answered.
   */
  async connectRelays(
    relayAddrs: readonly (string | Multiaddr)[],
    timeoutMs = DEFAULT_RELAY_DIAL_TIMEOUT_MS,
  ): Promise<Connection[]> {
    const connected: Connection[] = [];
    const failures: DialError[] = [];
    await Promise.all(
      relayAddrs.map(async (addr) => {
        try {
          connected.push(await this.dial(addr, { attemptTimeoutMs: timeoutMs }));
          this.relays.push(typeof addr === 'string' ? multiaddr(addr) : addr);
        } catch (err) {
          failures.push(err instanceof DialError ? err : new DialError(String(addr), err));
        }
      }),
    );
    if (relayAddrs.length > 0 && connected.length === 0) throw new RelayUnreachableError(failures);
    return connected;
  }

  /**
   * Addresses that reach `peerId` through the relays we are connected to, for a peer we only know by id
   * (e.g. the `from` of an announcement). With `webrtc` (default) dialling one signals over the relay and
   * then upgrades to a direct WebRTC connection; without it the data stays on the relayed connection.
   */
  viaRelays(peerId: string, options: { webrtc?: boolean } = {}): Multiaddr[] {
    // Ids come from other peers (coordinator state, announcements): no addresses for one that is not a PeerId.
    try {
      peerIdFromString(peerId);
    } catch {
      return [];
    }
    const suffix = (options.webrtc ?? true) ? '/p2p-circuit/webrtc' : '/p2p-circuit';
    return this.relays.map((r) => multiaddr(`${r.toString()}${suffix}/p2p/${peerId}`));
  }

  /** PeerIds of the relays this node connected to (`connectRelays`). */
  relayPeerIds(): string[] {
    const ids = this.relays.map((r) => targetPeerId(r)?.toString()).filter((p): p is string => !!p);
    return [...new Set(ids)];
  }

  /**
   * Distinct peers other than our relays with an open connection, relayed or direct: the peers this node is
   * exchanging with. Cheap (no I/O): a count for status displays.
   */
  connectedPeers(): string[] {
    const relays = new Set(this.relayPeerIds());
    const peers = new Set<string>();
    for (const c of this.libp2p.getConnections()) {
      const id = c.remotePeer.toString();
      if (c.status === 'open' && !relays.has(id)) peers.add(id);
    }
    return [...peers];
  }

  /**
   * How `peerId` is reached now: over a direct WebRTC connection, another direct (unlimited) one, or only
   * relayed; undefined without an open connection.
   */
  linkTo(peerId: string): PeerLink | undefined {
    let best: PeerLink | undefined;
    for (const c of this.libp2p.getConnections()) {
      if (c.status !== 'open' || c.remotePeer.toString() !== peerId) continue;
      const link = linkOf(c);
      if (link === 'webrtc') return link;
      if (best === undefined || link === 'direct') best = link;
    }
    return best;
  }

  /** Every non-relay peer with an open connection and how it is reached (for stats and tests). */
  peerLinks(): Map<string, PeerLink> {
    const relays = new Set(this.relayPeerIds());
    const out = new Map<string, PeerLink>();
    for (const c of this.libp2p.getConnections()) {
      const id = c.remotePeer.toString();
      if (c.status !== 'open' || relays.has(id)) continue;
      const link = linkOf(c);
      const had = out.get(id);
      if (had === undefined || had === 'relayed' || link === 'webrtc') out.set(id, link);
    }
    return out;
  }

  /**
   * Where to fetch from `peerId`: the peer itself when a direct connection is open (streams then take it),
   * else its plain circuit address through our first relay (undefined without a relay).
   */
  routeTo(peerId: string): PeerTarget | undefined {
    for (const c of this.libp2p.getConnections())
      if (c.status === 'open' && c.limits === undefined && c.remotePeer.toString() === peerId)
        return c.remotePeer;
    return this.viaRelays(peerId, { webrtc: false })[0];
  }

  /** Resolves with the first own multiaddr matching `predicate`, waiting up to `timeoutMs`. */
  async waitForAddress(
    predicate: (ma: Multiaddr) => boolean,
    what: string,
    timeoutMs = 10_000,
  ): Promise<Multiaddr> {
    const found = (): Multiaddr | undefined => this.libp2p.getMultiaddrs().find(predicate);
    const now = found();
    if (now !== undefined) return now;
    return await new Promise<Multiaddr>((resolve, reject) => {
      const check = (): void => {
        const ma = found();
        if (ma === undefined) return;
        cleanup();
        resolve(ma);
      };
      // Address changes are announced by 'self:peer:update'; the poll covers any update the event misses.
      const poll = setInterval(check, 100);
      const timer = setTimeout(() => {
        cleanup();
        reject(new TimeoutError(`waiting for a ${what} address`, timeoutMs));
      }, timeoutMs);
      const cleanup = (): void => {
        clearInterval(poll);
        clearTimeout(timer);
        this.libp2p.removeEventListener('self:peer:update', check);
      };
      this.libp2p.addEventListener('self:peer:update', check);
    });
  }

  /** Our relayed address (`…/p2p/RELAY/p2p-circuit/p2p/ME`) once a reservation exists. */
  async circuitAddress(timeoutMs?: number): Promise<Multiaddr> {
    return await this.waitForAddress(
      (ma) => Circuit.matches(ma) && !WebRTC.matches(ma),
      'circuit relay',
      timeoutMs,
    );
  }

  /** Our `…/p2p-circuit/webrtc/p2p/ME` address: dialling it signals over the relay, then goes direct. */
  async webrtcAddress(timeoutMs?: number): Promise<Multiaddr> {
    return await this.waitForAddress((ma) => WebRTC.matches(ma), 'WebRTC', timeoutMs);
  }

  // --- announcements (gossipsub, small messages only) ---

  /** Subscribes without a handler: a relay does this so that it forwards the topic to its mesh. */
  subscribe(topic: string): void {
    this.libp2p.services.pubsub.subscribe(topic);
  }

  /** Publishes a small announcement; returns how many peers it was sent to directly. */
  async announce(topic: string, data: Uint8Array): Promise<number> {
    if (data.length > this.maxAnnouncementBytes) {
      throw new AnnouncementTooLargeError(data.length, this.maxAnnouncementBytes);
    }
    const result = await this.libp2p.services.pubsub.publish(topic, data);
    return result.recipients.length;
  }

  /** Calls `handler` for every announcement on `topic` (subscribing to it); returns an unsubscribe function. */
  onAnnouncement(topic: string, handler: AnnouncementHandler): () => void {
    let set = this.handlers.get(topic);
    if (set === undefined) {
      set = new Set();
      this.handlers.set(topic, set);
      this.libp2p.services.pubsub.subscribe(topic);
    }
    set.add(handler);
    return () => {
      const s = this.handlers.get(topic);
      if (s === undefined) return;
      s.delete(handler);
      if (s.size === 0) {
        this.handlers.delete(topic);
        this.libp2p.services.pubsub.unsubscribe(topic);
      }
    };
  }

  /** Waits until at least `count` peers we know of are subscribed to `topic` (mesh formation in tests/joins). */
  async waitForTopicPeers(topic: string, count: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.libp2p.services.pubsub.getSubscribers(topic).length < count) {
      if (Date.now() > deadline)
        throw new TimeoutError(`waiting for ${count} subscribers of ${topic}`, timeoutMs);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private dispatch(msg: Message): void {
    const set = this.handlers.get(msg.topic);
    if (set === undefined) return;
    // Oversized messages are dropped here too: peers running other code must not push big payloads to us.
    if (msg.data.length > this.maxAnnouncementBytes) return;
    const announcement: Announcement = {
      topic: msg.topic,
      data: msg.data,
      from: msg.type === 'signed' ? msg.from.toString() : '',
    };
    for (const handler of set) {
      try {
        handler(announcement);
      } catch {
        // A throwing handler must not stop the others or gossipsub's event loop.
      }
    }
  }

  // --- blobs and checkpoints (thin delegates, so callers need one object) ---

  async putBlob(bytes: Uint8Array): Promise<Uint8Array> {
    return await this.blobs.put(bytes);
  }

  async fetchBlob(
    address: Uint8Array,
    candidates: readonly PeerTarget[],
    options?: FetchBlobOptions,
  ): Promise<FetchedBlob> {
    return await this.blobs.fetch(address, candidates, options);
  }

  shareCheckpoint(bytes: Uint8Array, pieceSize?: number): Uint8Array {
    return this.checkpoints.share(bytes, pieceSize);
  }

  async downloadCheckpoint(
    root: Uint8Array,
    peers: readonly PeerTarget[],
    options?: DownloadCheckpointOptions,
  ): Promise<DownloadedCheckpoint> {
    return await this.checkpoints.download(root, peers, options);
  }

  /** Downloads a checkpoint known only by the SHA-256 of its whole content (see CheckpointExchange). */
  async downloadCheckpointByContent(
    contentHash: Uint8Array,
    peers: readonly PeerTarget[],
    options?: DownloadCheckpointOptions,
  ): Promise<DownloadedCheckpoint> {
    return await this.checkpoints.downloadByContentHash(contentHash, peers, options);
  }

  async stop(): Promise<void> {
    this.directLinks.stop();
    this.libp2p.services.pubsub.removeEventListener('message', this.onMessage);
    try {
      await this.blobs.stop();
      await this.checkpoints.stop();
    } catch {
      // Unhandling after a failed start can throw; stopping libp2p below is what matters.
    }
    try {
      await this.libp2p.stop();
    } finally {
      this.onStopped?.();
    }
  }
}

/** A relayed connection has limits; a direct one is WebRTC when its address has a `webrtc` component. */
function linkOf(c: Connection): PeerLink {
  if (c.limits !== undefined || !c.direct) return 'relayed';
  return c.remoteAddr.getComponents().some((p) => p.name === 'webrtc') ? 'webrtc' : 'direct';
}

/** Gossipsub settings shared by all factories: announcements only, never an error for an empty mesh. */
export const GOSSIP_OPTIONS = {
  allowPublishToZeroTopicPeers: true,
  emitSelf: false,
} as const;
