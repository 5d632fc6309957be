import { circuitRelayServer, circuitRelayTransport } from '@libp2p/circuit-relay-v2';
import type { CircuitRelayService } from '@libp2p/circuit-relay-v2';
import { tcp } from '@libp2p/tcp';
import { webRTC, webRTCDirect } from '@libp2p/webrtc';
import type { Libp2pOptions } from 'libp2p';
import { connectToRelays, peerServices, secureChannel } from './compose.ts';
import type { PeerServices, RelayClientOptions } from './compose.ts';
import { InvalidArgumentError } from './errors.ts';
import { MeshNode } from './mesh-node.ts';
import type { MeshNodeOptions, MeshServices } from './mesh-node.ts';
import { holdNativeWebRTC } from './native-webrtc.ts';
import { guardedWebSockets } from './websockets-guard.ts';
import {
  DEFAULT_INBOUND_CONNECTION_THRESHOLD,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_INCOMING_PENDING_CONNECTIONS,
  DEFAULT_MAX_RESERVATIONS,
  DEFAULT_RELAY_DURATION_LIMIT_MS,
} from './defaults.ts';

/**
 * Node factories: the relay (apps/relay) and Node peers (node-trainer). Node-only transports (TCP, the
 * WebRTC-direct listener) live here so browser bundles, which import browser.ts, never pull them in.
 * Every WebSockets listener a Node node opens is guarded (websockets-guard.ts): one malformed frame from an
 * unauthenticated socket used to end the process.
 */

export interface RelayServices extends PeerServices {
  relay: CircuitRelayService;
}

export type NodePeerServices = PeerServices;

export type RelayNode = MeshNode<RelayServices>;
export type NodePeer = MeshNode<NodePeerServices>;

export interface RelayNodeOptions extends MeshNodeOptions {
  /** Interface the WebSockets listener binds (default 127.0.0.1; 0.0.0.0 for a public relay). */
  host?: string;
  /** WebSockets port (default 0 = any free port). */
  port?: number;
  /** Also listen on `/udp/PORT/webrtc-direct` so browsers can reach the relay without WebSockets (default true). */
  webrtcDirect?: boolean;
  webrtcDirectPort?: number;
  /**
   * Addresses to announce instead of the listen addresses, e.g. `/dns4/relay.example/tcp/443/wss` behind a
   * TLS proxy, or the public port when libp2p listens behind Hono's upgrade dispatcher
   * (docs/architecture.md "Runtime notes").
   */
  announce?: string[];
  /** Addresses announced in addition to the listen addresses (e.g. the shared public port, keeping WebRTC-direct). */
  appendAnnounce?: string[];
  /** Concurrent relay reservations (default 512). */
  maxReservations?: number;
  /**
   * Per relayed connection limits. libp2p's defaults (2 min, 128 KiB) are for strangers' traffic; ours is our
   * own volunteers' results and checkpoints when no direct path exists, so the defaults are 30 min and 1 GiB.
   */
  relayDurationLimitMs?: number;
  relayDataLimitBytes?: bigint;
  /** Upper bound on open connections (default 1024). */
  maxConnections?: number;
  /** Inbound connections per second accepted from one host (libp2p's default is 5). */
  inboundConnectionThreshold?: number;
  maxIncomingPendingConnections?: number;
  /** ICE servers for the WebRTC-direct listener (default none). */
  iceServers?: RTCIceServer[];
}

/**
 * The relay's libp2p node: WebSockets (+ WebRTC-direct) listener, circuit-relay-v2 server, identify, ping,
 * and gossipsub. The relay subscribes to run topics (`subscribe`) so announcements reach every peer through
 * it even when peers have no connection to each other; it also serves blobs and checkpoints, which is how
 * "the relay stores and forwards every round's results" is served to peers over libp2p.
 */
export async function createRelayNode(options: RelayNodeOptions = {}): Promise<RelayNode> {
  const host = options.host ?? '127.0.0.1';
  const listen = [`${ipPrefix(host)}/tcp/${options.port ?? 0}/ws`];
  const transports: NonNullable<Libp2pOptions['transports']> = [guardedWebSockets()];
  const rtcConfiguration = { iceServers: options.iceServers ?? [] };
  if (options.webrtcDirect ?? true) {
    listen.push(`${ipPrefix(host)}/udp/${options.webrtcDirectPort ?? 0}/webrtc-direct`);
    transports.push(webRTCDirect({ rtcConfiguration }));
  }
  return await createHolding<RelayServices>(
    {
      addresses: { listen, announce: options.announce ?? [], appendAnnounce: options.appendAnnounce ?? [] },
      transports,
      ...secureChannel(),
      connectionManager: {
        maxConnections: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
        // libp2p refuses more than 5 inbound connections per second from one host. Behind the relay's shared
        // HTTP port every peer arrives from the splice on 127.0.0.1, and a run start or a reconnect wave is
        // many peers at once: rate limiting belongs at the public edge, not per source address here.
        inboundConnectionThreshold:
          options.inboundConnectionThreshold ?? DEFAULT_INBOUND_CONNECTION_THRESHOLD,
        maxIncomingPendingConnections:
          options.maxIncomingPendingConnections ?? DEFAULT_MAX_INCOMING_PENDING_CONNECTIONS,
      },
      services: {
        ...peerServices(),
        relay: circuitRelayServer({
          reservations: {
            maxReservations: options.maxReservations ?? DEFAULT_MAX_RESERVATIONS,
            defaultDurationLimit: options.relayDurationLimitMs ?? DEFAULT_RELAY_DURATION_LIMIT_MS,
            defaultDataLimit: options.relayDataLimitBytes ?? BigInt(1024 * 1024 * 1024),
          },
        }),
      },
    },
    options,
  );
}

export interface NodePeerOptions extends MeshNodeOptions, RelayClientOptions {
  /** Interface the TCP/WebSockets listeners bind (default 0.0.0.0). */
  host?: string;
  /** Listen on TCP (default true). */
  tcp?: boolean;
  tcpPort?: number;
  /**
   * Listen on WebSockets too (default false). Nothing dials a Node peer's WebSockets address: browsers and
   * other peers reach it through the relay's circuit and WebRTC, browsers could not dial a plain `ws://`
   * address from an https page anyway, and Node peers have TCP. Dialling WebSockets (the relay) always works.
   */
  ws?: boolean;
  wsPort?: number;
  /** Listen on `/udp/PORT/webrtc-direct` too, for peers with a reachable UDP port (default false). */
  webrtcDirect?: boolean;
  webrtcDirectPort?: number;
  /**
   * WebRTC links to peers: listen on `/webrtc` and dial peers' `/p2p-circuit/webrtc` addresses (default true).
   * ICE gathers candidates on every interface whatever `host` says, so a peer meant to stay on one interface
   * (e.g. loopback) turns it off and reaches peers through the relay's circuit only.
   */
  webrtc?: boolean;
  /**
   * ICE servers for WebRTC. Default none: libp2p would otherwise use public STUN servers of third parties.
   * Production should pass the run's STUN/TURN servers; without them only peers on the same network or with
   * public addresses connect directly (the relay path still works).
   */
  iceServers?: RTCIceServer[];
  announce?: string[];
  appendAnnounce?: string[];
}

/**
 * A Node peer (node-trainer): a TCP listener (+ optional WebSockets and WebRTC-direct ones), WebRTC and the
 * circuit-relay transport, so browsers can reach it through the relay and upgrade to a direct WebRTC link.
 */
export async function createNodePeer(options: NodePeerOptions): Promise<NodePeer> {
  const host = options.host ?? '0.0.0.0';
  const rtcConfiguration = { iceServers: options.iceServers ?? [] };
  const rtc = options.webrtc ?? true;
  const listen = rtc ? ['/p2p-circuit', '/webrtc'] : ['/p2p-circuit'];
  // WebRTC-direct is always available for dialling (relays and Node peers that listen on it); listening on
  // it is opt-in because it needs a reachable UDP port.
  const transports: NonNullable<Libp2pOptions['transports']> = [
    guardedWebSockets(),
    ...(rtc ? [webRTC({ rtcConfiguration })] : []),
    webRTCDirect({ rtcConfiguration }),
    circuitRelayTransport(),
  ];
  if (options.tcp ?? true) {
    transports.push(tcp());
    listen.push(`${ipPrefix(host)}/tcp/${options.tcpPort ?? 0}`);
  }
  if (options.ws ?? false) listen.push(`${ipPrefix(host)}/tcp/${options.wsPort ?? 0}/ws`);
  if (options.webrtcDirect ?? false) {
    listen.push(`${ipPrefix(host)}/udp/${options.webrtcDirectPort ?? 0}/webrtc-direct`);
  }
  const node = await createHolding<NodePeerServices>(
    {
      addresses: { listen, announce: options.announce ?? [], appendAnnounce: options.appendAnnounce ?? [] },
      transports,
      ...secureChannel(),
      services: peerServices(),
    },
    options,
  );
  return await connectToRelays(node, options);
}

/** MeshNode.create, holding node-datachannel's native state (native-webrtc.ts) until the node stopped. */
async function createHolding<S extends MeshServices>(
  libp2pOptions: Libp2pOptions<S>,
  options: MeshNodeOptions,
): Promise<MeshNode<S>> {
  const release = holdNativeWebRTC();
  try {
    return await MeshNode.create<S>(libp2pOptions, { ...options, onStopped: release });
  } catch (err) {
    release();
    throw err;
  }
}

function ipPrefix(host: string): string {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(host)) return `/ip4/${host}`;
  if (host.includes(':')) return `/ip6/${host}`;
  throw new InvalidArgumentError(`host must be an IPv4 or IPv6 address, got "${host}"`);
}
