// `npm start`: the main job on the embedded default run. Starts the relay (coordinator, data, checkpoints,
// web app) with its default run (tiny preset, Brown corpus), then one local node-trainer on it, and prints the
// volunteer URL. Both are the real CLIs as child processes; Ctrl-C stops both. The local node-trainer is the
// host's own verifier: its key (kept in the data dir) is listed as trusted in the default run the relay creates
// (`meshtrain-relay run --verifier-identity`), so newcomers' results are applied only once it, or an identity
// it vouched for, verified them (docs/protocol.md "Trust: anchors, verified history and probation").
//
// Environment: PORT (default 8080), HOST (default 127.0.0.1), MESHTRAIN_DATA_DIR (default .cache/relay in the
// checkout, so a restart resumes the same run), MESHTRAIN_DEVICE (trainer --device, default auto),
// MESHTRAIN_NO_TRAINER=1 to start only the relay.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const relayBin = `${root}apps/relay/bin/meshtrain-relay.mjs`;
const trainerBin = `${root}apps/node-trainer/bin/node-trainer.mjs`;
const webDist = `${root}apps/web/dist/index.html`;

const port = process.env.PORT ?? '8080';
const host = process.env.HOST ?? '127.0.0.1';
const dataDir = process.env.MESHTRAIN_DATA_DIR ?? `${root}.cache/relay`;
const device = process.env.MESHTRAIN_DEVICE ?? 'auto';
const RUN_ID = 'default';

const children: ChildProcess[] = [];
let stopping = false;

const running = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;

/** Ends a CLI with one SIGINT; one that has not finished within `ms` is killed. */
async function end(c: ChildProcess, ms: number): Promise<void> {
  if (!running(c)) return;
  const exited = new Promise((r) => c.once('exit', r));
  c.kill('SIGINT');
  const timer = setTimeout(() => c.kill('SIGKILL'), ms);
  await exited;
  clearTimeout(timer);
}

/** Stops the CLIs newest first, so the trainer leaves the run before its relay goes away, then exits. */
function stop(code: number): void {
  if (stopping) return;
  stopping = true;
  void (async () => {
    for (const c of [...children].reverse()) await end(c, 3000);
    process.exit(code);
  })();
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));
process.on('SIGHUP', () => stop(0));
// Should this script end any other way than stop(), its CLIs must not outlive it.
process.on('exit', () => {
  if (!stopping) for (const c of children) if (running(c)) c.kill('SIGTERM');
});

/** Starts a CLI; with `onLine` its stdout is read line by line, otherwise it owns the terminal (status line). */
function run(bin: string, args: string[], prefix: string, onLine?: (line: string) => void): ChildProcess {
  const child = spawn(process.execPath, [bin, ...args], {
    stdio: ['ignore', onLine ? 'pipe' : 'inherit', 'inherit'],
    // In a process group of its own: a Ctrl-C in the terminal reaches npm and this script, and the CLI gets
    // exactly one SIGINT, from stop(). The relay and the trainer take a second SIGINT as "quit now".
    detached: true,
  });
  children.push(child);
  if (onLine && child.stdout)
    createInterface({ input: child.stdout }).on('line', (line) => {
      console.log(`${prefix} ${line}`);
      onLine(line);
    });
  child.once('exit', (code, signal) => {
    if (stopping) {
      if (code !== 0) console.error(`${prefix} stopped (${signal ?? code})`);
      return;
    }
    console.error(`${prefix} exited (${signal ?? code}); stopping.`);
    stop(code ?? 1);
  });
  return child;
}

if (!existsSync(webDist)) {
  // The volunteer page is the point of the printed URL: build it once (about a minute) rather than serve the
  // relay's plain status page.
  console.log('[start] building the web app (apps/web, first start only)…');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const build = spawnSync(npm, ['run', '-s', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0)
    console.log('[start] the web build failed; the relay serves its plain status page instead.');
}

const withTrainer = process.env.MESHTRAIN_NO_TRAINER !== '1';
const verifierKey = `${dataDir}/host-verifier.key`;
if (withTrainer && !existsSync(verifierKey)) {
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(verifierKey, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
}
const relayArgs = [
  'run',
  '--port',
  port,
  '--host',
  host,
  '--data-dir',
  dataDir,
  ...(withTrainer ? ['--verifier-identity', verifierKey] : []),
];
run(relayBin, relayArgs, '[relay]', (line) => {
  const m = /listening on (http:\/\/\S+)/.exec(line);
  if (!m) return;
  const url = m[1] as string;
  console.log('');
  console.log(`  Volunteer page:  ${url}/`);
  console.log(`  Run dashboard:   ${url}/runs/${RUN_ID}`);
  console.log(`  Admin console:   ${url}/admin`);
  console.log('');
  if (!withTrainer) return;
  run(
    trainerBin,
    ['train', '--relay', url, '--run-id', RUN_ID, '--device', device, '--identity', verifierKey],
    '[trainer]',
  );
});
