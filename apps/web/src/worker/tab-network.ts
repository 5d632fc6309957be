// What the training worker needs of the tab's libp2p peer, wherever that peer runs: on the page's main thread
// behind the peer channel (page-peer.ts → lib/peer-host.ts: WebRTC to other peers), or in this worker
// (circuit-only: a dedicated worker has no RTCPeerConnection). Types and a small wrapper only, so the worker
// loads libp2p only when it hosts the peer itself.
import type { BlobPeers, MeshNetwork, PeerNetwork, PeerParams } from '@meshtrain/client';
import { emptyMeshStats, meshStatsSnapshot } from '@meshtrain/client/mesh-stats';
import type { CoordinatorState } from '@meshtrain/core';
import { MAX_LISTED_PEERS } from './protocol.ts';
import type { PeerStatsMessage } from './protocol.ts';

export interface TabNetwork extends Omit<PeerNetwork, keyof BlobPeers>, BlobPeers, PeerParams {
  /** Where the peer runs: 'page' (WebRTC to peers) or 'worker' (relay circuit only). */
  readonly host: 'page' | 'worker';
  readonly peerId: string;
  /** A snapshot of the peer's counters (JSON-serialisable). */
  stats(): PeerStatsMessage;
  /** Follow the coordinator: which PeerId belongs to which client. */
  setState(state: CoordinatorState): void;
  stop(): Promise<void>;
}

/** MeshNetwork's counters and how its peers are reached, as the peer channel and the page show them. */
export function statsOf(mesh: Pick<MeshNetwork, 'stats' | 'peerLinks'>): PeerStatsMessage {
  const links = mesh.peerLinks();
  return {
    ...meshStatsSnapshot(mesh.stats),
    webrtcPeers: Object.keys(links)
      .filter((p) => links[p] === 'webrtc')
      .slice(0, MAX_LISTED_PEERS),
  };
}

export function emptyPeerStats(): PeerStatsMessage {
  return { ...emptyMeshStats(), webrtcPeers: [] };
}

/** A MeshNetwork running in this worker, as a TabNetwork. */
export function workerTabNetwork(mesh: MeshNetwork): TabNetwork {
  return {
    host: 'worker',
    peerId: mesh.peerId,
    publish: (announce, frame) => mesh.publish(announce, frame),
    fetch: (commitment, hints) => mesh.fetch(commitment, hints),
    fetchParams: (hash, sizes) => mesh.fetchParams(hash, sizes),
    shareCheckpoint: (ck) => mesh.shareCheckpoint(ck),
    shareBlob: (bytes) => mesh.shareBlob(bytes),
    fetchBlob: (address) => mesh.fetchBlob(address),
    stats: () => statsOf(mesh),
    setState: (state) => mesh.setState(state),
    stop: () => mesh.stop(),
  };
}
