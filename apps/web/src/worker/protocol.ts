// The typed messages between the page and the training worker. The page never touches the GPU, the model or
// the coordinator session directly: everything goes through these messages, in both directions.

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
  | { type: 'start'; run: RunTarget; secretKeyHex: string; throttle: Throttle; visible: boolean }
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
  /** libp2p: peers this tab is connected to, and results / bytes it fetched from peers instead of the relay. */
  peersConnected: number;
  resultsFromPeers: number;
  bytesFromPeers: number;
  /** Parameters and gradients stay in GPU buffers between steps (DisTrO's WGSL on ORT's device). */
  gpuResident: boolean;
  /** Bytes the training path read back from the GPU (compressed results, norms; not parameters). */
  gpuReadbackBytes: number;
  /** (step, loss) of this tab's own batches. */
  losses: { step: number; loss: number }[];
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
    peersConnected: 0,
    resultsFromPeers: 0,
    bytesFromPeers: 0,
    gpuResident: false,
    gpuReadbackBytes: 0,
    losses: [],
  };
}
