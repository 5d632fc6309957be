// The training worker: probes the GPU (adapter limits → micro-batch), then runs @meshtrain/client in this
// worker — coordinator session over the relay's WebSocket (RelayLink), data and checkpoints over its HTTP
// API, the train step on onnxruntime-web's WebGPU EP and DisTrO's WGSL on the same GPUDevice, so parameters
// and gradients stay in GPU buffers. The page only sees the typed messages of protocol.ts. The tab's libp2p
// peer runs on the page (it needs RTCPeerConnection for WebRTC): the client here reaches it through the peer
// channel's PeerNetwork proxy (page-peer.ts), or through a circuit-only peer of its own when the page cannot.
import {
  Client,
  foldedDataSource,
  peerFirstCheckpoints,
  relayCheckpoints,
  relayDataSource,
} from '@meshtrain/client';
import type { ClientEvent } from '@meshtrain/client';
import { bytesToHex, hexToBytes, parseRunConfig, publicKeyOf } from '@meshtrain/core';
import type { CoordinatorState, RunConfig } from '@meshtrain/core';
import { createWebGpuBackend } from '@meshtrain/distro';
import type { WebGpuDistroBackend } from '@meshtrain/distro';
import {
  ByteTokenizer,
  initParameters,
  modelConfigForRun,
  parameterCount,
  parameterSizes,
} from '@meshtrain/model';
import type { LlamaConfig } from '@meshtrain/model';
import { probeDevice } from './device-probe.ts';
import { emptyStats } from './protocol.ts';
import type {
  PageToWorker,
  RunTarget,
  Throttle,
  TrainerPhase,
  TrainerStatus,
  WorkerToPage,
} from './protocol.ts';
import { cachedCheckpoints } from './checkpoint-cache.ts';
import type { CachedCheckpoints } from './checkpoint-cache.ts';
import { cachedDataSource } from './data-cache.ts';
import type { CachedDataSource } from './data-cache.ts';
import { createTrainingDevice, WebGpuTrainingBackend } from './webgpu-backend.ts';
import { CountingRelayLink } from './counting-link.ts';
import { PagePeerNetwork } from './page-peer.ts';
import { workerTabNetwork } from './tab-network.ts';
import type { TabNetwork } from './tab-network.ts';
import { localMetrics } from './local-metrics.ts';
import type { LocalMetrics } from './local-metrics.ts';

interface WorkerScope {
  postMessage(message: WorkerToPage): void;
  addEventListener(type: 'message', listener: (e: MessageEvent<PageToWorker>) => void): void;
}
const scope = self as unknown as WorkerScope;

const status: TrainerStatus = { phase: 'idle', message: 'Not started.', clientId: null, stats: emptyStats() };
let run: RunTarget | null = null;
let runConfig: RunConfig | null = null;
let model: LlamaConfig | null = null;
let secretKey: Uint8Array | null = null;
let throttle: Throttle = { share: 1, onlyWhenVisible: false };
let visible = true;
let userPaused = false;
let device: GPUDevice | null = null;
let backend: WebGpuTrainingBackend | null = null;
let distro: WebGpuDistroBackend | null = null;
/**
 * The relay's libp2p addresses (GET /api/runs/:id), the page's offer to host this tab's peer (its end of the
 * peer channel, used once), and the peer once started (kept across pauses).
 */
let p2pAddrs: string[] = [];
let peerPort: MessagePort | null = null;
let network: Promise<TabNetwork | null> | null = null;
let mesh: TabNetwork | null = null;
let metrics: LocalMetrics | null = null;
let adapterName = 'WebGPU';
let session: {
  link: CountingRelayLink;
  client: Client;
  checkpoints: CachedCheckpoints;
  data: CachedDataSource;
  done: Promise<void>;
} | null = null;
let joining: Promise<void> | null = null;
let lastState: CoordinatorState | null = null;
let lastStepMs = 0;

function post(m: WorkerToPage): void {
  scope.postMessage(m);
}
function log(line: string): void {
  post({ type: 'log', line });
}
/** Counters of sessions that ended (pause/resume starts a new one), so the page sees totals. */
const previous = {
  resultsFromRelay: 0,
  resultBytesFromRelay: 0,
  bytesSent: 0,
  bytesReceived: 0,
  checkpointDownloadedBytes: 0,
  checkpointCacheHits: 0,
  dataDownloadedBytes: 0,
  dataCacheHits: 0,
};

function publish(): void {
  if (session) {
    status.stats.bytesSent = previous.bytesSent + session.link.stats.bytesSent;
    status.stats.bytesReceived = previous.bytesReceived + session.link.stats.bytesReceived;
    status.stats.resultsFromRelay = previous.resultsFromRelay + session.link.results;
    status.stats.resultBytesFromRelay = previous.resultBytesFromRelay + session.link.resultBytes;
    status.stats.checkpointDownloadedBytes =
      previous.checkpointDownloadedBytes + session.checkpoints.stats.downloadedBytes;
    status.stats.checkpointCacheHits = previous.checkpointCacheHits + session.checkpoints.stats.cacheHits;
    status.stats.dataDownloadedBytes = previous.dataDownloadedBytes + session.data.stats.downloadedBytes;
    status.stats.dataCacheHits = previous.dataCacheHits + session.data.stats.hits;
  }
  if (mesh) {
    const p = mesh.stats();
    status.stats.p2pHost = mesh.host;
    status.stats.peerId = mesh.peerId;
    status.stats.peersConnected = p.peersConnected;
    status.stats.peersWebRTC = p.peersWebRTC;
    status.stats.peersRelayed = p.peersRelayed;
    status.stats.webrtcPeers = p.webrtcPeers;
    status.stats.resultsFromPeers = p.resultsFromPeers;
    status.stats.bytesFromPeers = p.bytesFromPeers;
    status.stats.resultBytesDirect = p.bytesDirect;
    status.stats.resultBytesRelayed = p.bytesRelayed;
  }
  if (backend && distro) {
    status.stats.gpuResident =
      backend.stats.residentSteps > 0 && backend.stats.hostParamBytes + backend.stats.hostGradientBytes === 0;
    status.stats.gpuReadbackBytes = distro.stats.readbackBytes;
  }
  if (session) metrics?.save(status.stats);
  post({ type: 'status', status: structuredClone(status) });
}
function setPhase(phase: TrainerPhase, message: string): void {
  status.phase = phase;
  status.message = message;
  publish();
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The throttle: rest in proportion to the last step's time so training takes `share` of wall time. */
async function gate(): Promise<void> {
  if (throttle.share < 1 && lastStepMs > 0) await sleep(lastStepMs * (1 / throttle.share - 1));
}

function describeState(s: CoordinatorState | null): string {
  if (!s) return 'connecting to the run…';
  return `${s.run_state}, epoch ${s.progress.epoch}, step ${s.progress.step}/${s.config.total_steps}`;
}

function onClientEvent(e: ClientEvent): void {
  switch (e.type) {
    case 'trained':
      status.stats.batches++;
      status.stats.losses = [...status.stats.losses.slice(-499), { step: e.step, loss: e.loss }];
      status.stats.resultBytes += e.bytes;
      status.stats.rawGradientBytes = model ? parameterCount(model) * 4 * status.stats.batches : 0;
      log(
        `trained step ${e.step}: loss ${e.loss.toFixed(4)}, result ${e.bytes} B, ${e.seconds.toFixed(1)} s`,
      );
      break;
    case 'phase':
      if (status.phase === 'connecting' || status.phase === 'training')
        setPhase('training', `Contributing: ${e.phase.toLowerCase()} (${describeState(lastState)}).`);
      return;
    case 'model':
      log(
        `model ${e.source === 'init' ? 'initialised from the run seed' : e.source === 'checkpoint' ? `loaded from a checkpoint${e.via ? ` (${e.via})` : ''}` : 'kept'} at step ${e.step}${e.hash ? ` (hash ${e.hash.slice(0, 16)}…)` : ''}`,
      );
      break;
    case 'applied':
      break;
    case 'paramHash': {
      log(`epoch ${e.epoch} parameter hash ${e.hash.slice(0, 16)}…`);
      // Keep these parameters in IndexedDB: the next epoch starts from them, so a reload needs no download.
      const s = session;
      if (s)
        void s.client
          .parameters()
          .then((params) =>
            s.checkpoints.save({ step: e.step, epoch: e.epoch, paramHash: hexToBytes(e.hash), params }),
          )
          .catch((err: unknown) =>
            post({
              type: 'error',
              where: 'cache',
              message: `could not cache the checkpoint: ${String(err)}`,
            }),
          );
      break;
    }
    case 'resync':
      log(`re-syncing: ${e.reason}`);
      break;
    case 'warning':
      log(`warning: ${e.message}`);
      break;
    case 'error':
      post({ type: 'error', where: 'client', message: e.message.split('\n')[0] ?? e.message });
      break;
    default:
      return;
  }
  publish();
}

/**
 * This tab's peer: on the page when it offered to host it (WebRTC to other peers), else in this worker
 * (circuit-only). Null when the relay runs no libp2p or it cannot be reached.
 */
async function startNetwork(relayUrl: string, secretKey: Uint8Array): Promise<TabNetwork | null> {
  if (p2pAddrs.length === 0) {
    log('p2p: the relay runs without libp2p; results and checkpoints come from the relay');
    return null;
  }
  if (peerPort) {
    const port = peerPort;
    peerPort = null;
    const opened = await PagePeerNetwork.open(port, p2pAddrs, log);
    if (opened.ok) return opened.network;
    if (!opened.fallback) {
      log(`p2p: not available (${opened.reason}); results and checkpoints come from the relay`);
      return null;
    }
    log(`p2p: the page cannot host this tab's peer (${opened.reason}); the worker starts a circuit-only one`);
  }
  const { startTabNetwork } = await import('./peer-network.ts');
  const net = await startTabNetwork({ relayUrl, announced: p2pAddrs, secretKey, log });
  return net ? workerTabNetwork(net) : null;
}

async function join(): Promise<void> {
  if (!run || !runConfig || !model || !secretKey || !backend || !distro) return;
  if (session) return;
  const key = secretKey;
  const target = run;
  network ??= startNetwork(target.relayUrl, key);
  mesh = await network;
  const net = mesh;
  const link = new CountingRelayLink({
    relayUrl: run.relayUrl,
    runId: run.runId,
    secretKey,
    deviceKind: `browser webgpu (${adapterName})`,
    ...(net ? { p2pPeerId: net.peerId } : {}),
    onLog: log,
  });
  link.onState((s) => {
    net?.setState(s);
    lastState = s;
    if (status.phase === 'training') {
      status.message = `Contributing: ${describeState(s)}.`;
      publish();
    }
  });
  link.onNotice = (code, message) => log(`relay notice ${code}: ${message}`);
  // This browser's cache first, then peers (by the parameter hash the relay names), then the relay's files.
  const fromRelay = relayCheckpoints({ relayUrl: run.relayUrl, runId: run.runId, model, secretKey });
  const fromPeers = peerFirstCheckpoints({
    relay: fromRelay,
    relayUrl: run.relayUrl,
    runId: run.runId,
    network: net,
    sizes: parameterSizes(model),
    log,
  });
  const checkpoints = cachedCheckpoints(
    {
      load: (step) => fromPeers.load(step),
      upload: (ck) => fromRelay.upload?.(ck) ?? Promise.resolve(),
      // "Model download" on the page counts the relay's bytes; parameters from peers show as peer bytes.
      get bytes() {
        return fromRelay.bytes;
      },
    },
    { relayUrl: run.relayUrl, runId: run.runId, log },
  );
  // Blocks of about 64 KiB: whole blocks are downloaded, so they must stay small next to a client's batch.
  const rowBytes = (runConfig.model.LLM.max_seq_len + 1) * 4;
  const relayData = relayDataSource(run.relayUrl, run.runId);
  const data = cachedDataSource(relayData, {
    runId: run.runId,
    datasetKey: `${JSON.stringify(runConfig.model.LLM.data_location)}|seq=${runConfig.model.LLM.max_seq_len}`,
    samplesPerBlock: Math.max(1, Math.min(32, Math.floor(65536 / rowBytes))),
    log,
  });
  // Later passes over the split read the blocks the first one cached.
  const folded = foldedDataSource(data, () => relayData.samplesInSplit());
  const client = new Client({
    run: runConfig,
    runId: run.runId,
    secretKey,
    link,
    backend,
    distro,
    data: folded,
    initParams: () => initParameters(model as LlamaConfig, (runConfig as RunConfig).meshtrain.seed),
    checkpoints,
    ...(net ? { peers: net } : {}),
    onEvent: onClientEvent,
  });
  client.setShapes(backend.shapes);
  setPhase('connecting', 'Joining the run…');
  await link.connect();
  setPhase('training', `Contributing: ${describeState(lastState)}.`);
  const done = client.run().then(
    () => {
      if (session?.client === client) {
        session = null;
        link.close();
        if (lastState?.run_state === 'Finished') setPhase('stopped', 'The run finished. Thank you!');
      }
    },
    (e: unknown) => {
      post({ type: 'error', where: 'client', message: e instanceof Error ? e.message : String(e) });
    },
  );
  session = { link, client, checkpoints, data, done };
}

function leave(): void {
  if (!session) return;
  publish();
  previous.resultsFromRelay = status.stats.resultsFromRelay;
  previous.resultBytesFromRelay = status.stats.resultBytesFromRelay;
  previous.bytesSent = status.stats.bytesSent;
  previous.bytesReceived = status.stats.bytesReceived;
  previous.checkpointDownloadedBytes = status.stats.checkpointDownloadedBytes;
  previous.checkpointCacheHits = status.stats.checkpointCacheHits;
  previous.dataDownloadedBytes = status.stats.dataDownloadedBytes;
  previous.dataCacheHits = status.stats.dataCacheHits;
  session.client.stop();
  session.link.close();
  session = null;
}

/** Applies the volunteer's controls: join when allowed, leave when paused or hidden-and-visible-only. */
async function settle(): Promise<void> {
  if (!backend) return;
  if (userPaused) {
    leave();
    setPhase('paused', 'Paused: this tab left the run and does no work until you resume.');
  } else if (throttle.onlyWhenVisible && !visible) {
    leave();
    setPhase('throttled', 'Waiting: you asked to contribute only while this tab is visible.');
  } else if (!session && !joining) {
    joining = join().finally(() => (joining = null));
    await joining;
  } else publish();
}

async function start(m: Extract<PageToWorker, { type: 'start' }>): Promise<void> {
  run = m.run;
  peerPort = m.peerPort;
  throttle = m.throttle;
  visible = m.visible;
  secretKey = hexToBytes(m.secretKeyHex, 32);
  status.clientId = bytesToHex(publicKeyOf(secretKey));
  setPhase('probing', 'Checking your GPU…');
  const outcome = await probeDevice(run);
  if (!outcome.ok) {
    setPhase('no-webgpu', `This browser cannot train: ${outcome.message}.`);
    return;
  }
  post({ type: 'probe', probe: outcome.probe });
  const a = outcome.probe.adapter;
  adapterName =
    [a.vendor, a.architecture, a.description].filter((s) => s !== '').join(' ') || 'unnamed adapter';
  log(`GPU: ${adapterName}; micro-batch ${outcome.probe.microBatch} (${outcome.probe.microBatchReason})`);

  const res = await fetch(`${run.relayUrl}/api/runs/${encodeURIComponent(run.runId)}`);
  if (!res.ok) throw new Error(`GET /api/runs/${run.runId}: HTTP ${res.status}`);
  const body = (await res.json()) as { config?: { toml?: string }; p2p_multiaddrs?: string[] };
  p2pAddrs = body.p2p_multiaddrs ?? [];
  if (!body.config?.toml) throw new Error('the relay sent no config for this run');
  runConfig = parseRunConfig(body.config.toml).config;
  model = modelConfigForRun(runConfig);
  device = await createTrainingDevice(outcome.adapter);
  device.addEventListener('uncapturederror', (ev) =>
    post({ type: 'error', where: 'webgpu', message: (ev as GPUUncapturedErrorEvent).error.message }),
  );
  void device.lost.then((info) => {
    if (info.reason !== 'destroyed') {
      leave();
      setPhase('error', `The GPU device was lost (${info.message}). Reload the page to start again.`);
    }
  });
  const optimizer = runConfig.model.LLM.optimizer;
  if (!('Distro' in optimizer))
    throw new Error('this run does not use DisTrO; browser tabs train DisTrO runs only');
  // DisTrO on ORT's own device: parameters, momentum and gradients never leave the GPU between steps.
  distro = createWebGpuBackend(device, {
    chunk: optimizer.Distro.compression_chunk,
    description: adapterName,
  });
  backend = new WebGpuTrainingBackend({
    config: model,
    seqLen: runConfig.model.LLM.max_seq_len,
    device,
    distro,
    maxRows: outcome.probe.microBatch,
    description: `onnxruntime-web webgpu (${adapterName})`,
    gate,
    onStepTime: (ms) => (lastStepMs = ms),
  });
  log(
    `model: ${parameterCount(model).toLocaleString('en-US')} parameters, ${runConfig.meshtrain.preset ?? 'custom'} preset`,
  );
  await restoreMetrics(run.runId, status.clientId);
  await settle();
}

/** This browser's earlier record of the run (a reload, a new visit): the counters go on from there. */
async function restoreMetrics(runId: string, clientId: string): Promise<void> {
  metrics = localMetrics(runId, clientId, log);
  const saved = await metrics.load();
  if (!saved) return;
  previous.bytesSent = saved.bytesSent;
  previous.bytesReceived = saved.bytesReceived;
  previous.checkpointDownloadedBytes = saved.checkpointDownloadedBytes;
  previous.dataDownloadedBytes = saved.dataDownloadedBytes;
  Object.assign(status.stats, saved);
  log(`restored this browser's record of run ${runId}: ${saved.batches} batches trained earlier`);
  publish();
}

async function generateText(prompt: string, maxTokens: number): Promise<void> {
  if (!backend || !session || !runConfig)
    throw new Error('start contributing first: the model lives in the training worker');
  const params = await session.client.parameters();
  if (params.size === 0)
    throw new Error('this tab has not loaded the model yet (it does so at the next warmup)');
  const tok = new ByteTokenizer();
  const window = Math.min(runConfig.model.LLM.max_seq_len, 64);
  const ids = await backend.generate(params, [...tok.encode(prompt)], maxTokens, window, 32);
  post({ type: 'generated', prompt, text: tok.decode(ids) });
}

async function handle(m: PageToWorker): Promise<void> {
  switch (m.type) {
    case 'start':
      return start(m);
    case 'pause':
      userPaused = true;
      return settle();
    case 'resume':
      userPaused = false;
      return settle();
    case 'throttle':
      throttle = m.throttle;
      return settle();
    case 'visibility':
      visible = m.visible;
      return settle();
    case 'generate':
      return generateText(m.prompt, m.maxTokens);
    case 'stop':
      leave();
      await backend?.dispose();
      backend = null;
      distro?.destroy();
      distro = null;
      await mesh?.stop().catch(() => {});
      mesh = null;
      network = null;
      device?.destroy();
      device = null;
      setPhase('stopped', 'Stopped.');
      return;
  }
}

scope.addEventListener('message', (e) => {
  handle(e.data).catch((err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    post({ type: 'error', where: e.data.type, message });
    if (e.data.type !== 'generate') setPhase('error', `Something went wrong: ${message}`);
  });
});

setInterval(() => {
  if (session) publish();
}, 1000);
