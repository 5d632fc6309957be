// bench:memory — peak resident memory of `node-trainer baseline`, measured from outside the process: the
// command runs as a child, /proc/<pid>/status is polled for the whole process tree (VmRSS, VmHWM), and where
// /usr/bin/time exists the kernel's own maximum resident set size (wait4's ru_maxrss) is read back too. A
// tree whose RSS passes --limit is killed, so a setting that does not fit cannot take down a shared machine.
// Prints one JSON object on stdout (progress on stderr).
//
//   npm run -s bench:memory -- --preset 125m --batch-size 8 --seq-len 512 [--steps 1] [--limit 12G]
//   npm run -s bench:memory -- --preset 20m --batch-size 16 --seq-len 256 -- --micro-batch 16
//
// Flags after `--` go to `node-trainer baseline` unchanged.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parseMemory } from '../apps/node-trainer/src/backend/device.ts';

const split = process.argv.indexOf('--', 2);
const own = split < 0 ? process.argv.slice(2) : process.argv.slice(2, split);
const passthrough = split < 0 ? [] : process.argv.slice(split + 1);
const { values } = parseArgs({
  args: own,
  options: {
    preset: { type: 'string', default: '125m' },
    'batch-size': { type: 'string', default: '8' },
    'seq-len': { type: 'string', default: '512' },
    steps: { type: 'string', default: '1' },
    'eval-batches': { type: 'string', default: '1' },
    device: { type: 'string', default: 'cpu' },
    limit: { type: 'string', default: '12G' },
    'poll-ms': { type: 'string', default: '100' },
    json: { type: 'boolean', default: false },
  },
});
const limitBytes = parseMemory(values.limit);
const pollMs = Number(values['poll-ms']);

const cli = fileURLToPath(new URL('../apps/node-trainer/bin/node-trainer.mjs', import.meta.url));
const baselineArgs = [
  'baseline',
  '--preset',
  values.preset,
  '--device',
  values.device,
  '--batch-size',
  values['batch-size'],
  '--seq-len',
  values['seq-len'],
  '--steps',
  values.steps,
  '--eval-batches',
  values['eval-batches'],
  '--json',
  ...passthrough,
];

// /usr/bin/time reports the largest RSS the kernel saw for the child it waited on (ru_maxrss), which a
// poll can miss between two samples; it is the number reported when present.
const timeBin = existsSync('/usr/bin/time') ? '/usr/bin/time' : null;
const work = mkdtempSync(join(tmpdir(), 'bench-memory-'));
const timeOut = join(work, 'time.txt');
const argv = timeBin
  ? [timeBin, ['-f', '%M %U %S', '-o', timeOut, process.execPath, cli, ...baselineArgs]]
  : [process.execPath, [cli, ...baselineArgs]];

/** kB fields of /proc/<pid>/status, or null once the process is gone. */
function status(pid: number): { rss: number; hwm: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
    return { rss: kb('VmRSS') * 1024, hwm: kb('VmHWM') * 1024 };
  } catch {
    return null;
  }
}

/** `pid` and every descendant (through each thread's children list). */
function tree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    const p = out[i] as number;
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      try {
        for (const c of readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').split(/\s+/))
          if (c) out.push(Number(c));
      } catch {
        // The thread ended between the listing and the read.
      }
    }
  }
  return out;
}

const say = (line: string) => process.stderr.write(`${line}\n`);
say(`bench:memory: node-trainer ${baselineArgs.join(' ')} (limit ${values.limit})`);
const started = performance.now();
const load0 = loadavg();
const child = spawn(argv[0] as string, argv[1] as string[], { stdio: ['ignore', 'pipe', 'pipe'] });
let stdout = '';
let stderrTail = '';
child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
child.stderr.on('data', (b: Buffer) => {
  process.stderr.write(b);
  stderrTail = (stderrTail + b.toString()).slice(-4000);
});

// Per pid, the largest VmHWM seen; the sum over the tree is the polled peak (the tree is one node process
// plus, with /usr/bin/time, its small parent).
const hwm = new Map<number, number>();
let peakTreeRss = 0;
let aborted = false;
const timer = setInterval(() => {
  if (child.pid === undefined) return;
  let rss = 0;
  for (const pid of tree(child.pid)) {
    const s = status(pid);
    if (!s) continue;
    rss += s.rss;
    hwm.set(pid, Math.max(hwm.get(pid) ?? 0, s.hwm));
  }
  peakTreeRss = Math.max(peakTreeRss, rss);
  if (rss > limitBytes && !aborted) {
    aborted = true;
    say(`bench:memory: RSS ${(rss / 1e9).toFixed(2)} GB passed the limit; killing the run`);
    for (const pid of tree(child.pid).reverse()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}, pollMs);

const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
clearInterval(timer);
const wallSeconds = (performance.now() - started) / 1000;

let kernelMaxRss: number | null = null;
let cpuSeconds: number | null = null;
if (timeBin && existsSync(timeOut)) {
  const m = /(\d+) ([\d.]+) ([\d.]+)\s*$/.exec(readFileSync(timeOut, 'utf8'));
  if (m) {
    kernelMaxRss = Number(m[1]) * 1024;
    cpuSeconds = Number(m[2]) + Number(m[3]);
  }
}
rmSync(work, { recursive: true, force: true });
const polledHwm = Math.max(0, ...hwm.values());

let result: Record<string, unknown> | null;
try {
  result = JSON.parse(stdout.trim().split('\n').pop() ?? '') as Record<string, unknown>;
} catch {
  result = null;
}
if (!aborted && code !== 0) say(`bench:memory: baseline exited ${code}: ${stderrTail.trim().slice(-600)}`);

const gb = (b: number | null) => (b === null ? null : Math.round(b / 1e7) / 100);
const peak = kernelMaxRss ?? polledHwm;
const report = {
  bench: 'memory',
  what: 'peak RSS of node-trainer baseline, measured from outside the process',
  command: `node-trainer ${baselineArgs.join(' ')}`,
  preset: values.preset,
  device: values.device,
  batch_size: Number(values['batch-size']),
  seq_len: Number(values['seq-len']),
  steps: Number(values.steps),
  exit_code: code,
  aborted_over_limit: aborted,
  limit_gb: gb(limitBytes),
  peak_rss_gb: gb(peak),
  peak_rss_source: kernelMaxRss !== null ? 'wait4 ru_maxrss (/usr/bin/time)' : '/proc VmHWM poll',
  polled_vmhwm_gb: gb(polledHwm),
  polled_tree_rss_gb: gb(peakTreeRss),
  micro_batch: result?.micro_batch ?? null,
  tokens_per_second:
    typeof result?.tokens_per_second === 'number' ? Math.round(result.tokens_per_second) : null,
  train_seconds: result?.train_seconds ?? null,
  wall_seconds: Math.round(wallSeconds * 10) / 10,
  /** User + system CPU time of the whole command (with evaluations): steadier than wall time under load. */
  cpu_seconds: cpuSeconds === null ? null : Math.round(cpuSeconds * 10) / 10,
  machine: {
    cpus: cpus().length,
    cpu_model: cpus()[0]?.model ?? 'unknown',
    total_memory_gb: gb(totalmem()),
    load_average_start: load0.map((x) => Math.round(x * 100) / 100),
    load_average_end: loadavg().map((x) => Math.round(x * 100) / 100),
    node: process.versions.node,
  },
};
process.stdout.write(`${JSON.stringify(report, null, values.json ? 0 : 2)}\n`);
process.exitCode = aborted || code === 0 ? 0 : 1;
