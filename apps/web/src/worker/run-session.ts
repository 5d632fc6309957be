// One session of this tab in a run: the coordinator link, the checkpoint and data sources (this browser's caches
// in front of peers and the relay), and @meshtrain/client's Client over them. A pause ends the session; resume
// opens a new one, which rejoins the run at its next epoch.
import {
  Client,
  orderedDataSource,
  peerFirstCheckpoints,
  relayCheckpoints,
  relayDataSource,
  type DataSource,
} from '@meshtrain/client';
import { hexToBytes } from '@meshtrain/core';
import type { CoordinatorState, RunConfig } from '@meshtrain/core';
import type { WebGpuDistroBackend } from '@meshtrain/distro';
import { initParameters, parameterCount, parameterSizes } from '@meshtrain/model';
import type { LlamaConfig } from '@meshtrain/model';
import { cachedCheckpoints } from './checkpoint-cache.ts';
import type { CachedCheckpoints } from './checkpoint-cache.ts';
import { clientEventHandler, describeState } from './client-events.ts';
import { CountingRelayLink } from './counting-link.ts';
import { cachedDataSource } from './data-cache.ts';
import type { CachedDataSource } from './data-cache.ts';
import type { RunTarget } from './protocol.ts';
import type { StatusReporter } from './status-reporter.ts';
import type { TabNetwork } from './tab-network.ts';
import type { WebGpuTrainingBackend } from '@meshtrain/client/webgpu-training';

/** What a session is opened with: the run as the worker prepared it, and this tab's GPU and peer. */
export interface SessionDeps {
  run: RunTarget;
  config: RunConfig;
  model: LlamaConfig;
  secretKey: Uint8Array;
  backend: WebGpuTrainingBackend;
  distro: WebGpuDistroBackend;
  /** Shown to the run as this client's device kind. */
  adapterName: string;
  net: TabNetwork | null;
  reporter: StatusReporter;
  post: (m: { type: 'error'; where: string; message: string }) => void;
}

export interface RunSession {
  link: CountingRelayLink;
  client: Client;
  checkpoints: CachedCheckpoints;
  data: CachedDataSource;
  /** Settles when the client stops (the run finished, or `close`). */
  done: Promise<void>;
  close(): void;
}

function openLink(d: SessionDeps, onState: (s: CoordinatorState) => void): CountingRelayLink {
  const link = new CountingRelayLink({
    relayUrl: d.run.relayUrl,
    runId: d.run.runId,
    secretKey: d.secretKey,
    deviceKind: `browser webgpu (${d.adapterName})`,
    ...(d.net ? { p2pPeerId: d.net.peerId } : {}),
    // A tab follows the summary of the state: its relay traffic stays the same whatever the run's size, and
    // admitted lists come from peers (docs/protocol.md "Round outcomes and light replicas").
    replica: 'light',
    onLog: (line) => d.reporter.log(line),
  });
  link.usePeers(d.net);
  link.onState((s) => {
    d.net?.setState(s);
    onState(s);
  });
  link.onNotice = (code, message) => d.reporter.log(`relay notice ${code}: ${message}`);
  return link;
}

/** This browser's cache first, then peers (by the parameter hash the relay names), then the relay's files. */
function openCheckpoints(d: SessionDeps): CachedCheckpoints {
  const { run, model, secretKey } = d;
  const log = (line: string) => d.reporter.log(line);
  const fromRelay = relayCheckpoints({ relayUrl: run.relayUrl, runId: run.runId, model, secretKey });
  const fromPeers = peerFirstCheckpoints({
    relay: fromRelay,
    relayUrl: run.relayUrl,
    runId: run.runId,
    network: d.net,
    sizes: parameterSizes(model),
    log,
  });
  return cachedCheckpoints(
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
}

/** The relay's training split behind this browser's data cache, and the cache in the run's sample order. */
function openData(d: SessionDeps): { data: CachedDataSource; ordered: DataSource } {
  const llm = d.config.model.LLM;
  // Blocks of about 64 KiB: whole blocks are downloaded, so they must stay small next to a client's batch.
  const rowBytes = (llm.max_seq_len + 1) * 4;
  const relayData = relayDataSource(d.run.relayUrl, d.run.runId);
  const data = cachedDataSource(relayData, {
    runId: d.run.runId,
    datasetKey: `${JSON.stringify(llm.data_location)}|seq=${llm.max_seq_len}`,
    samplesPerBlock: Math.max(1, Math.min(32, Math.floor(65536 / rowBytes))),
    log: (line) => d.reporter.log(line),
  });
  // In corpus order, later passes over the split read the blocks the first one cached; a seeded order permutes
  // each pass anew, so its blocks are keyed by run id (the relay maps those).
  return { data, ordered: orderedDataSource(data, relayData) };
}

/**
 * Opens a session and connects it; the client runs until the run finishes (then `onEnded` is told) or the
 * session is closed.
 */
export async function openRunSession(
  d: SessionDeps,
  onEnded: (session: RunSession) => void,
): Promise<RunSession> {
  const { reporter } = d;
  let lastState: CoordinatorState | null = null;
  const link = openLink(d, (s) => {
    lastState = s;
    if (reporter.status.phase === 'training') {
      reporter.status.message = `Contributing: ${describeState(s)}.`;
      reporter.publish();
    }
  });
  const checkpoints = openCheckpoints(d);
  const { data, ordered } = openData(d);
  const client: Client = new Client({
    run: d.config,
    runId: d.run.runId,
    secretKey: d.secretKey,
    link,
    backend: d.backend,
    distro: d.distro,
    data: ordered,
    initParams: () => initParameters(d.model, d.config.meshtrain.seed),
    checkpoints,
    ...(d.net ? { peers: d.net } : {}),
    onEvent: clientEventHandler({
      reporter,
      parameterCount: parameterCount(d.model),
      lastState: () => lastState,
      cacheParameters: async (step, epoch, hash) =>
        checkpoints.save({ step, epoch, paramHash: hexToBytes(hash), params: await client.parameters() }),
      post: d.post,
    }),
  });
  client.setShapes(d.backend.shapes);
  reporter.setPhase('connecting', 'Joining the run…');
  await link.connect();
  reporter.setPhase('training', `Contributing: ${describeState(lastState)}.`);
  let closed = false;
  const session: RunSession = {
    link,
    client,
    checkpoints,
    data,
    done: Promise.resolve(),
    close() {
      closed = true;
      client.stop();
      link.close();
    },
  };
  session.done = client.run().then(
    () => {
      if (closed) return;
      closed = true;
      onEnded(session);
      link.close();
      if (lastState?.run_state === 'Finished') reporter.setPhase('stopped', 'The run finished. Thank you!');
    },
    (e: unknown) =>
      d.post({ type: 'error', where: 'client', message: e instanceof Error ? e.message : String(e) }),
  );
  return session;
}
