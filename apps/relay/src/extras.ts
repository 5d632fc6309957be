// Composition of the relay's other services around the coordinator: the HTTP data provider, the checkpoint
// store (with the upload check that ties it to the coordinator's majority parameter hash) and /metrics.
// The modules themselves live in data/, checkpoints/ and metrics/; this file only wires them to the Relay.
import type { Server } from 'node:http';
import { join } from 'node:path';
import {
  admitCheckpoint,
  checkpointCanonical,
  checkpointUploaderRank,
  hexToBytes,
  parseRunConfig,
  utf8Bytes,
  verify,
} from '@meshtrain/core';
import type { RunConfig } from '@meshtrain/core';
import type { MountedRoutes } from './app.ts';
import { modelConfigForRun, parameterCount, parameterSpecs } from '@meshtrain/model';
import type { LlamaConfig } from '@meshtrain/model';
import { checkpointRoutes, CheckpointStore, ensureInitialCheckpoint } from './checkpoints/index.ts';
import type { UploadAdmission, UploadRefusal, UploadRequest } from './checkpoints/index.ts';
import { dataRoutes, DatasetStore } from './data/index.ts';
import { metricsRoutes, RelayMetrics } from './metrics/index.ts';
import { monitorEventLoop } from './metrics/event-loop.ts';
import { attachUpgradeDispatcher, startRelayP2P } from './p2p/index.ts';
import { readSignedHeaders } from './middleware/admin-auth.ts';
import type { Relay } from './relay.ts';
import type { RunHost } from './run-host.ts';
import { webRoutes } from './web/static.ts';

// The upload's signed string is core's (the clients sign with the same code); re-exported for the relay's API.
export { CHECKPOINT_SIGNATURE_TAG, checkpointCanonical } from '@meshtrain/core';

function runConfigOf(host: RunHost): RunConfig | undefined {
  try {
    return parseRunConfig(host.toml).config;
  } catch {
    return undefined;
  }
}

/**
 * Room for a safetensors file's header beyond the raw f32 data: its 8-byte length, the JSON metadata and one
 * entry per tensor (name, dtype, shape, offsets: ~120 bytes each in practice, padded to 8).
 */
const SAFETENSORS_HEADER_BASE = 4096;
const SAFETENSORS_HEADER_PER_TENSOR = 512;

/** The largest model.safetensors a client can send for `config`: its parameters as f32 and a header. */
export function maxCheckpointBytes(config: LlamaConfig): number {
  return (
    parameterCount(config) * 4 +
    SAFETENSORS_HEADER_BASE +
    parameterSpecs(config).length * SAFETENSORS_HEADER_PER_TENSOR
  );
}

function refusal(status: UploadRefusal['status'], code: string, message: string): UploadRefusal {
  return { ok: false, status, code, message };
}

/**
 * An upload's headers against the run: fresh signature headers, an epoch end of the run with an agreed
 * parameter hash at exactly that (epoch, step), and a signer that voted on it (core's
 * checkpointUploaderRank); then the body's size limit, signature and parameter hash to check it against.
 */
export function admitCheckpointUpload(relay: Relay, req: UploadRequest): UploadAdmission {
  const host = relay.run(req.runId);
  if (!host) return refusal(404, 'unknown_run', `no run '${req.runId}'`);
  const signed = readSignedHeaders(req.header, relay.clock());
  if ('problem' in signed) return refusal(401, 'unauthenticated', signed.problem);
  const { key, ts, sig } = signed;
  const run = runConfigOf(host);
  let config: LlamaConfig;
  try {
    if (!run) throw new Error('unreadable run config');
    config = modelConfigForRun(run);
  } catch (e) {
    return refusal(409, 'no_model', `this run has no model the relay can check: ${(e as Error).message}`);
  }
  const end = relay.store.checkpoints
    .epochEnds(req.runId)
    .find((e) => e.epoch === req.epoch && e.step === req.step && e.agreed_hash !== null);
  if (!end || end.agreed_hash === null)
    return refusal(
      409,
      'no_param_hash',
      `no agreed parameter hash for epoch ${req.epoch} at step ${req.step}; checkpoints are taken only for epoch ends the run reached`,
    );
  if (checkpointUploaderRank(end, key) < 0)
    return refusal(
      403,
      'forbidden',
      `only clients Healthy at the end of epoch ${end.epoch} upload its checkpoint`,
    );
  const agreedHash = end.agreed_hash;
  return {
    ok: true,
    uploader: key,
    config,
    maxBytes: maxCheckpointBytes(config),
    agreedHash,
    signs: (bodySha256) =>
      verify(
        hexToBytes(key, 32),
        utf8Bytes(
          checkpointCanonical({
            runId: req.runId,
            step: req.step,
            epoch: req.epoch,
            safetensorsSha256: bodySha256,
            timestamp: ts,
          }),
        ),
        hexToBytes(sig, 64),
      ),
    accepts: (paramHash) => {
      const refused = admitCheckpoint(host.agreedEpochs(), { epoch: req.epoch, step: req.step, paramHash });
      if (!refused) return null;
      return refusal(
        409,
        refused.code === 'stale' ? 'no_param_hash' : 'param_hash_mismatch',
        refused.message,
      );
    },
  };
}

/**
 * The relay's metrics, fed by its hooks. Returns the registry's owner and what to run before each scrape;
 * `changed` collects the runs whose coordinator gauges are stale.
 */
function wireMetrics(
  relay: Relay,
  changed: Set<string>,
): { metrics: RelayMetrics; beforeScrape: () => void } {
  const metrics = new RelayMetrics();
  const observeChanged = () => {
    for (const id of changed) {
      const h = relay.run(id);
      if (h) metrics.observeCoordinator(h.state);
    }
    changed.clear();
  };
  monitorEventLoop(metrics.registry);
  const cpu = metrics.registry.gauge(
    'meshtrain_process_cpu_seconds',
    'CPU time (user + system) the relay process has used, in seconds.',
  );
  const rss = metrics.registry.gauge(
    'meshtrain_process_resident_memory_bytes',
    'Resident memory of the relay.',
  );
  const hashMismatches = metrics.registry.counter(
    'meshtrain_state_hash_mismatches_total',
    "Clients that replayed a run's state deltas to another state hash than the relay's (and got a snapshot).",
    ['run'],
  );
  relay.hooks.stateHashMismatch = (runId) => hashMismatches.inc({ run: runId });
  const observeWal = walCheckpointMetrics(relay, metrics);
  const beforeScrape = () => {
    observeChanged();
    const u = process.cpuUsage();
    cpu.set({}, (u.user + u.system) / 1e6);
    rss.set({}, process.memoryUsage.rss());
    observeWal();
  };
  relay.hooks.bytesIn = (n) => metrics.countBytesIn(n);
  relay.hooks.bytesOut = (n) => metrics.countBytesOut(n);
  relay.hooks.loss = (runId, loss) => metrics.setLoss(runId, loss);
  wireParamHashMetrics(relay, metrics);
  return { metrics, beforeScrape };
}

/**
 * relay.db's checkpoint thread (store-checkpointer.ts): whether it runs, and its passes and failures, so an
 * operator sees a WAL that stopped being checkpointed before the disk does. Returns the scrape-time update.
 */
function walCheckpointMetrics(relay: Relay, metrics: RelayMetrics): () => void {
  const r = metrics.registry;
  const thread = r.gauge(
    'meshtrain_store_wal_checkpoint_thread',
    "1 while relay.db's WAL is checkpointed by a thread of its own; 0 when SQLite checkpoints on the relay's thread (in memory, or the thread ended).",
  );
  const passes = r.counter('meshtrain_store_wal_checkpoints_total', 'Checkpoint passes of the WAL thread.');
  const errors = r.counter(
    'meshtrain_store_wal_checkpoint_errors_total',
    'Checkpoint passes of the WAL thread that failed (the next pass tries again).',
  );
  passes.inc({}, 0);
  errors.inc({}, 0);
  let seen = { passes: 0, errors: 0 };
  return () => {
    const s = relay.store.walStats();
    thread.set({}, s ? 1 : 0);
    if (!s) return;
    passes.inc({}, Math.max(0, s.passes - seen.passes));
    errors.inc({}, Math.max(0, s.errors - seen.errors));
    seen = { passes: s.passes, errors: s.errors };
  };
}

/**
 * Replicas whose parameters diverged (docs/architecture.md "Numerics contract"): visible on /metrics, not
 * only in the API.
 */
function wireParamHashMetrics(relay: Relay, metrics: RelayMetrics): void {
  const mismatches = metrics.registry.gauge(
    'meshtrain_param_hash_mismatches',
    "Clients whose parameter hash differs from the majority of the run's latest reported epoch.",
    ['run'],
  );
  const reports = metrics.registry.gauge(
    'meshtrain_param_hash_reports',
    "Clients that reported a parameter hash for the run's latest reported epoch.",
    ['run'],
  );
  for (const h of relay.runList()) {
    const last = h.paramHashReport().at(-1);
    if (last) {
      mismatches.set({ run: h.runId }, last.mismatched.length);
      reports.set({ run: h.runId }, last.reports);
    }
  }
  relay.hooks.paramHash = (runId, _epoch, n, bad) => {
    mismatches.set({ run: runId }, bad);
    reports.set({ run: runId }, n);
  };
}

/**
 * Every run starts from a stored checkpoint (seeded fresh weights at step 1) so joiners can download it:
 * the runs there are now, and each run when it is created (or first changes after a restart).
 */
function seedInitialCheckpoints(relay: Relay, checkpoints: CheckpointStore, changed: Set<string>): void {
  const seed = (host: RunHost) => {
    const run = runConfigOf(host);
    if (!run) return;
    ensureInitialCheckpoint(checkpoints, host.runId, run).catch((e: unknown) =>
      relay.log.warn(`run ${host.runId}: no initial checkpoint: ${(e as Error).message}`),
    );
  };
  for (const h of relay.runList()) seed(h);
  const seeded = new Set(relay.runList().map((h) => h.runId));
  relay.changeListeners.add((host) => {
    if (!seeded.has(host.runId)) {
      seeded.add(host.runId);
      seed(host);
    }
  });
  relay.runCreatedListeners.add((host) => {
    seeded.add(host.runId);
    changed.add(host.runId);
    seed(host);
  });
}

/** Data, checkpoint and metrics routes, wired to `relay`. */
export function defaultExtraRoutes(relay: Relay, dataDir: string): MountedRoutes[] {
  // The gauges derive from whole states (O(clients) each): they are refreshed when scraped, for the runs that
  // changed since, not after every transition (a burst of N joins would cost O(N²)).
  const changed = new Set(relay.runList().map((h) => h.runId));
  relay.changeListeners.add((host) => changed.add(host.runId));
  const { metrics, beforeScrape } = wireMetrics(relay, changed);
  const datasets = new DatasetStore({ datasetsDir: join(dataDir, 'datasets') });
  const checkpoints = new CheckpointStore({ dataDir });
  seedInitialCheckpoints(relay, checkpoints, changed);

  return [
    { path: '/', app: webRoutes() }, // the web app (apps/web/dist) when built; else `/` stays the status page
    { path: '/', app: metricsRoutes(metrics.registry, beforeScrape) },
    {
      path: '/',
      app: dataRoutes({
        store: datasets,
        runData: (runId) => {
          const host = relay.run(runId);
          const run = host && runConfigOf(host);
          return run
            ? { location: run.model.LLM.data_location, seqLen: run.model.LLM.max_seq_len }
            : undefined;
        },
      }),
    },
    {
      path: '/',
      app: checkpointRoutes({
        store: checkpoints,
        runExists: (runId) => relay.run(runId) !== undefined,
        rollbackFor: (runId, step) => relay.store.checkpoints.isOrphaned(runId, step),
        admitUpload: (req) => admitCheckpointUpload(relay, req),
      }),
    },
  ];
}

/**
 * Starts the relay's libp2p node (circuit relay v2 for browser peers) behind the relay's own HTTP port: the
 * upgrade dispatcher bridges `GET /` WebSocket upgrades to libp2p and leaves `/ws/…` to Hono
 * (docs/architecture.md "Runtime notes"). `publicHost` is what peers dial. Returns the node's multiaddrs and
 * its stop function.
 */
export async function startP2P(
  relay: Relay,
  server: Server,
  opts: { publicHost: string; publicPort: number; dataDir: string },
): Promise<{ multiaddrs: string[]; stop: () => Promise<void> }> {
  const p2p = await startRelayP2P({
    host: opts.publicHost,
    publicPort: opts.publicPort,
    dataDir: opts.dataDir,
  });
  const dispatcher = attachUpgradeDispatcher(server, { libp2pPort: p2p.internalPort });
  relay.p2pMultiaddrs = p2p.publicMultiaddrs;
  return {
    multiaddrs: p2p.publicMultiaddrs,
    stop: async () => {
      dispatcher.detach();
      relay.p2pMultiaddrs = [];
      await p2p.stop();
    },
  };
}
