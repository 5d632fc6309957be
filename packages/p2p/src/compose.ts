import { gossipsub } from '@libp2p/gossipsub';
import { identify } from '@libp2p/identify';
import type { Identify } from '@libp2p/identify';
import { noise } from '@libp2p/noise';
import { ping } from '@libp2p/ping';
import type { Ping } from '@libp2p/ping';
import { yamux } from '@libp2p/yamux';
import type { Multiaddr } from '@multiformats/multiaddr';
import { GOSSIP_OPTIONS } from './mesh-node.ts';
import type { MeshNode, MeshServices } from './mesh-node.ts';

/**
 * What every meshtrain libp2p node is built from, whichever entry point creates it (browser.ts, node.ts):
 * Noise encryption, yamux muxing, and identify + ping + gossipsub. The entry points add their own transports
 * (and the relay its circuit-relay server). Browser-safe: it imports no Node transport.
 */

export interface PeerServices extends MeshServices {
  identify: Identify;
  ping: Ping;
}

/** Encryption and muxing, identical on every node so any two can talk. */
export function secureChannel() {
  return { connectionEncrypters: [noise()], streamMuxers: [yamux()] };
}

/** The services every node runs (fresh factories per node). */
export function peerServices() {
  return { identify: identify(), ping: ping(), pubsub: gossipsub(GOSSIP_OPTIONS) };
}

/** How a peer (browser or Node) reaches the relay. */
export interface RelayClientOptions {
  /**
   * Relay multiaddrs (with /p2p/RELAY_ID), e.g. `/dns4/HOST/tcp/443/wss/p2p/ID` in production or the relay's
   * `/webrtc-direct/certhash/...` one; the peer connects and reserves a slot on each reachable one.
   */
  relayAddrs: Array<string | Multiaddr>;
  /** Throw RelayUnreachableError if no relay answers (default true). */
  requireRelay?: boolean;
  relayDialTimeoutMs?: number;
}

/**
 * Connects a new peer to its relays. If none answers and the relay is required, the peer is stopped and the
 * error thrown; otherwise the peer is returned unconnected (it may still reach peers directly).
 */
export async function connectToRelays<S extends MeshServices>(
  node: MeshNode<S>,
  options: RelayClientOptions,
): Promise<MeshNode<S>> {
  try {
    await node.connectRelays(options.relayAddrs, options.relayDialTimeoutMs);
  } catch (err) {
    if (options.requireRelay ?? true) {
      await node.stop();
      throw err;
    }
  }
  return node;
}
