// The tab's libp2p peer: it reaches the relay's libp2p node over a WebSocket and other peers through the
// relay's circuit, and joins the run's mesh as @meshtrain/client's MeshNetwork — results fetched from their
// trainers and served to others by commitment, epoch parameters by their hash. The relay stays the
// guaranteed path: without a libp2p node on the relay, or when dialling it fails, the tab trains exactly as
// before.
//
// It runs on the page's main thread (lib/peer-host.ts), where RTCPeerConnection exists: there it also listens
// on `/webrtc` and keeps direct WebRTC links to the run's peers, signalled over the relay's circuit. Where the
// page cannot host it (no RTCPeerConnection), the training worker starts it itself; a dedicated worker has no
// RTCPeerConnection either, so that peer is circuit-only (createBrowserPeer leaves the WebRTC transports out).
import { MeshNetwork } from '@meshtrain/client';
import { createBrowserPeer } from '@meshtrain/p2p/browser';
import { pageRelayAddrs } from './relay-addrs.ts';

export { hasWebRTC } from '@meshtrain/p2p/browser';

export interface TabNetworkOptions {
  relayUrl: string;
  /** `p2p_multiaddrs` of GET /api/runs/:id (empty when the relay runs without libp2p). */
  announced: readonly string[];
  /** The volunteer's Ed25519 seed: the PeerId derives from the same key as the coordinator identity. */
  secretKey: Uint8Array;
  log: (line: string) => void;
  dialTimeoutMs?: number;
}

/** The tab's MeshNetwork, or null (and one log line saying why) when the relay offers no reachable libp2p. */
export async function startTabNetwork(o: TabNetworkOptions): Promise<MeshNetwork | null> {
  if (o.announced.length === 0) {
    o.log('p2p: the relay runs without libp2p; results and checkpoints come from the relay');
    return null;
  }
  const relayAddrs = pageRelayAddrs(o.relayUrl, o.announced);
  try {
    const peer = await createBrowserPeer({
      relayAddrs,
      privateKeySeed: o.secretKey,
      // ws:// and private addresses are refused by libp2p's browser defaults; a page served over plain http
      // (local development, a LAN relay) has nothing else to dial.
      allowInsecureWs: new URL(o.relayUrl).protocol === 'http:',
      ...(o.dialTimeoutMs !== undefined ? { relayDialTimeoutMs: o.dialTimeoutMs } : {}),
    });
    o.log(
      `p2p: peer ${peer.peerId} connected to the relay (${relayAddrs.length} address(es) tried); ` +
        (peer.webrtc ? 'WebRTC links to peers' : 'no RTCPeerConnection here: peers through the relay only'),
    );
    return new MeshNetwork(peer, (line) => o.log(line));
  } catch (e) {
    o.log(`p2p: not available (${(e as Error).message}); results and checkpoints come from the relay`);
    return null;
  }
}
