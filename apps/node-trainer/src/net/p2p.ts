// node-trainer's peer-to-peer path: the Node libp2p peer (packages/p2p createNodePeer) under the shared,
// isomorphic MeshNetwork of packages/client (which a tab runs on a browser peer on its page). What the network
// does (results as content-addressed blobs, parameters as pieced checkpoints) is documented there. The peer
// listens on `/p2p-circuit` and `/webrtc` (node-datachannel): tabs and other trainers reach it through the
// relay's circuit and then over direct WebRTC links that MeshNetwork keeps to the run's peers. It also listens
// on TCP on `host`, and on no WebSockets (nothing dials them; see packages/p2p README "What a Node node listens
// on"); none of its listeners can be brought down by malformed input (packages/p2p test/hostile-listeners).
import { MeshNetwork } from '@meshtrain/client';
import { createNodePeer } from '@meshtrain/p2p';

export { MeshNetwork, PARAM_PIECE_BYTES, peerFirstCheckpoints } from '@meshtrain/client';

export interface NodeMeshOptions {
  /** The relay's libp2p multiaddrs (`p2p_multiaddrs` of GET /api/runs/:id). */
  relayMultiaddrs: string[];
  /** The identity seed: the node's PeerId is the one the trainer announces in its Join. */
  seed: Uint8Array;
  /** Interface to listen on (default 0.0.0.0). */
  host?: string;
  log?: (line: string) => void;
}

/** Starts the Node libp2p peer, or returns null when the relay offers no libp2p addresses. */
export async function startNodeMesh(o: NodeMeshOptions): Promise<MeshNetwork | null> {
  if (o.relayMultiaddrs.length === 0) return null;
  const host = o.host ?? '0.0.0.0';
  const node = await createNodePeer({
    relayAddrs: o.relayMultiaddrs,
    privateKeySeed: o.seed,
    host,
    requireRelay: false,
    // A trainer told to listen on loopback (local-testnet) keeps its traffic there: ICE would gather
    // candidates on every interface, so no WebRTC; its peers reach it through the relay's circuit.
    webrtc: !isLoopback(host),
  });
  return new MeshNetwork(node, o.log ?? (() => {}));
}

function isLoopback(host: string): boolean {
  return /^127\./.test(host) || host === '::1' || host === 'localhost';
}
