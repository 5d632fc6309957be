import { circuitRelayTransport } from '@libp2p/circuit-relay-v2';
import { webRTC, webRTCDirect } from '@libp2p/webrtc';
import { webSockets } from '@libp2p/websockets';
import { webTransport } from '@libp2p/webtransport';
import { connectToRelays, peerServices, secureChannel } from './compose.ts';
import type { PeerServices, RelayClientOptions } from './compose.ts';
import { MeshNode } from './mesh-node.ts';
import type { MeshNodeOptions } from './mesh-node.ts';

/**
 * Browser entry point. It imports no Node transport (no TCP, no node: modules) so a Vite bundle of the web
 * app stays browser-only; the libp2p packages used here ship browser builds through their `browser` fields.
 * Everything protocol-level is re-exported so the web worker imports only this module.
 */
export * from './shared.ts';

export type BrowserPeerServices = PeerServices;

export type BrowserPeer = MeshNode<BrowserPeerServices>;

export interface BrowserPeerOptions extends MeshNodeOptions, RelayClientOptions {
  /**
   * Allow dialling `ws://` and private/loopback IPs. libp2p's browser connection gater refuses both by default
   * (browsers block mixed content from https pages anyway); enable only for local development and tests.
   */
  allowInsecureWs?: boolean;
  /** STUN/TURN servers for WebRTC between peers behind NAT (default none). */
  iceServers?: RTCIceServer[];
}

/**
 * A browser peer: WebSockets to the relay, WebRTC to peers (signalled through the relay's circuit, then
 * direct), WebRTC-direct to Node listeners that offer it, WebTransport dialling where a listener offers it.
 * Browsers cannot listen, so the peer listens on `/p2p-circuit` (reachable via the relay) and `/webrtc`
 * (the latter only where RTCPeerConnection exists: not in a dedicated worker).
 */
export async function createBrowserPeer(options: BrowserPeerOptions): Promise<BrowserPeer> {
  const rtcConfiguration = { iceServers: options.iceServers ?? [] };
  // Dedicated workers (where the web app runs its peer) have no RTCPeerConnection. Listening on `/webrtc`
  // there would advertise an address whose every dial fails only after the dialer's WebRTC retries, so a
  // peer without WebRTC offers only its circuit address and dials WebSockets/WebTransport.
  const rtc = hasWebRTC();
  const node = await MeshNode.create<BrowserPeerServices>(
    {
      addresses: { listen: rtc ? ['/p2p-circuit', '/webrtc'] : ['/p2p-circuit'] },
      transports: [
        webSockets(),
        ...(rtc ? [webRTC({ rtcConfiguration }), webRTCDirect({ rtcConfiguration })] : []),
        webTransport(),
        circuitRelayTransport(),
      ],
      ...secureChannel(),
      // Leaving the gater undefined keeps libp2p's browser default (deny ws:// and private IPs).
      connectionGater: options.allowInsecureWs === true ? { denyDialMultiaddr: () => false } : undefined,
      services: peerServices(),
    },
    options,
  );
  return await connectToRelays(node, options);
}

/** Whether this global scope can make WebRTC connections (windows can; dedicated workers cannot). */
export function hasWebRTC(): boolean {
  return typeof (globalThis as { RTCPeerConnection?: unknown }).RTCPeerConnection === 'function';
}
