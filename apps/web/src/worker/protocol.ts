// The typed messages between the page and the training worker. The page never touches the GPU, the model or
// the coordinator session directly: everything goes through these messages, in both directions.
import type { MeshStatsSnapshot } from '@meshtrain/client/mesh-stats';

/** What the page tells the worker about the run it should contribute to. */
export interface RunTarget {
  runId: string;
  /** http(s)://host:port of the relay (the page's origin). */
  relayUrl: string;
  /** `[meshtrain].preset` of the run (model shape), if the run names one. */
  preset: string | null;
  /** `[model.LLM].max_seq_len`. */
  seqLen: number;
  /** `[meshtrain].micro_batch_size`: the most sequences the run wants per forward/backward pass. */
  microBatchSize: number;
}

/** How much of this machine the volunteer gives. */
export interface Throttle {
  /** Share of wall time spent training, 0.1..1 (the worker sleeps in between steps to honour it). */
  share: number;
  /** Only train while the tab is visible. */
  onlyWhenVisible: boolean;
}

export type PageToWorker =
  | {
      type: 'start';
      run: RunTarget;
      secretKeyHex: string;
      throttle: Throttle;
      visible: boolean;
      /**
       * The worker's end of a MessageChannel whose other end the page serves with its libp2p peer (lib/peer-host.ts; messages PeerHostRequest / PeerHostReply below). The page's main
       * thread has RTCPeerConnection, the worker does not, so a tab's peer lives there to reach other peers
       * over WebRTC. null: the worker starts a circuit-only peer of its own.
       */
      peerPort: MessagePort | null;
    }
  | { type: 'pause' }
  | { type: 'resume' }
  | { type: 'throttle'; throttle: Throttle }
  | { type: 'visibility'; visible: boolean }
  | { type: 'generate'; prompt: string; maxTokens: number }
  | { type: 'stop' };

export interface AdapterSummary {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** Software adapter (e.g. SwiftShader): works, but far slower than a real GPU. */
  isFallbackAdapter: boolean;
}

/** What the device probe found, and the micro-batch it chose within the adapter's limits. */
export interface DeviceProbe {
  adapter: AdapterSummary;
  limits: {
    maxBufferSize: number;
    maxStorageBufferBindingSize: number;
    maxComputeWorkgroupSizeX: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxStorageBuffersPerShaderStage: number;
  };
  features: string[];
  /** Sequences per train-step call on this device (≤ the run's micro_batch_size). */
  microBatch: number;
  /** Why that micro-batch: which limit bound it. */
  microBatchReason: string;
}

export type TrainerPhase =
  | 'idle'
  | 'probing'
  | 'no-webgpu'
  | 'ready'
  | 'connecting'
  | 'training'
  | 'paused'
  | 'throttled'
  | 'stopped'
  | 'error';

/** Counters the worker keeps for the volunteer page. */
export interface TrainerStats {
  /** Rounds this tab trained in (its assigned batches). */
  batches: number;
  bytesSent: number;
  bytesReceived: number;
  /** Bytes of the results (DisTrO-compressed updates) this tab produced. */
  resultBytes: number;
  /** Bytes of the fp32 gradients those results stand for (compression ratio = raw / result bytes). */
  rawGradientBytes: number;
  /** Checkpoint bytes this tab downloaded from the relay, and checkpoints it took from its own cache. */
  checkpointDownloadedBytes: number;
  checkpointCacheHits: number;
  /** Training-data bytes downloaded from the relay, and samples served from this browser's data cache. */
  dataDownloadedBytes: number;
  dataCacheHits: number;
  /**
   * libp2p: where this tab's peer runs (the page: WebRTC to other peers; the worker: the relay's circuit
   * only; none), its PeerId, and the peers it is connected to, in all and by how.
   */
  p2pHost: PeerHostKind;
  peerId: string | null;
  peersConnected: number;
  peersWebRTC: number;
  peersRelayed: number;
  /** PeerIds this tab holds a direct WebRTC connection to (at most MAX_LISTED_PEERS). */
  webrtcPeers: string[];
  /** Results / bytes this tab fetched from peers instead of the relay. */
  resultsFromPeers: number;
  bytesFromPeers: number;
  /**
   * Where the result bytes this tab fetched came from: directly from a peer (WebRTC), from a peer through
   * the relay's circuit, or from the relay's HTTP API (its stored copy, the fallback).
   */
  resultBytesDirect: number;
  resultBytesRelayed: number;
  resultBytesFromRelay: number;
  resultsFromRelay: number;
  /** Closed rounds' admitted lists this tab (a light replica) got from peers and from the relay. */
  listsFromPeers: number;
  listsFromRelay: number;
  /** Parameters and gradients stay in GPU buffers between steps (DisTrO's WGSL on ORT's device). */
  gpuResident: boolean;
  /** Bytes the training path read back from the GPU (compressed results, norms; not parameters). */
  gpuReadbackBytes: number;
  /** (step, loss) of this tab's own batches. */
  losses: { step: number; loss: number }[];
  /** Tokens per second of this tab's last train step on the GPU (0 before the first). */
  tokensPerSec: number;
  /**
   * Bytes per second this tab moved over about the last minute: its coordinator connection (results and
   * state, the relay's HTTP results) and results from peers.
   */
  bandwidth: number;
}

/** The counters a tab keeps across reloads (worker/local-metrics.ts); the rest describe this session only. */
export const SAVED_STATS = [
  'batches',
  'bytesSent',
  'bytesReceived',
  'resultBytes',
  'rawGradientBytes',
  'checkpointDownloadedBytes',
  'dataDownloadedBytes',
  'losses',
] as const satisfies readonly (keyof TrainerStats)[];

export type SavedStats = Pick<TrainerStats, (typeof SAVED_STATS)[number]>;

export interface TrainerStatus {
  phase: TrainerPhase;
  /** One sentence for the volunteer: what the worker is doing or why it is not. */
  message: string;
  /** This tab's coordinator identity (public key hex), once known. */
  clientId: string | null;
  stats: TrainerStats;
}

export type WorkerToPage =
  | { type: 'status'; status: TrainerStatus }
  | { type: 'probe'; probe: DeviceProbe }
  | { type: 'log'; line: string }
  | { type: 'generated'; prompt: string; text: string }
  | { type: 'error'; where: string; message: string };

export function emptyStats(): TrainerStats {
  return {
    batches: 0,
    bytesSent: 0,
    bytesReceived: 0,
    resultBytes: 0,
    rawGradientBytes: 0,
    checkpointDownloadedBytes: 0,
    checkpointCacheHits: 0,
    dataDownloadedBytes: 0,
    dataCacheHits: 0,
    p2pHost: 'none',
    peerId: null,
    peersConnected: 0,
    peersWebRTC: 0,
    peersRelayed: 0,
    webrtcPeers: [],
    resultsFromPeers: 0,
    bytesFromPeers: 0,
    resultBytesDirect: 0,
    resultBytesRelayed: 0,
    resultBytesFromRelay: 0,
    resultsFromRelay: 0,
    listsFromPeers: 0,
    listsFromRelay: 0,
    gpuResident: false,
    gpuReadbackBytes: 0,
    losses: [],
    tokensPerSec: 0,
    bandwidth: 0,
  };
}

export type PeerHostKind = 'page' | 'worker' | 'none';

// --- The peer channel: the training worker's PeerNetwork proxy (worker/page-peer.ts) ⇄ the page's libp2p
// peer (lib/peer-host.ts). Binary payloads travel as transferred ArrayBuffers; each side checks what it gets
// (worker/peer-messages.ts) before using it.

/** Most PeerIds a stats message lists, and most clients a peer directory carries. */
export const MAX_LISTED_PEERS = 64;
export const MAX_DIRECTORY_CLIENTS = 4096;

/** How each client's libp2p peer is known (MeshNetwork's PeerDirectory, bounded by MAX_DIRECTORY_CLIENTS). */
export interface PeerDirectoryMessage {
  epochClients: { id: string; p2p_id: string }[];
  members: { id: string; p2p_id: string }[];
}

/** Worker → page. `id` pairs a request with its reply. */
export type PeerHostRequest =
  /** Start the page's peer on these relay addresses (`p2p_multiaddrs` of the run). */
  | { type: 'open'; announced: string[] }
  | { type: 'peers'; directory: PeerDirectoryMessage }
  /** core's encoded Announce and the SignedResult frame (a transferred copy). */
  | { type: 'publish'; id: number; announce: ArrayBuffer; frame: ArrayBuffer }
  /** A TrainingResult frame by its 32-byte commitment; `hints`: coordinator ids likely to hold it. */
  | { type: 'fetch'; id: number; commitment: ArrayBuffer; hints: string[] }
  /** Parameters by their 32-byte hash; `sizes`: [name, float count] of every parameter. */
  | { type: 'fetchParams'; id: number; paramHash: ArrayBuffer; sizes: [string, number][] }
  /** Parameters to serve to joiners: `names` in parameterOrder, their float32 values back to back in `params`. */
  | {
      type: 'shareCheckpoint';
      id: number;
      step: number;
      epoch: number;
      paramHash: ArrayBuffer;
      names: string[];
      lengths: number[];
      params: ArrayBuffer;
    }
  /** Bytes to serve to peers under their SHA-256 (a closed round's admitted list). */
  | { type: 'shareBlob'; id: number; bytes: ArrayBuffer }
  /** Bytes by their 32-byte SHA-256, from a few of the run's peers. */
  | { type: 'fetchBlob'; id: number; address: ArrayBuffer }
  | { type: 'close' };

/** What the page's peer reports about itself (MeshNetworkStats plus how each peer is reached). */
export interface PeerStatsMessage extends MeshStatsSnapshot {
  webrtcPeers: string[];
}

/** Page → worker. */
export type PeerHostReply =
  /** The page's peer runs (answer to `open`). */
  | { type: 'opened'; peerId: string }
  /** No peer: the page cannot host one (`fallback`: the worker may start its own) or libp2p is unreachable. */
  | { type: 'unavailable'; reason: string; fallback: boolean }
  /**
   * Answer to request `id`: `bytes` is the fetched frame, the packed parameters (float32, in the order of
   * the request's sizes) or null (not available, or nothing to return); `error` when the request failed.
   */
  | { type: 'reply'; id: number; bytes: ArrayBuffer | null; error?: string }
  | { type: 'stats'; stats: PeerStatsMessage }
  /** An announce the page's peer heard (core's encoding). */
  | { type: 'announce'; announce: ArrayBuffer };
