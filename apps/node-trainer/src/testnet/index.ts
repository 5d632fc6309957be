// A local testnet, like Psyche's: one relay and N `node-trainer train` processes on loopback, optionally
// killing K random trainers every SEC seconds (SIGKILL, then a restart with the same identity). Everything
// is a real child process talking over real sockets; this module only launches, watches and summarises.
//
// Sources of the summary: the trainers' JSON event lines (losses, result sizes, per-epoch parameter hashes,
// held-out evaluations) and the relay's HTTP API (round history with witness quorum, majority hashes).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { parameterCount, PRESETS, type PresetName } from '@meshtrain/model';
import { shortRunToml } from './run-toml.ts';

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

export interface TestnetResult {
  completed: boolean;
  run_state: string;
  steps_completed: number;
  training_rounds: number;
  clients: number;
  preset: string;
  parameters: number;
  loss_first: number | null;
  loss_last: number | null;
  train_loss_first: number | null;
  train_loss_last: number | null;
  epochs: number;
  param_hash_reports: number;
  param_hash_mismatches: number;
  quorum_failures: number;
  rounds_observed: number;
  /** Batches the coordinator handed out again because no witness quorum attested their first result. */
  batches_retried: number;
  /** Batches of applied rounds whose samples no applied result ever covered; null without full history. */
  batches_lost: number | null;
  /** Sample indices applied more than once; null without full history. */
  samples_applied_twice: number | null;
  bytes_sent_per_step: number;
  ratio_vs_fp32: number;
  kills: number;
  restarts: number;
  rejoined_with_checkpoint: number;
  /** Of those, how many got the parameters from peers (the rest from the relay's store). */
  rejoined_from_peers: number;
  /** Result bytes trainers fetched from peers instead of the relay (trainers that ran to the end). */
  result_bytes_from_peers: number;
  resyncs: number;
  errors: number;
  seconds: number;
  logs: string | null;
}

/** A row of the relay's round history (GET /api/runs/:id, newest first, at most 50). */
interface RoundHistoryRow {
  step: number;
  epoch: number;
  height: number;
  data_index: number;
  training: boolean;
  quorum_reached: boolean | null;
  accepted: { batch: { start: number; end: number }; commitment: string | null }[] | null;
}

/**
 * Retried and lost batches from the relay's round history. A round's accepted rows are core's
 * acceptedCommitments for it (retries included); an interval that starts before the round's data_index is a
 * retry (core assigns retries, always older samples, ahead of the fresh data). Peers apply every round of an
 * epoch but its last two (their fresh samples are rewound, their retries requeued), so counting the accepted
 * results of the other rounds says whether each sample was applied exactly once.
 */
export function dataAccounting(
  rows: readonly RoundHistoryRow[],
): Pick<TestnetResult, 'batches_retried' | 'batches_lost' | 'samples_applied_twice'> {
  const lastHeight = new Map<number, number>();
  for (const r of rows) lastHeight.set(r.epoch, Math.max(lastHeight.get(r.epoch) ?? -1, r.height));
  const applied = rows.filter((r) => r.height < (lastHeight.get(r.epoch) ?? 0) - 1);
  let retried = 0;
  for (const r of rows) for (const a of r.accepted ?? []) if (a.batch.start < r.data_index) retried++;
  // Without the run's first round the samples before the history are unknown.
  if (!rows.some((r) => r.step === 1))
    return { batches_retried: retried, batches_lost: null, samples_applied_twice: null };
  const count = new Map<number, number>();
  for (const r of applied)
    for (const a of r.accepted ?? [])
      if (a.commitment !== null)
        for (let i = a.batch.start; i <= a.batch.end; i++) count.set(i, (count.get(i) ?? 0) + 1);
  let lost = 0;
  for (const r of applied)
    for (const a of r.accepted ?? []) {
      if (a.commitment !== null) continue;
      for (let i = a.batch.start; i <= a.batch.end; i++)
        if (!count.has(i)) {
          lost++;
          break;
        }
    }
  let twice = 0;
  for (const n of count.values()) if (n > 1) twice++;
  return { batches_retried: retried, batches_lost: lost, samples_applied_twice: twice };
}

const nodeTrainerBin = fileURLToPath(new URL('../../bin/node-trainer.mjs', import.meta.url));
function relayBin(): string {
  const fromEnv = process.env.MESHTRAIN_RELAY_BIN;
  if (fromEnv) return fromEnv;
  // The workspace layout (apps/relay next to apps/node-trainer): the relay is a sibling app, not a dependency.
  return fileURLToPath(new URL('../../../relay/bin/meshtrain-relay.mjs', import.meta.url));
}

/** The testnet's run: Psyche keys with short timers, the micro or tiny preset on the Brown corpus. */
export function testnetToml(
  o: Pick<
    TestnetOptions,
    'numClients' | 'steps' | 'preset' | 'randomKillNum' | 'randomKillInterval' | 'seed'
  >,
): string {
  const cfg = PRESETS[o.preset];
  const seqLen = Math.min(64, cfg.max_position_embeddings);
  const perClient = 4;
  const batch = perClient * o.numClients;
  // Killed trainers come back at the next epoch, so with kills an epoch lasts about two kill intervals.
  const epochTime = o.randomKillNum > 0 ? Math.max(30, 2 * o.randomKillInterval) : 100_000;
  // Warmup waits for every member's model load (joiners download the checkpoint); it must end inside an epoch.
  const warmupTime = Math.min(60, epochTime - 10);
  return shortRunToml({
    runId: 'testnet',
    warmupTime,
    epochTime,
    maxRoundTrainTime: 20,
    initMinClients: o.numClients,
    batch,
    steps: o.steps,
    seqLen,
    lrWarmupSteps: Math.max(1, Math.min(5, Math.floor(o.steps / 8))),
    preset: o.preset,
    seed: o.seed,
    microBatchSize: perClient,
  });
}

interface Trainer {
  index: number;
  identity: string;
  child: ChildProcess | null;
  restarts: number;
  exited: Promise<void>;
}

interface TrainerEvent {
  type: string;
  [k: string]: unknown;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runTestnet(o: TestnetOptions): Promise<TestnetResult> {
  const started = Date.now();
  const dir = await mkdtemp(join(tmpdir(), 'meshtrain-testnet-'));
  await mkdir(join(dir, 'logs'), { recursive: true });
  const configPath = join(dir, 'run.toml');
  await writeFile(configPath, testnetToml(o));
  if (!existsSync(relayBin())) throw new Error(`relay not found at ${relayBin()} (set MESHTRAIN_RELAY_BIN)`);

  const children = new Set<ChildProcess>();
  const events: { trainer: number; e: TrainerEvent }[] = [];
  let kills = 0;
  let restarts = 0;
  let stopping = false;

  try {
    // --- relay ------------------------------------------------------------------------------------------
    const relay = spawn(
      process.execPath,
      [
        relayBin(),
        'run',
        '--config',
        configPath,
        '--port',
        '0',
        '--data-dir',
        join(dir, 'relay'),
        '--grace-ms',
        '2000',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.add(relay);
    const relayLog = createWriteStream(join(dir, 'logs', 'relay.log'));
    relay.stderr?.pipe(relayLog);
    const url = await new Promise<string>((resolve, reject) => {
      const rl = createInterface({ input: relay.stdout as NodeJS.ReadableStream });
      const timer = setTimeout(() => reject(new Error('the relay did not start within 60 s')), 60_000);
      rl.on('line', (line) => {
        relayLog.write(`${line}\n`);
        const m = /listening on (http:\/\/\S+)/.exec(line);
        if (m) {
          clearTimeout(timer);
          resolve(m[1] as string);
        }
      });
      relay.once('exit', (code) =>
        reject(new Error(`the relay exited (${code}) before listening; see ${dir}/logs/relay.log`)),
      );
    });
    o.log(`relay on ${url} (data dir ${join(dir, 'relay')})`);

    // --- trainers ---------------------------------------------------------------------------------------
    const start = (t: Trainer) => {
      const child = spawn(
        process.execPath,
        [
          nodeTrainerBin,
          'train',
          '--relay',
          url,
          '--run-id',
          'testnet',
          '--device',
          'cpu',
          '--identity',
          t.identity,
          '--log',
          'json',
          '--p2p-host',
          '127.0.0.1',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      children.add(child);
      t.child = child;
      const log = createWriteStream(join(dir, 'logs', `trainer-${t.index}.log`), { flags: 'a' });
      child.stderr?.pipe(log);
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
        log.write(`${line}\n`);
        try {
          const e = JSON.parse(line) as TrainerEvent;
          events.push({ trainer: t.index, e });
          if (e.type === 'trained')
            o.log(`trainer ${t.index}: step ${String(e.step)} loss ${Number(e.loss).toFixed(4)}`);
          else if (e.type === 'eval')
            o.log(
              `trainer ${t.index}: held-out loss ${Number(e.val_loss).toFixed(4)} at step ${String(e.step)}`,
            );
          else if (e.type === 'paramHash')
            o.log(`trainer ${t.index}: epoch ${String(e.epoch)} hash ${String(e.hash).slice(0, 16)}…`);
          else if (e.type === 'resync' || e.type === 'error')
            o.log(`trainer ${t.index}: ${e.type}: ${String(e.reason ?? e.message).split('\n')[0]}`);
          else if (e.type === 'model' && e.source === 'checkpoint')
            o.log(
              `trainer ${t.index}: loaded the parameters of step ${String(e.step)} from ${String(e.via ?? 'the relay')}, hash verified`,
            );
        } catch {
          // Not a JSON line: already in the log file.
        }
      });
      t.exited = new Promise<void>((resolve) =>
        child.once('exit', () => {
          children.delete(child);
          resolve();
        }),
      );
    };
    const trainers: Trainer[] = [];
    for (let i = 0; i < o.numClients; i++) {
      const identity = join(dir, `trainer-${i}.key`);
      await writeFile(identity, `${(i + 1).toString(16).padStart(2, '0').repeat(32)}\n`, { mode: 0o600 });
      const t: Trainer = { index: i, identity, child: null, restarts: 0, exited: Promise.resolve() };
      trainers.push(t);
      start(t);
    }

    // --- chaos --------------------------------------------------------------------------------------------
    let rng = o.seed * 2654435761 + 1;
    const random = () => {
      rng = (Math.imul(rng, 1664525) + 1013904223) >>> 0;
      return rng / 2 ** 32;
    };
    const chaos = (async () => {
      if (o.randomKillNum <= 0) return;
      for (;;) {
        await sleep(o.randomKillInterval * 1000);
        if (stopping) return;
        const alive = trainers.filter((t) => t.child && t.child.exitCode === null);
        const victims: Trainer[] = [];
        while (victims.length < Math.min(o.randomKillNum, alive.length)) {
          const v = alive[Math.floor(random() * alive.length)] as Trainer;
          if (!victims.includes(v)) victims.push(v);
        }
        for (const v of victims) {
          o.log(`chaos: killing trainer ${v.index} (SIGKILL)`);
          v.child?.kill('SIGKILL');
          kills++;
          await v.exited;
        }
        await sleep(1000);
        if (stopping) return;
        for (const v of victims) {
          o.log(`chaos: restarting trainer ${v.index}`);
          v.restarts++;
          restarts++;
          start(v);
        }
      }
    })();

    // --- wait for the run to finish -------------------------------------------------------------------------
    const api = `${url}/api/runs/testnet`;
    let runState = 'unknown';
    let progressStep = 0;
    const deadline = started + o.timeoutSeconds * 1000;
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
      if (trainers.every((t) => t.child?.exitCode !== null) && o.randomKillNum === 0) break;
    }
    stopping = true;
    // Trainers exit by themselves once the run is Finished; give them a moment to write their last events.
    await Promise.race([Promise.all(trainers.map((t) => t.exited)), sleep(15_000)]);

    let detail: {
      rounds?: RoundHistoryRow[];
      param_hashes?: {
        epoch: number;
        step: number;
        majority: string | null;
        reports: number;
        mismatched: string[];
      }[];
    } = {};
    try {
      detail = (await (await fetch(api)).json()) as typeof detail;
    } catch {
      // Summarise from the trainers alone.
    }
    for (const c of children) c.kill('SIGTERM');
    await Promise.race([chaos, sleep(100)]);
    await sleep(500);
    for (const c of children) c.kill('SIGKILL');
    relayLog.end();

    // --- summary ----------------------------------------------------------------------------------------------
    const of = (type: string) => events.filter((x) => x.e.type === type);
    const evals = of('eval').filter((x) => typeof x.e.val_loss === 'number');
    const byStep = (a: { e: TrainerEvent }, b: { e: TrainerEvent }) => Number(a.e.step) - Number(b.e.step);
    const evalsSorted = [...evals].sort(byStep);
    const trained = of('trained');
    const trainedSorted = [...trained].sort(byStep);
    // Hashes: every trainer's own report per epoch-end step, against the hash the relay's coordinator agreed
    // on for that step (core's verdict). A step without an agreed hash counts every report that is not the
    // same as all the others: replicas that should be identical are not.
    const hashes = new Map<number, Map<number, string>>();
    for (const x of of('paramHash')) {
      const m = hashes.get(Number(x.e.step)) ?? new Map<number, string>();
      m.set(x.trainer, String(x.e.hash));
      hashes.set(Number(x.e.step), m);
    }
    const agreed = new Map((detail.param_hashes ?? []).map((e) => [e.step, e.majority]));
    let mismatches = 0;
    let reports = 0;
    for (const [step, m] of hashes) {
      const values = [...m.values()];
      reports += values.length;
      const want = agreed.get(step) ?? null;
      if (want !== null) mismatches += values.filter((h) => h !== want).length;
      else if (new Set(values).size > 1) mismatches += values.length;
    }
    const relayMismatches = (detail.param_hashes ?? []).reduce((n, e) => n + e.mismatched.length, 0);
    const rounds = detail.rounds ?? [];
    const bytes = trained.map((x) => Number(x.e.bytes));
    const meanBytes = bytes.length ? bytes.reduce((a, b) => a + b, 0) / bytes.length : 0;
    const params = parameterCount(PRESETS[o.preset]);
    const result: TestnetResult = {
      completed: runState === 'Finished' && progressStep - 1 >= o.steps,
      run_state: runState,
      // Coordinator steps (rounds) up to total_steps; the two drain rounds after it only apply the last results.
      steps_completed: Math.min(o.steps, Math.max(0, progressStep - 1)),
      training_rounds: new Set(trained.map((x) => Number(x.e.step))).size,
      clients: o.numClients,
      preset: o.preset,
      parameters: params,
      loss_first: evalsSorted.length ? Number(evalsSorted[0]!.e.val_loss) : null,
      loss_last: evalsSorted.length ? Number(evalsSorted.at(-1)!.e.val_loss) : null,
      train_loss_first: trainedSorted.length ? Number(trainedSorted[0]!.e.loss) : null,
      train_loss_last: trainedSorted.length ? Number(trainedSorted.at(-1)!.e.loss) : null,
      epochs: hashes.size,
      param_hash_reports: reports,
      param_hash_mismatches: Math.max(mismatches, relayMismatches),
      quorum_failures: rounds.filter((r) => !r.quorum_reached).length,
      rounds_observed: rounds.length,
      ...dataAccounting(rounds),
      bytes_sent_per_step: Math.round(meanBytes),
      ratio_vs_fp32: meanBytes > 0 ? Number(((params * 4) / meanBytes).toFixed(1)) : 0,
      kills,
      restarts,
      rejoined_with_checkpoint: of('model').filter((x) => x.e.source === 'checkpoint').length,
      rejoined_from_peers: of('model').filter((x) => x.e.source === 'checkpoint' && x.e.via === 'peers')
        .length,
      result_bytes_from_peers: of('done').reduce(
        (n, x) => n + Number((x.e.stats as { bytesFromPeers?: number } | undefined)?.bytesFromPeers ?? 0),
        0,
      ),
      resyncs: of('resync').length,
      errors: of('error').length,
      seconds: Math.round((Date.now() - started) / 1000),
      logs: o.keep ? dir : null,
    };
    if (!o.keep) await rm(dir, { recursive: true, force: true });
    return result;
  } finally {
    // Whatever happened, leave no process behind.
    for (const c of children) c.kill('SIGKILL');
  }
}
