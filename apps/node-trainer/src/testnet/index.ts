// A local testnet, like Psyche's: one relay and N `node-trainer train` processes on loopback, optionally
// killing K random trainers every SEC seconds (SIGKILL, then a restart with the same identity). Everything
// is a real child process talking over real sockets; this module only launches, watches and summarises:
// processes.ts starts the relay and the trainers, chaos.ts kills and restarts, summary.ts reads the
// trainers' events and the relay's API into the JSON summary.
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PresetName } from '@meshtrain/model';
import { startChaos } from './chaos.ts';
import { launchRelay, relayBin, TrainerPool } from './processes.ts';
import { testnetToml } from './run-toml.ts';
import { summarize, type RunDetail, type TestnetResult } from './summary.ts';

export { dataAccounting } from './accounting.ts';
export { testnetToml } from './run-toml.ts';
export type { TestnetResult } from './summary.ts';

export interface TestnetOptions {
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
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A fresh temp directory with logs/ and the run's config. */
async function prepare(o: TestnetOptions): Promise<{ dir: string; configPath: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'meshtrain-testnet-'));
  await mkdir(join(dir, 'logs'), { recursive: true });
  const configPath = join(dir, 'run.toml');
  await writeFile(configPath, testnetToml(o));
  if (!existsSync(relayBin())) throw new Error(`relay not found at ${relayBin()} (set MESHTRAIN_RELAY_BIN)`);
  return { dir, configPath };
}

/** Writes trainer i's identity (a fixed seed per index, so runs repeat) and starts it. */
async function addTrainer(pool: TrainerPool, dir: string, i: number): Promise<void> {
  const identity = join(dir, `trainer-${i}.key`);
  await writeFile(identity, `${(i + 1).toString(16).padStart(2, '0').repeat(32)}\n`, { mode: 0o600 });
  pool.add(i, identity);
}

/** Polls the relay until the run finishes, the deadline passes, or (without chaos) every trainer exited. */
async function watchRun(
  o: TestnetOptions,
  api: string,
  pool: TrainerPool,
  deadline: number,
): Promise<{ runState: string; progressStep: number }> {
  let runState = 'unknown';
  let progressStep = 0;
  for (;;) {
    await sleep(1000);
    try {
      const r = (await (await fetch(api)).json()) as { run: { run_state: string; step: number } };
      runState = r.run.run_state;
      progressStep = r.run.step;
    } catch {
      // The relay is busy or restarting; ask again.
    }
    if (runState === 'Finished' || Date.now() > deadline) break;
    if (pool.trainers.every((t) => t.child?.exitCode !== null) && o.randomKillNum === 0) break;
  }
  return { runState, progressStep };
}

async function fetchDetail(api: string): Promise<RunDetail> {
  try {
    return (await (await fetch(api)).json()) as RunDetail;
  } catch {
    return {}; // Summarise from the trainers alone.
  }
}

export async function runTestnet(o: TestnetOptions): Promise<TestnetResult> {
  const started = Date.now();
  const { dir, configPath } = await prepare(o);
  const children = new Set<ChildProcess>();
  try {
    const relay = await launchRelay(dir, configPath, children);
    o.log(`relay on ${relay.url} (data dir ${join(dir, 'relay')})`);
    const pool = new TrainerPool({ dir, url: relay.url, children, log: o.log });
    for (let i = 0; i < o.numClients; i++) await addTrainer(pool, dir, i);
    const chaos = startChaos(o, pool);
    const api = `${relay.url}/api/runs/testnet`;
    const end = await watchRun(o, api, pool, started + o.timeoutSeconds * 1000);
    const chaosDone = chaos.stop();
    // Trainers exit by themselves once the run is Finished; give them a moment to write their last events.
    await Promise.race([pool.allExited(), sleep(15_000)]);
    const detail = await fetchDetail(api);
    for (const c of children) c.kill('SIGTERM');
    await Promise.race([chaosDone, sleep(100)]);
    await sleep(500);
    for (const c of children) c.kill('SIGKILL');
    relay.log.end();
    const result = summarize({
      o,
      ...end,
      events: pool.events,
      detail,
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
