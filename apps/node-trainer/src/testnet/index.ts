// A local testnet, like Psyche's: one relay and N `node-trainer train` processes on loopback, optionally
// killing K random trainers every SEC seconds (SIGKILL, then a restart with the same identity), optionally
// with adversaries (`train --adversary KIND`) among them. Everything is a real child process talking over
// real sockets; this module only launches, watches and summarises: launch.ts decides who starts when,
// processes.ts starts them, chaos.ts kills and restarts, watch.ts follows the relay's API, summary.ts reads
// the trainers' events and the relay's answers into the JSON summary.
import { TESTNET_DEFAULTS } from './defaults.ts';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetchCheckpointSummary } from '@meshtrain/client/relay-api';
import type { PresetName } from '@meshtrain/model';
import type { AdversarySpec } from './adversaries.ts';
import { startChaos } from './chaos.ts';
import { extraClients, launchAll, plan, trustedVerifierIds } from './launch.ts';
import { launchRelay, relayBin, TrainerPool, type RelayProcess } from './processes.ts';
import { testnetToml } from './run-toml.ts';
import {
  EXIT_GRACE_S,
  honestHashes,
  summarize,
  trainerExits,
  type RunDetail,
  type TestnetResult,
} from './summary.ts';
import { RunWatcher } from './watch.ts';

export { dataAccounting } from './accounting.ts';
export { EXIT_GRACE_S } from './summary.ts';
export type { TestnetResult, TrainerExit } from './summary.ts';
export { testnetBatch, testnetToml } from './run-toml.ts';

export interface TestnetOptions {
  /** Honest trainers started at once. */
  numClients: number;
  /** The run's total_steps (coordinator rounds, drain rounds included, as in Psyche). */
  steps: number;
  preset: PresetName;
  randomKillNum: number;
  randomKillInterval: number;
  /** Keep the temp directory (logs, relay database) instead of deleting it. */
  keep: boolean;
  log: (line: string) => void;
  /** Give up after this many seconds. */
  timeoutSeconds: number;
  seed: number;
  /** Adversary processes (`--adversary KIND[:N]`). */
  adversaries?: AdversarySpec[];
  /** Honest trainers started once the run trains: they join the next epoch from a checkpoint. */
  lateJoiners?: number;
  /** How the honest trainers follow the coordinator (`train --replica`; default light). */
  replica?: 'full' | 'light';
  /** Seconds per epoch (default: see testnetToml). */
  epochTime?: number;
  /** Seconds per RoundWitness (default 1: see testnetToml). */
  roundWitnessTime?: number;
  /** The run's verification_percent (default 25). */
  verificationPercent?: number;
  /** Train with SparseLoCo, this many inner steps per round (default: DisTrO). */
  innerSteps?: number;
  /**
   * The relay's join puzzle (default 8 bits: every process of the testnet shares this machine's cores, and
   * at the relay's own default of 20 a loaded machine took 30 s to solve one, past the relay's join timeout).
   */
  joinPowBits?: number;
  /**
   * The trainers' `train --p2p-host` (default 127.0.0.1, which keeps their libp2p traffic on loopback and
   * turns WebRTC off); 0.0.0.0 lets them make WebRTC links to each other, as on a real network.
   */
  p2pHost?: string;
  /**
   * The relay's cap on identities per address (default the relay's, 16). Every testnet process shares
   * 127.0.0.1, where real honest trainers would each have an address of their own.
   */
  maxIdentitiesPerAddress?: number;
  /** Sequences per step (default 4 per trainer of the first epoch: testnetBatch). */
  globalBatch?: number;
  /**
   * `node-trainer verify` processes whose keys the run lists in trusted_verifiers (docs/protocol.md "Trust:
   * anchors, verified history and probation"); default 0, a run without anchor.
   */
  trustedVerifiers?: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A fresh temp directory with logs/ and the run's config, which lists `trusted` as trusted verifiers. */
async function prepare(o: TestnetOptions, trusted: string[]): Promise<{ dir: string; configPath: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'meshtrain-testnet-'));
  await mkdir(join(dir, 'logs'), { recursive: true });
  const configPath = join(dir, 'run.toml');
  await writeFile(
    configPath,
    testnetToml({ ...o, extraClients: extraClients(o.adversaries ?? []), trustedVerifiers: trusted }),
  );
  if (!existsSync(relayBin())) throw new Error(`relay not found at ${relayBin()} (set MESHTRAIN_RELAY_BIN)`);
  return { dir, configPath };
}

/** Until the run finishes, the deadline passes, or (without chaos) every honest trainer exited. */
function watchRun(o: TestnetOptions, watcher: RunWatcher, pool: TrainerPool, deadline: number) {
  const honest = pool.trainers.filter((t) => t.role === 'honest');
  return watcher.until(
    (w) =>
      w.runState === 'Finished' ||
      (o.randomKillNum === 0 && honest.every((t) => t.child !== null && t.child.exitCode !== null)),
    deadline,
  );
}

/** The relay's stored checkpoint of every epoch end, against the honest trainers' hash there. */
async function checkCheckpoints(
  relayUrl: string,
  detail: RunDetail,
  honest: Map<number, string>,
): Promise<{ stored: number; dishonest: number }> {
  let stored = 0;
  let dishonest = 0;
  for (const end of detail.param_hashes ?? []) {
    const want = honest.get(end.step) ?? end.majority;
    try {
      const ck = await fetchCheckpointSummary(relayUrl, 'testnet', end.step);
      if (!ck || ck.rolledBackFrom !== undefined || ck.step !== end.step) continue;
      stored++;
      if (ck.paramHash !== want) dishonest++;
    } catch {
      // No answer: nothing to check.
    }
  }
  return { stored, dishonest };
}

/** The relay and every planned process, launched; the first epoch starts once they all joined. */
async function launchNetwork(
  o: TestnetOptions,
  planned: ReturnType<typeof plan>,
  dir: string,
  configPath: string,
  children: Set<ChildProcess>,
  deadline: number,
): Promise<{ relay: RelayProcess; pool: TrainerPool; watcher: RunWatcher }> {
  const relay = await launchRelay(
    dir,
    configPath,
    children,
    o.joinPowBits ?? TESTNET_DEFAULTS.joinPowBits,
    o.maxIdentitiesPerAddress,
  );
  o.log(`relay on ${relay.url} (data dir ${join(dir, 'relay')})`);
  const pool = new TrainerPool({
    dir,
    url: relay.url,
    children,
    log: o.log,
    ...(o.p2pHost ? { p2pHost: o.p2pHost } : {}),
  });
  const watcher = new RunWatcher(relay.url, 'testnet');
  // Paused until every process of the first epoch joined: core starts an epoch once init_min_clients
  // members are there, and that counts only the honest trainers (see testnetToml).
  await relay.admin('pause');
  await launchAll(planned, {
    dir,
    pool,
    watcher,
    deadline,
    log: o.log,
    opened: () => relay.admin('resume'),
  });
  return { relay, pool, watcher };
}

/** What the watcher saw of the run, as summarize takes it. */
function watched(watcher: RunWatcher) {
  return {
    rows: watcher.history(),
    cheats: watcher.cheats,
    dropped: watcher.dropped,
    ejected: watcher.ejected,
    seen: watcher.seen,
    uploaders: watcher.uploaders,
    verdicts: watcher.verdicts.values(),
    trustWarnings: watcher.trustWarnings,
    droppedIn: watcher.droppedIn,
    ejectedIn: watcher.ejectedIn,
  };
}

/** Asks every process to end, gives chaos a moment to stop, then kills what is left. */
async function endProcesses(children: Set<ChildProcess>, chaosDone: Promise<unknown>): Promise<void> {
  for (const c of children) c.kill('SIGTERM');
  await Promise.race([chaosDone, sleep(100)]);
  await sleep(500);
  for (const c of children) c.kill('SIGKILL');
}

export async function runTestnet(o: TestnetOptions): Promise<TestnetResult> {
  const started = Date.now();
  const deadline = started + o.timeoutSeconds * 1000;
  // Planned first: the verifiers' keys follow from their process indices and go into the run's config.
  const planned = plan({
    numClients: o.numClients,
    lateJoiners: o.lateJoiners ?? 0,
    adversaries: o.adversaries ?? [],
    replica: o.replica ?? 'light',
    trustedVerifiers: o.trustedVerifiers ?? 0,
  });
  const { dir, configPath } = await prepare(o, trustedVerifierIds(planned));
  const children = new Set<ChildProcess>();
  try {
    const { relay, pool, watcher } = await launchNetwork(o, planned, dir, configPath, children, deadline);
    const chaos = startChaos(o, pool);
    await watchRun(o, watcher, pool, deadline);
    const end = { runState: watcher.runState, progressStep: watcher.progressStep };
    const chaosDone = chaos.stop();
    // Trainers exit by themselves once the run is Finished (within EXIT_GRACE_S of their `done`); how each
    // one ended is taken before the testnet ends what is left.
    const honest = pool.trainers.filter((t) => t.role === 'honest');
    await pool.settle(honest, { minMs: 15_000, graceMs: (EXIT_GRACE_S + 2) * 1000, maxMs: 60_000 });
    const exits = trainerExits(honest);
    await watcher.poll();
    const detail: RunDetail = watcher.latest ?? {};
    const hashes = honestHashes(pool.events.filter((x) => honest.some((t) => t.index === x.trainer)));
    const checkpoints = await checkCheckpoints(relay.url, detail, hashes.byStep);
    await endProcesses(children, chaosDone);
    relay.log.end();
    const result = summarize({
      o: { ...o, adversaries: o.adversaries ?? [], lateJoiners: o.lateJoiners ?? 0 },
      ...end,
      trainers: pool.trainers,
      events: pool.events,
      detail,
      ...watched(watcher),
      killed: chaos.killed,
      exits,
      checkpoints,
      kills: chaos.kills,
      restarts: chaos.restarts,
      started,
      dir,
    });
    if (!o.keep) await rm(dir, { recursive: true, force: true });
    return result;
  } finally {
    // Whatever happened, leave no process behind.
    for (const c of children) c.kill('SIGKILL');
  }
}
