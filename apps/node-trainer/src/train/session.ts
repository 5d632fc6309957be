// One `node-trainer train` session: the client state machine is @meshtrain/client's; this shell supplies the
// identity, the ONNX Runtime backend on the chosen device, the relay link and data, the libp2p fast path, a
// live status line (TTY) or JSON lines (--log json), and held-out evaluations at every model load and epoch end
// (so a run's progress is measured on text nobody trains on).
import { RelayLink, relayCheckpoints, type Client, type ClientEvent } from '@meshtrain/client';
import { VERIFY_ONLY_DEVICE_PREFIX, type CoordinatorState } from '@meshtrain/core';
import { modelConfigForRun, parameterCount, parameterSizes } from '@meshtrain/model';
import { CliError } from '../command.ts';
import type { LoadedIdentity } from '../identity/index.ts';
import { peerFirstCheckpoints, startNodeMesh, type MeshNetwork } from '../net/p2p.ts';
import { createTrainer, type TrainerBackend } from '../net/trainer.ts';
import { asAdversary, isSybilKind } from './adversary.ts';
import { Evaluator } from './evaluation.ts';
import type { Output, TrainOptions } from './options.ts';
import { fetchRun, loadIdentity, microBatchRows, openData, openTrainingGpu, pickDevice } from './setup.ts';
import { runSybils } from './sybil.ts';

/** Trains until the run finishes (or a signal stops it); resolves to the exit code. */
export async function train(o: TrainOptions, io: Output): Promise<number> {
  if (o.adversary && isSybilKind(o.adversary)) return runSybils(o, o.adversary, o.sybils, io);
  const identity = await loadIdentity(o.identityPath);
  const { run, p2p } = await fetchRun(o.relay, o.runId);
  const device = await pickDevice(o, io);
  const model = modelConfigForRun(run);
  const maxRows = await microBatchRows(o, run, model, device, io);
  const seqLen = run.model.LLM.max_seq_len;
  const { data, evalTokens } = await openData(o, seqLen, io, run.model.LLM.data_location);
  const link = new RelayLink({
    relayUrl: o.relay,
    runId: o.runId,
    secretKey: identity.secretKey,
    p2pPeerId: identity.peerId,
    deviceKind: `${o.verifyOnly ? VERIFY_ONLY_DEVICE_PREFIX : ''}node-trainer ${device.device}`,
    replica: o.replica,
    onLog: io.say,
  });
  const latest: { state: CoordinatorState | null } = { state: null };
  link.onState((s) => (latest.state = s));
  const network = o.p2p ? await startMesh(o, link, p2p, identity, io) : null;
  const checkpoints = peerFirstCheckpoints({
    relay: relayCheckpoints({ relayUrl: o.relay, runId: o.runId, model, secretKey: identity.secretKey }),
    relayUrl: o.relay,
    runId: o.runId,
    network,
    sizes: parameterSizes(model),
    log: io.say,
  });
  const honest = { link, data, checkpoints };
  // Narrowed: a sybil (not a client) returned above.
  const adversary = o.adversary && !isSybilKind(o.adversary) ? o.adversary : undefined;
  const parts = adversary
    ? await asAdversary(adversary, identity.secretKey, honest, io, o.colluders)
    : honest;
  const evaluator = new Evaluator(io, evalTokens, seqLen);
  let backend: TrainerBackend | null = null;
  try {
    const gpu = await openTrainingGpu(device, run, model, maxRows, io);
    const trainer = createTrainer({
      run,
      runId: o.runId,
      secretKey: identity.secretKey,
      ...parts,
      device,
      maxRows,
      ...(network ? { peers: network } : {}),
      ...(gpu ? { gpu } : {}),
      onEvent: (e) => onClientEvent(e, io, evaluator),
    });
    const { client } = trainer;
    backend = trainer.backend;
    evaluator.attach(client, backend);
    io.say(
      `joining run '${o.runId}' on ${o.relay} as ${identity.id.slice(0, 16)}… (${parameterCount(model).toLocaleString('en-US')} parameters, ${backend.description})`,
    );
    try {
      await link.connect();
    } catch (e) {
      throw new CliError(`could not join: ${(e as Error).message}`);
    }
    await runToEnd({ io, link, client, backend, network, latest, evaluator });
  } catch (e) {
    // A session that fails still releases what it opened, or the process would outlive the error.
    await release(link, backend, network);
    throw e;
  }
  exitIfStillAlive(io);
  return 0;
}

/** Closes the relay link, releases the ORT sessions (and the resident GPU device) and stops the libp2p node. */
async function release(link: RelayLink, backend: TrainerBackend | null, network: MeshNetwork | null) {
  link.close();
  await backend?.dispose();
  await network?.stop().catch(() => {});
}

/**
 * How long the process may live on after a finished session released everything. Nothing it started should
 * keep it: when something does (a native library's thread, a timer nobody cleared), it is named on stderr and
 * in a `lingering` event (local-testnet counts them) so it gets fixed, and the process ends anyway. The timer
 * is unref'd: it never fires in a process that exits by itself.
 */
const LINGER_MS = 5_000;

function exitIfStillAlive(io: Output): void {
  setTimeout(() => {
    const resources = process.getActiveResourcesInfo();
    io.out({ type: 'lingering', seconds: LINGER_MS / 1000, resources });
    process.stderr.write(
      `node-trainer: still running ${LINGER_MS / 1000} s after the session released everything ` +
        `(JavaScript handles still open: ${resources.join(', ') || 'none'}; the rest is a native library's); exiting\n`,
    );
    process.exit();
  }, LINGER_MS).unref();
}

/** The P2P fast path: results and end-of-epoch parameters from peers, the relay as fallback. */
async function startMesh(
  o: TrainOptions,
  link: RelayLink,
  p2p: string[],
  identity: LoadedIdentity,
  io: Output,
): Promise<MeshNetwork | null> {
  const network = await startNodeMesh({
    relayMultiaddrs: p2p,
    seed: identity.secretKey,
    ...(o.p2pHost ? { host: o.p2pHost } : {}),
    log: io.say,
  }).catch((e: unknown) => {
    io.say(`p2p: disabled (${(e as Error).message}); using the relay for everything`);
    return null;
  });
  if (network) {
    link.onState((s) => network.setState(s));
    // Closed rounds' admitted lists: served to peers, and (a light replica) fetched from them first.
    link.usePeers(network);
    io.say(`p2p: peer ${network.node.peerId} via ${p2p.length} relay address(es)`);
  } else if (p2p.length === 0)
    io.say('p2p: the relay offers no libp2p address; using the relay for everything');
  return network;
}

function onClientEvent(e: ClientEvent, io: Output, evaluator: Evaluator): void {
  io.out(e as unknown as Record<string, unknown>);
  if (
    !io.json &&
    (e.type === 'warning' || e.type === 'error' || e.type === 'resync' || e.type === 'paramHash')
  )
    process.stderr.write(
      `\r\x1b[K${e.type}: ${'message' in e ? e.message : 'reason' in e ? e.reason : `epoch ${e.epoch} step ${e.step} ${e.hash}`}\n`,
    );
  // Held-out loss of the parameters as they are now (after the epoch's last apply).
  if ((e.type === 'model' && e.source !== 'kept') || e.type === 'paramHash') evaluator.schedule(e.step);
}

function human(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}

interface Running {
  io: Output;
  link: RelayLink;
  client: Client;
  backend: TrainerBackend;
  network: MeshNetwork | null;
  latest: { state: CoordinatorState | null };
  evaluator: Evaluator;
}

/** The status line on a TTY: phase, progress, losses, bytes, peers. */
function statusLine({ link, client, latest, evaluator }: Running): string {
  const s = latest.state;
  const peers = s ? s.epoch.clients.filter((c) => c.state === 'Healthy').length : 0;
  const loss = client.lastLoss === null ? '—' : client.lastLoss.toFixed(4);
  return (
    `${client.phase.padEnd(10)} epoch ${s?.progress.epoch ?? 0} step ${s?.progress.step ?? 0}/${s?.config.total_steps ?? '?'} ` +
    `loss ${loss}${evaluator.last === null ? '' : ` val ${evaluator.last.toFixed(4)}`} ` +
    `↑${human(link.stats.bytesSent)} ↓${human(link.stats.bytesReceived + client.stats.bytesFromPeers)} peers ${peers}`
  );
}

/**
 * Runs the client until the run finishes or SIGINT/SIGTERM stops it (its background checkpoint uploads
 * included), then releases everything and reports `done`: nothing is left to keep the process alive.
 */
async function runToEnd(r: Running): Promise<void> {
  const { io, link, client, backend, network } = r;
  const tty = !io.json && Boolean(process.stderr.isTTY);
  const status = () => process.stderr.write(`\r\x1b[K${statusLine(r)}`);
  const timer = tty ? setInterval(status, 500) : null;
  // The first SIGINT/SIGTERM stops the session cleanly; the handler is gone after it, so a second one
  // ends the process at once (the signal's default action).
  const stop = (signal: NodeJS.Signals) => {
    process.stderr.write(`\n${signal}: stopping (${signal} again to end at once)\n`);
    client.stop();
    link.close();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await client.run();
  await r.evaluator.done();
  if (timer) clearInterval(timer);
  if (tty) {
    status();
    process.stderr.write('\n');
  }
  await release(link, backend, network);
  // Past this point a signal has nothing left to stop: its default action ends the process.
  process.off('SIGINT', stop);
  process.off('SIGTERM', stop);
  io.out({
    type: 'done',
    phase: client.phase,
    stats: client.stats,
    p2p: network?.stats ?? null,
    bytes_sent: link.stats.bytesSent,
    bytes_received: link.stats.bytesReceived,
    // Light replicas: closed rounds' admitted lists, from peers and from the relay (and the relay's bytes).
    admitted_lists: {
      from_peers: link.stats.listsFromPeers,
      from_relay: link.stats.listsFromRelay,
      relay_bytes: link.stats.listBytesFromRelay,
    },
  });
  if (!io.json)
    io.say(
      `done: ${client.stats.resultsSent} results sent, ${client.stats.resultsApplied} applied, ${client.stats.resyncs} re-syncs` +
        (link.stats.listsFromPeers + link.stats.listsFromRelay > 0
          ? `; admitted lists ${link.stats.listsFromPeers} from peers, ${link.stats.listsFromRelay} from the relay`
          : ''),
    );
}
