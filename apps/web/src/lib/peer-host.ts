// The page's end of the peer channel: runs the tab's libp2p peer (MeshNetwork on createBrowserPeer) on the
// main thread, which has RTCPeerConnection, and serves the training worker's PeerNetwork proxy
// (worker/page-peer.ts) over a MessagePort. So the tab's peer listens on `/p2p-circuit` and `/webrtc`, and
// keeps direct WebRTC links to the run's peers; the relay's circuit stays the signalling path and the
// fallback. A page without RTCPeerConnection answers `open` with a fallback, and the worker starts a
// circuit-only peer of its own instead. Every request is checked (worker/peer-messages.ts) before use.
import { decodeAnnounce, encodeAnnounce } from '@meshtrain/core';
import type { Announce } from '@meshtrain/core';
import type { MeshNetwork } from '@meshtrain/client';
import { parseHostRequest } from '../worker/peer-messages.ts';
import type { PeerHostReply, PeerHostRequest } from '../worker/protocol.ts';
import { statsOf } from '../worker/tab-network.ts';
import type { TabNetworkOptions } from '../worker/peer-network.ts';

/** How often the page's peer stats panel is refreshed. */
const STATS_INTERVAL_MS = 1000;

/** What the host needs of the peer it runs (MeshNetwork; tests pass their own). */
export type HostedNetwork = Pick<
  MeshNetwork,
  | 'peerId'
  | 'setPeers'
  | 'publish'
  | 'fetch'
  | 'fetchParams'
  | 'shareCheckpoint'
  | 'shareBlob'
  | 'fetchBlob'
  | 'stop'
  | 'stats'
  | 'peerLinks'
> & { onAnnounce?: (listener: (a: Announce) => void) => void };

export interface PeerHostOptions {
  relayUrl: string;
  /** The volunteer's Ed25519 seed (the PeerId derives from it, as the worker's would). */
  secretKey: Uint8Array;
  log: (line: string) => void;
  statsIntervalMs?: number;
  /**
   * Whether this page can make WebRTC connections, and how it starts its peer. Defaults load
   * worker/peer-network.ts (and so libp2p) on first use: the page bundle carries no libp2p until a volunteer
   * contributes.
   */
  hasWebRTC?: () => boolean;
  start?: (o: TabNetworkOptions) => Promise<HostedNetwork | null>;
}

export interface PeerHost {
  /** The running peer, once `open` succeeded. */
  network(): HostedNetwork | null;
  stop(): Promise<void>;
}

/** Requests the page works on at once; the worker bounds its own the same way. */
const MAX_IN_FLIGHT = 256;

export function hostPeerNetwork(port: MessagePort, o: PeerHostOptions): PeerHost {
  return new PagePeerHost(port, o);
}

/** fetchParams' answer: the parameters packed in the order of `sizes`, or null if any is missing. */
function packParams(got: ReadonlyMap<string, Float32Array>, sizes: [string, number][]): ArrayBuffer | null {
  const packed = new Float32Array(sizes.reduce((a, [, c]) => a + c, 0));
  let off = 0;
  for (const [name, count] of sizes) {
    const t = got.get(name);
    if (!t || t.length !== count) return null;
    packed.set(t, off);
    off += count;
  }
  return packed.buffer;
}

/** shareCheckpoint's parameters: views into the transferred buffer, by name. */
function unpackParams(m: Extract<PeerHostRequest, { type: 'shareCheckpoint' }>): Map<string, Float32Array> {
  const params = new Map<string, Float32Array>();
  let off = 0;
  m.names.forEach((name, i) => {
    const count = m.lengths[i] as number;
    params.set(name, new Float32Array(m.params, 4 * off, count));
    off += count;
  });
  return params;
}

/** One request against the peer; resolves with the bytes to reply with (null: nothing, or not available). */
async function serve(m: PeerHostRequest & { id: number }, n: HostedNetwork): Promise<ArrayBuffer | null> {
  switch (m.type) {
    case 'publish':
      await n.publish(decodeAnnounce(new Uint8Array(m.announce)), new Uint8Array(m.frame));
      return null;
    case 'fetch': {
      const frame = await n.fetch(new Uint8Array(m.commitment), m.hints);
      // A copy to transfer: the fetched bytes also sit in the peer's blob store, which serves them on.
      return frame ? frame.slice().buffer : null;
    }
    case 'fetchParams': {
      const got = await n.fetchParams(new Uint8Array(m.paramHash), new Map(m.sizes));
      return got ? packParams(got, m.sizes) : null;
    }
    case 'shareCheckpoint':
      await n.shareCheckpoint({
        step: m.step,
        epoch: m.epoch,
        paramHash: new Uint8Array(m.paramHash),
        params: unpackParams(m),
      });
      return null;
    case 'shareBlob':
      await n.shareBlob(new Uint8Array(m.bytes));
      return null;
    case 'fetchBlob': {
      const bytes = await n.fetchBlob(new Uint8Array(m.address));
      // A copy to transfer: the store keeps its own to serve on.
      return bytes ? bytes.slice().buffer : null;
    }
    default:
      return null;
  }
}

class PagePeerHost implements PeerHost {
  private readonly port: MessagePort;
  private readonly o: PeerHostOptions;
  private net: HostedNetwork | null = null;
  private opening = false;
  private stopped = false;
  private inFlight = 0;
  private dropped = 0;
  private statsTimer: ReturnType<typeof setInterval> | undefined;

  constructor(port: MessagePort, o: PeerHostOptions) {
    this.port = port;
    this.o = o;
    port.onmessage = (e: MessageEvent<unknown>) => this.receive(e.data);
    port.start();
  }

  network(): HostedNetwork | null {
    return this.net;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.statsTimer);
    this.port.close();
    const n = this.net;
    this.net = null;
    await n?.stop().catch(() => {});
  }

  private post(m: PeerHostReply, transfer: Transferable[] = []): void {
    if (!this.stopped) this.port.postMessage(m, transfer);
  }

  private reply(id: number, bytes: ArrayBuffer | null): void {
    this.post({ type: 'reply', id, bytes }, bytes ? [bytes] : []);
  }

  private fail(id: number, e: unknown): void {
    this.post({ type: 'reply', id, bytes: null, error: e instanceof Error ? e.message : String(e) });
  }

  private receive(data: unknown): void {
    const m = parseHostRequest(data);
    if (m === null) {
      if (this.dropped++ % 100 === 0) this.o.log('p2p: dropped a malformed message from the training worker');
      return;
    }
    switch (m.type) {
      case 'open':
        this.open(m.announced).catch((err: unknown) => {
          this.o.log(`p2p: the page could not start its peer (${(err as Error).message})`);
          this.post({ type: 'unavailable', reason: String((err as Error).message), fallback: true });
        });
        return;
      case 'peers':
        this.net?.setPeers(m.directory);
        return;
      case 'close':
        void this.stop();
        return;
      default: {
        const net = this.net;
        if (!net) return this.fail(m.id, new Error('the page has no peer running'));
        if (this.inFlight >= MAX_IN_FLIGHT)
          return this.fail(m.id, new Error('too many peer requests in flight'));
        this.inFlight++;
        serve(m, net)
          .then((bytes) => this.reply(m.id, bytes))
          .catch((err: unknown) => this.fail(m.id, err))
          .finally(() => this.inFlight--);
      }
    }
  }

  private async open(announced: string[]): Promise<void> {
    if (this.opening || this.net) return;
    this.opening = true;
    let canRtc = this.o.hasWebRTC;
    let start = this.o.start;
    if (!canRtc || !start) {
      const mod = await import('../worker/peer-network.ts');
      canRtc ??= mod.hasWebRTC;
      start ??= mod.startTabNetwork;
    }
    if (!canRtc()) {
      this.post({ type: 'unavailable', reason: 'this page has no RTCPeerConnection', fallback: true });
      return;
    }
    const o = this.o;
    const started = await start({ relayUrl: o.relayUrl, announced, secretKey: o.secretKey, log: o.log });
    if (this.stopped) {
      await started?.stop().catch(() => {});
      return;
    }
    if (!started) {
      // startTabNetwork logged why; a peer in the worker would meet the same relay, so no fallback.
      this.post({ type: 'unavailable', reason: 'libp2p is not reachable from this page', fallback: false });
      return;
    }
    this.net = started;
    started.onAnnounce?.((a) => {
      const bytes = encodeAnnounce(a).slice().buffer;
      this.post({ type: 'announce', announce: bytes }, [bytes]);
    });
    this.post({ type: 'opened', peerId: started.peerId });
    this.statsTimer = setInterval(() => {
      if (this.net) this.post({ type: 'stats', stats: statsOf(this.net) });
    }, o.statsIntervalMs ?? STATS_INTERVAL_MS);
  }
}
