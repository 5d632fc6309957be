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

/** What the host needs of the peer it runs (MeshNetwork; tests pass their own). */
export type HostedNetwork = Pick<
  MeshNetwork,
  | 'peerId'
  | 'setPeers'
  | 'publish'
  | 'fetch'
  | 'fetchParams'
  | 'shareCheckpoint'
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
  let net: HostedNetwork | null = null;
  let opening = false;
  let stopped = false;
  let inFlight = 0;
  let dropped = 0;
  let statsTimer: ReturnType<typeof setInterval> | undefined;

  const post = (m: PeerHostReply, transfer: Transferable[] = []) => {
    if (!stopped) port.postMessage(m, transfer);
  };
  const reply = (id: number, bytes: ArrayBuffer | null) =>
    post({ type: 'reply', id, bytes }, bytes ? [bytes] : []);
  const fail = (id: number, e: unknown) =>
    post({ type: 'reply', id, bytes: null, error: e instanceof Error ? e.message : String(e) });
  const pushStats = () => {
    if (net) post({ type: 'stats', stats: statsOf(net) });
  };

  async function open(announced: string[]): Promise<void> {
    if (opening || net) return;
    opening = true;
    let canRtc = o.hasWebRTC;
    let start = o.start;
    if (!canRtc || !start) {
      const mod = await import('../worker/peer-network.ts');
      canRtc ??= mod.hasWebRTC;
      start ??= mod.startTabNetwork;
    }
    if (!canRtc()) {
      post({ type: 'unavailable', reason: 'this page has no RTCPeerConnection', fallback: true });
      return;
    }
    const started = await start({ relayUrl: o.relayUrl, announced, secretKey: o.secretKey, log: o.log });
    if (stopped) {
      await started?.stop().catch(() => {});
      return;
    }
    if (!started) {
      // startTabNetwork logged why; a peer in the worker would meet the same relay, so no fallback.
      post({ type: 'unavailable', reason: 'libp2p is not reachable from this page', fallback: false });
      return;
    }
    net = started;
    net.onAnnounce?.((a) => {
      const bytes = encodeAnnounce(a).slice().buffer;
      post({ type: 'announce', announce: bytes }, [bytes]);
    });
    post({ type: 'opened', peerId: net.peerId });
    statsTimer = setInterval(pushStats, o.statsIntervalMs ?? 1000);
  }

  async function serve(m: PeerHostRequest & { id: number }, n: HostedNetwork): Promise<void> {
    switch (m.type) {
      case 'publish': {
        const announce = decodeAnnounce(new Uint8Array(m.announce));
        await n.publish(announce, new Uint8Array(m.frame));
        return reply(m.id, null);
      }
      case 'fetch': {
        const frame = await n.fetch(new Uint8Array(m.commitment), m.hints);
        // A copy to transfer: the fetched bytes also sit in the peer's blob store, which serves them on.
        return reply(m.id, frame ? frame.slice().buffer : null);
      }
      case 'fetchParams': {
        const got = await n.fetchParams(new Uint8Array(m.paramHash), new Map(m.sizes));
        if (!got) return reply(m.id, null);
        const packed = new Float32Array(m.sizes.reduce((a, [, c]) => a + c, 0));
        let off = 0;
        for (const [name, count] of m.sizes) {
          const t = got.get(name);
          if (!t || t.length !== count) return reply(m.id, null);
          packed.set(t, off);
          off += count;
        }
        return reply(m.id, packed.buffer);
      }
      case 'shareCheckpoint': {
        const params = new Map<string, Float32Array>();
        let off = 0;
        m.names.forEach((name, i) => {
          const count = m.lengths[i] as number;
          params.set(name, new Float32Array(m.params, 4 * off, count));
          off += count;
        });
        await n.shareCheckpoint({
          step: m.step,
          epoch: m.epoch,
          paramHash: new Uint8Array(m.paramHash),
          params,
        });
        return reply(m.id, null);
      }
    }
  }

  port.onmessage = (e: MessageEvent<unknown>) => {
    const m = parseHostRequest(e.data);
    if (m === null) {
      if (dropped++ % 100 === 0) o.log('p2p: dropped a malformed message from the training worker');
      return;
    }
    switch (m.type) {
      case 'open':
        open(m.announced).catch((err: unknown) => {
          o.log(`p2p: the page could not start its peer (${(err as Error).message})`);
          post({ type: 'unavailable', reason: String((err as Error).message), fallback: true });
        });
        return;
      case 'peers':
        net?.setPeers(m.directory);
        return;
      case 'close':
        void host.stop();
        return;
      default: {
        if (!net) return fail(m.id, new Error('the page has no peer running'));
        if (inFlight >= MAX_IN_FLIGHT) return fail(m.id, new Error('too many peer requests in flight'));
        inFlight++;
        serve(m, net)
          .catch((err: unknown) => fail(m.id, err))
          .finally(() => inFlight--);
      }
    }
  };
  port.start();

  const host: PeerHost = {
    network: () => net,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(statsTimer);
      port.close();
      const n = net;
      net = null;
      await n?.stop().catch(() => {});
    },
  };
  return host;
}
