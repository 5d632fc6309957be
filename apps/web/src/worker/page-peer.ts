// The worker's end of the peer channel: a PeerNetwork whose libp2p peer runs on the page's main thread
// (lib/peer-host.ts), where RTCPeerConnection exists and so WebRTC links to other peers can. Requests go out
// as typed messages (protocol.ts PeerHostRequest) with binary payloads as transferred copies; replies are
// checked (peer-messages.ts) and sized against what was asked before use. Everything here may fail: a
// failed or late request gives null (the client then asks the relay), as MeshNetwork's own failures do.
import { peerDirectoryOf } from '@meshtrain/client';
import type { Checkpoint } from '@meshtrain/client';
import { decodeAnnounce, encodeAnnounce, isHex32 } from '@meshtrain/core';
import type { Announce, CoordinatorState } from '@meshtrain/core';
import { parameterOrder } from '@meshtrain/model';
import { MAX_BLOB_BYTES, MAX_FRAME_BYTES, parseHostReply } from './peer-messages.ts';
import { MAX_DIRECTORY_CLIENTS } from './protocol.ts';
import type { PeerHostReply, PeerHostRequest, PeerStatsMessage } from './protocol.ts';
import { emptyPeerStats } from './tab-network.ts';
import type { TabNetwork } from './tab-network.ts';

/** Requests in flight at once; beyond it a request fails at once (the relay path still works). */
export const MAX_PENDING = 256;

/** How long each request may take before the worker gives up on the page (it has its own, shorter, limits). */
const TIMEOUT_MS = {
  publish: 30_000,
  fetch: 30_000,
  fetchParams: 10 * 60_000,
  shareCheckpoint: 60_000,
  shareBlob: 30_000,
  fetchBlob: 30_000,
} as const;

type Pending = {
  resolve: (bytes: ArrayBuffer | null) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
};

export type PageOpenOutcome =
  { ok: true; network: PagePeerNetwork } | { ok: false; reason: string; fallback: boolean };

export class PagePeerNetwork implements TabNetwork {
  readonly host = 'page' as const;
  readonly peerId: string;
  private readonly port: MessagePort;
  private readonly log: (line: string) => void;
  private readonly pending = new Map<number, Pending>();
  private readonly announceListeners: ((a: Announce) => void)[] = [];
  private snapshot: PeerStatsMessage = emptyPeerStats();
  private directoryKey = '';
  private nextId = 1;
  private closed = false;
  private dropped = 0;

  private constructor(port: MessagePort, peerId: string, log: (line: string) => void) {
    this.port = port;
    this.peerId = peerId;
    this.log = log;
    port.onmessage = (e: MessageEvent<unknown>) => this.receive(e.data);
  }

  /**
   * Asks the page to start its peer on the relay's libp2p addresses. `fallback` in a failure says whether the
   * worker may start a peer of its own (the page cannot host one) or should go without (libp2p unreachable).
   */
  static async open(
    port: MessagePort,
    announced: readonly string[],
    log: (line: string) => void,
    timeoutMs = 30_000,
  ): Promise<PageOpenOutcome> {
    type First = Extract<PeerHostReply, { type: 'opened' | 'unavailable' }>;
    const first = await new Promise<First | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), timeoutMs);
      port.onmessage = (e: MessageEvent<unknown>) => {
        const m = parseHostReply(e.data);
        if (m === null || (m.type !== 'opened' && m.type !== 'unavailable')) return;
        clearTimeout(timer);
        resolve(m);
      };
      port.start();
      port.postMessage({ type: 'open', announced: [...announced] } satisfies PeerHostRequest);
    });
    if (first === null) {
      port.close();
      return { ok: false, reason: `the page did not answer within ${timeoutMs} ms`, fallback: true };
    }
    if (first.type === 'unavailable') {
      port.close();
      return { ok: false, reason: first.reason, fallback: first.fallback };
    }
    return { ok: true, network: new PagePeerNetwork(port, first.peerId, log) };
  }

  private receive(data: unknown): void {
    const m = parseHostReply(data);
    if (m === null) {
      // Say so once in a while, not per message: a flood of bad messages must not become a flood of logs.
      if (this.dropped++ % 100 === 0) this.log('p2p: dropped a malformed message from the page');
      return;
    }
    switch (m.type) {
      case 'reply': {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        clearTimeout(p.timer);
        if (m.error !== undefined) p.reject(new Error(m.error));
        else p.resolve(m.bytes);
        return;
      }
      case 'stats':
        this.snapshot = m.stats;
        return;
      case 'announce': {
        let a: Announce;
        try {
          a = decodeAnnounce(new Uint8Array(m.announce));
        } catch {
          return;
        }
        for (const l of this.announceListeners) l(a);
        return;
      }
      default:
        return; // a late 'opened'/'unavailable': nothing to do
    }
  }

  private request(
    kind: keyof typeof TIMEOUT_MS,
    body: (id: number) => PeerHostRequest,
    transfer: Transferable[],
  ): Promise<ArrayBuffer | null> {
    if (this.closed) return Promise.reject(new Error('the peer channel is closed'));
    if (this.pending.size >= MAX_PENDING)
      return Promise.reject(new Error(`${MAX_PENDING} peer requests already in flight`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the page did not answer ${kind} within ${TIMEOUT_MS[kind]} ms`));
      }, TIMEOUT_MS[kind]);
      this.pending.set(id, { resolve, reject, timer });
      this.port.postMessage(body(id), transfer);
    });
  }

  async publish(announce: Announce, signedResultFrame: Uint8Array): Promise<void> {
    // Copies: the client keeps using its frame (it submits it to the relay next), so it is not transferred.
    const a = encodeAnnounce(announce).slice().buffer;
    const frame = signedResultFrame.slice().buffer;
    await this.request('publish', (id) => ({ type: 'publish', id, announce: a, frame }), [a, frame]);
  }

  async fetch(commitment: Uint8Array, hintClientIds: readonly string[]): Promise<Uint8Array | null> {
    const c = commitment.slice().buffer;
    const hints = hintClientIds.filter(isHex32).slice(0, 16);
    try {
      const bytes = await this.request('fetch', (id) => ({ type: 'fetch', id, commitment: c, hints }), [c]);
      // The client checks the frame against the commitment; here only its size is bounded.
      return bytes && bytes.byteLength <= MAX_FRAME_BYTES ? new Uint8Array(bytes) : null;
    } catch {
      return null;
    }
  }

  async fetchParams(
    paramHash: Uint8Array,
    sizes: ReadonlyMap<string, number>,
  ): Promise<Map<string, Float32Array> | null> {
    const h = paramHash.slice().buffer;
    const list: [string, number][] = parameterOrder(sizes.keys()).map((n) => [n, sizes.get(n) as number]);
    let bytes: ArrayBuffer | null;
    try {
      bytes = await this.request(
        'fetchParams',
        (id) => ({ type: 'fetchParams', id, paramHash: h, sizes: list }),
        [h],
      );
    } catch (e) {
      this.log(`p2p: parameters from peers failed on the page: ${(e as Error).message}`);
      return null;
    }
    const floats = list.reduce((a, [, n]) => a + n, 0);
    if (bytes === null || bytes.byteLength !== 4 * floats) return null;
    // Views of the transferred buffer, no copy; peerFirstCheckpoints checks their hash before use.
    const out = new Map<string, Float32Array>();
    let o = 0;
    for (const [name, n] of list) {
      out.set(name, new Float32Array(bytes, 4 * o, n));
      o += n;
    }
    return out;
  }

  async shareCheckpoint(ck: Checkpoint): Promise<void> {
    const names = parameterOrder(ck.params.keys());
    const lengths = names.map((n) => (ck.params.get(n) as Float32Array).length);
    const packed = new Float32Array(lengths.reduce((a, b) => a + b, 0));
    let o = 0;
    for (const n of names) {
      const t = ck.params.get(n) as Float32Array;
      packed.set(t, o);
      o += t.length;
    }
    const h = ck.paramHash.slice().buffer;
    const params = packed.buffer;
    await this.request(
      'shareCheckpoint',
      (id) => ({
        type: 'shareCheckpoint',
        id,
        step: ck.step,
        epoch: ck.epoch,
        paramHash: h,
        names,
        lengths,
        params,
      }),
      [h, params],
    );
  }

  async shareBlob(bytes: Uint8Array): Promise<void> {
    const b = bytes.slice().buffer;
    await this.request('shareBlob', (id) => ({ type: 'shareBlob', id, bytes: b }), [b]);
  }

  async fetchBlob(address: Uint8Array): Promise<Uint8Array | null> {
    const a = address.slice().buffer;
    try {
      const bytes = await this.request('fetchBlob', (id) => ({ type: 'fetchBlob', id, address: a }), [a]);
      // The page's fetch checked the hash; here only the size is bounded.
      return bytes && bytes.byteLength <= MAX_BLOB_BYTES ? new Uint8Array(bytes) : null;
    } catch {
      return null;
    }
  }

  onAnnounce(listener: (announce: Announce) => void): void {
    this.announceListeners.push(listener);
  }

  /** Sends the run's peer directory when it changed (coordinator states arrive far more often). */
  setState(state: CoordinatorState): void {
    const d = peerDirectoryOf(state);
    const directory = {
      epochClients: d.epochClients.slice(0, MAX_DIRECTORY_CLIENTS),
      members: d.members.slice(0, MAX_DIRECTORY_CLIENTS),
    };
    const key = JSON.stringify(directory);
    if (key === this.directoryKey || this.closed) return;
    this.directoryKey = key;
    this.port.postMessage({ type: 'peers', directory } satisfies PeerHostRequest);
  }

  stats(): PeerStatsMessage {
    return this.snapshot;
  }

  async stop(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.port.postMessage({ type: 'close' } satisfies PeerHostRequest);
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new Error(`request ${id}: the peer channel closed`));
    }
    this.pending.clear();
    this.port.close();
    await Promise.resolve();
  }
}
