// What the training worker tells the page: its phase and one sentence, and the counters of this tab's
// contribution. Counters run on across sessions (pause/resume starts a new one) and across visits (restored
// from this browser's local metrics); tokens/s and bandwidth are measured here with the client's own meter.
import { ThroughputMeter } from '@meshtrain/client';
import type { WebGpuDistroBackend } from '@meshtrain/distro';
import type { CachedCheckpoints } from './checkpoint-cache.ts';
import type { CountingRelayLink } from './counting-link.ts';
import type { CachedDataSource } from './data-cache.ts';
import { localMetrics } from './local-metrics.ts';
import type { LocalMetrics } from './local-metrics.ts';
import { emptyStats } from './protocol.ts';
import type { TrainerPhase, TrainerStats, TrainerStatus, WorkerToPage } from './protocol.ts';
import type { TabNetwork } from './tab-network.ts';
import type { WebGpuTrainingBackend } from '@meshtrain/client/webgpu-training';

/** The counters of one session (one join of the run). */
export interface SessionCounters {
  link: CountingRelayLink;
  checkpoints: CachedCheckpoints;
  data: CachedDataSource;
}

/** Where the figures come from at the moment of a report; each part may not exist (yet). */
export interface StatsSources {
  session: SessionCounters | null;
  mesh: TabNetwork | null;
  gpu: { backend: WebGpuTrainingBackend; distro: WebGpuDistroBackend } | null;
}

/** Counters that sum over sessions: the totals of the sessions that ended. */
const SESSION_TOTALS = [
  'resultsFromRelay',
  'resultBytesFromRelay',
  'listsFromPeers',
  'listsFromRelay',
  'bytesSent',
  'bytesReceived',
  'checkpointDownloadedBytes',
  'checkpointCacheHits',
  'dataDownloadedBytes',
  'dataCacheHits',
] as const satisfies readonly (keyof TrainerStats)[];

type SessionTotals = Record<(typeof SESSION_TOTALS)[number], number>;

const zeroTotals = (): SessionTotals =>
  Object.fromEntries(SESSION_TOTALS.map((k) => [k, 0])) as SessionTotals;

/** Bytes that count towards this tab's bandwidth. */
const trafficOf = (s: TrainerStats): number => s.bytesSent + s.bytesReceived + s.bytesFromPeers;

export class StatusReporter {
  readonly status: TrainerStatus = {
    phase: 'idle',
    message: 'Not started.',
    clientId: null,
    stats: emptyStats(),
  };
  private previous = zeroTotals();
  private metrics: LocalMetrics | null = null;
  /** Measures from the moment counting starts here; `trafficBase` is the traffic restored from before. */
  private meter: ThroughputMeter | null = null;
  private trafficBase = 0;
  private readonly post: (m: WorkerToPage) => void;
  private readonly sources: () => StatsSources;

  constructor(post: (m: WorkerToPage) => void, sources: () => StatsSources) {
    this.post = post;
    this.sources = sources;
  }

  log(line: string): void {
    this.post({ type: 'log', line });
  }

  setPhase(phase: TrainerPhase, message: string): void {
    this.status.phase = phase;
    this.status.message = message;
    this.publish();
  }

  /** A train step on the GPU: `tokens` in `ms` milliseconds. */
  recordStep(tokens: number, ms: number): void {
    this.meter?.recordTrainStep(tokens, ms);
  }

  /** Gathers the counters and sends the status to the page (and to this browser's local metrics). */
  publish(): void {
    const { session, mesh, gpu } = this.sources();
    const stats = this.status.stats;
    if (session) Object.assign(stats, this.totalsWith(session));
    if (mesh) {
      const p = mesh.stats();
      stats.p2pHost = mesh.host;
      stats.peerId = mesh.peerId;
      stats.peersConnected = p.peersConnected;
      stats.peersWebRTC = p.peersWebRTC;
      stats.peersRelayed = p.peersRelayed;
      stats.webrtcPeers = p.webrtcPeers;
      stats.resultsFromPeers = p.resultsFromPeers;
      stats.bytesFromPeers = p.bytesFromPeers;
      stats.resultBytesDirect = p.bytesDirect;
      stats.resultBytesRelayed = p.bytesRelayed;
    }
    if (gpu) {
      const b = gpu.backend.stats;
      stats.gpuResident = b.residentSteps > 0 && b.hostParamBytes + b.hostGradientBytes === 0;
      stats.gpuReadbackBytes = gpu.distro.stats.readbackBytes;
    }
    if (this.meter) {
      stats.tokensPerSec = this.meter.tokensPerSec;
      stats.bandwidth = this.meter.bandwidth(Date.now(), trafficOf(stats) - this.trafficBase);
    }
    if (session) this.metrics?.save(stats);
    this.post({ type: 'status', status: structuredClone(this.status) });
  }

  /** A session is ending: its counters become part of the totals the next one adds to. */
  carryOver(): void {
    this.publish();
    for (const k of SESSION_TOTALS) this.previous[k] = this.status.stats[k];
  }

  /** This browser's earlier record of the run (a reload, a new visit): the counters go on from there. */
  async restore(runId: string, clientId: string): Promise<void> {
    this.metrics = localMetrics(runId, clientId, (line) => this.log(line));
    const saved = await this.metrics.load();
    if (saved) {
      this.previous.bytesSent = saved.bytesSent;
      this.previous.bytesReceived = saved.bytesReceived;
      this.previous.checkpointDownloadedBytes = saved.checkpointDownloadedBytes;
      this.previous.dataDownloadedBytes = saved.dataDownloadedBytes;
      Object.assign(this.status.stats, saved);
      this.log(`restored this browser's record of run ${runId}: ${saved.batches} batches trained earlier`);
    }
    this.trafficBase = trafficOf(this.status.stats);
    this.meter = new ThroughputMeter(Date.now());
    this.publish();
  }

  private totalsWith(s: SessionCounters): SessionTotals {
    const p = this.previous;
    return {
      bytesSent: p.bytesSent + s.link.stats.bytesSent,
      bytesReceived: p.bytesReceived + s.link.stats.bytesReceived,
      resultsFromRelay: p.resultsFromRelay + s.link.results,
      resultBytesFromRelay: p.resultBytesFromRelay + s.link.resultBytes,
      listsFromPeers: p.listsFromPeers + s.link.stats.listsFromPeers,
      listsFromRelay: p.listsFromRelay + s.link.stats.listsFromRelay,
      checkpointDownloadedBytes: p.checkpointDownloadedBytes + s.checkpoints.stats.downloadedBytes,
      checkpointCacheHits: p.checkpointCacheHits + s.checkpoints.stats.cacheHits,
      dataDownloadedBytes: p.dataDownloadedBytes + s.data.stats.downloadedBytes,
      dataCacheHits: p.dataCacheHits + s.data.stats.hits,
    };
  }
}
