// The counters of a MeshNetwork's peer path, named once: MeshNetwork keeps them, and the browser tab's peer
// channel carries snapshots of them between the page and the training worker.

/** Counters of the peer path (JSON-serialisable; the `peers…` counts are computed when read). */
export interface MeshNetworkStats {
  /** Peers other than the relays this node holds an open connection to, now. */
  readonly peersConnected: number;
  /** Of those, peers with a direct WebRTC connection, and peers reached only through the relay's circuit. */
  readonly peersWebRTC: number;
  readonly peersRelayed: number;
  /** Round results fetched from peers instead of the relay, and their bytes. */
  resultsFromPeers: number;
  bytesFromPeers: number;
  /** Of those, the ones that came over a direct connection (WebRTC), and over the relay's circuit. */
  resultsDirect: number;
  bytesDirect: number;
  resultsRelayed: number;
  bytesRelayed: number;
  /** End-of-epoch parameter downloads from peers. */
  paramsFromPeers: number;
  /** Peers that delivered pieces of the last parameter download from peers. */
  lastParamsPeers: number;
  /** Bytes of parameters downloaded from peers, over all downloads. */
  paramBytesFromPeers: number;
}

/** MeshNetworkStats as plain numbers, read once (what crosses a postMessage). */
export type MeshStatsSnapshot = { -readonly [K in keyof MeshNetworkStats]: MeshNetworkStats[K] };

type PeerCount = 'peersConnected' | 'peersWebRTC' | 'peersRelayed';

/** The counters MeshNetwork adds to, all at zero. */
export function zeroTransferCounters(): Omit<MeshNetworkStats, PeerCount> {
  return {
    resultsFromPeers: 0,
    bytesFromPeers: 0,
    resultsDirect: 0,
    bytesDirect: 0,
    resultsRelayed: 0,
    bytesRelayed: 0,
    paramsFromPeers: 0,
    lastParamsPeers: 0,
    paramBytesFromPeers: 0,
  };
}

/** Every figure at zero: the stats of a peer not yet running. */
export function emptyMeshStats(): MeshStatsSnapshot {
  return { peersConnected: 0, peersWebRTC: 0, peersRelayed: 0, ...zeroTransferCounters() };
}

/** The names of every figure of MeshNetworkStats. */
export const MESH_STAT_KEYS: readonly (keyof MeshNetworkStats)[] = Object.keys(
  emptyMeshStats(),
) as (keyof MeshNetworkStats)[];

/** The figures of `stats` now (the peer counts are computed as they are read). */
export function meshStatsSnapshot(stats: MeshNetworkStats): MeshStatsSnapshot {
  const out = emptyMeshStats();
  for (const k of MESH_STAT_KEYS) out[k] = stats[k];
  return out;
}
