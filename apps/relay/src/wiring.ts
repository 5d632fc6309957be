// The one place the relay's services are composed around the coordinator: the HTTP data provider, the
// checkpoint store (with the upload check that ties it to the coordinator's majority parameter hash),
// /metrics fed by the relay's hooks, the web app, and the libp2p node. The modules themselves live in data/,
// checkpoints/, metrics/, p2p/ and web/; this file only wires them to the Relay.
import type { Server } from 'node:http';
import { join } from 'node:path';
import type { MountedRoutes } from './app.ts';
import { checkpointRoutes, CheckpointStore, ensureInitialCheckpoint } from './checkpoints/index.ts';
import { admitCheckpointUpload } from './checkpoints/upload-admission.ts';
import { dataRoutes, DatasetStore } from './data/index.ts';
import { metricsRoutes, RelayMetrics } from './metrics/index.ts';
import { monitorEventLoop } from './metrics/event-loop.ts';
import { attachUpgradeDispatcher, startRelayP2P } from './p2p/index.ts';
import type { Relay } from './relay.ts';
import { runConfigOf } from './run-config.ts';
import type { RunHost } from './run-host.ts';
import { webRoutes } from './web/static.ts';

// The upload's signed string is core's (the clients sign with the same code); re-exported for the relay's API.
export { CHECKPOINT_SIGNATURE_TAG, checkpointCanonical } from '@meshtrain/core';

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
  const observeWal = walMaintenanceMetrics(relay, metrics);
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
 * relay.db's WAL maintenance thread (store/wal-maintenance.ts): whether it runs, and its passes and failures,
 * so an operator sees a WAL that stopped being checkpointed before the disk does (the metric names keep
 * SQLite's word). Returns the scrape-time update.
 */
function walMaintenanceMetrics(relay: Relay, metrics: RelayMetrics): () => void {
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

/** Data, checkpoint, metrics and web routes, wired to `relay`. */
export function relayServices(relay: Relay, dataDir: string): MountedRoutes[] {
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
