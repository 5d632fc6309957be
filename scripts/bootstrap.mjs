#!/usr/bin/env node
// `npm start`, `npm test` and `npm run e2e` on a fresh clone, whatever Node the machine has: finds or installs
// a Node >= 22.18 (node-runtime.mjs), installs the dependencies when node_modules is missing or older than
// package-lock.json, for the tests installs the Debian packages they need, then runs the real work on that Node.
// `setup` does the preparation only (.ci/run uses it). package.json starts it with `exec`, so that it replaces
// npm's `sh -c` and a signal sent to npm alone (kill, docker stop), which npm forwards to its script, reaches it.
//
// Plain JavaScript that Node 18 can parse, using only Node's own modules: it runs before anything is installed.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureNode, exitLike, npmCommand, runChild, withNodeOnPath } from './node-runtime.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** What the tests need from Debian: Chromium (browser tests; its SwiftShader Vulkan ICD gives Node WebGPU),
 * the Vulkan loader, iproute2 for network namespaces, and PyTorch (bench:gpu's reference must compute
 * meshtrain's loss on the same inputs). */
export const DEBIAN_PACKAGES = ['chromium', 'libvulkan1', 'iproute2', 'python3-torch'];
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

function log(message) {
  console.error(`[bootstrap] ${message}`);
}

function fail(message) {
  log(message);
  process.exit(1);
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

/**
 * Whether node_modules holds what package-lock.json asks for. `installed` is npm's record of what it installed
 * (node_modules/.package-lock.json, written by every `npm ci` or `npm install`), undefined when absent. It lists
 * the same entries as the lockfile except the root and the optional packages for other platforms. `exists` tells
 * whether a path under the checkout exists, to notice a package folder deleted by hand.
 * Returns undefined when up to date, else the reason it is not.
 */
export function dependenciesStale(lock, installed, exists) {
  if (!installed) return 'node_modules is missing';
  const wanted = lock.packages ?? {};
  const have = installed.packages ?? {};
  for (const [path, entry] of Object.entries(wanted)) {
    if (path === '') continue;
    if (!Object.hasOwn(have, path)) {
      if (entry.optional) continue;
      return `package-lock.json changed since the last install (${path} is not installed)`;
    }
    if (!deepEqual(entry, have[path]))
      return `package-lock.json changed since the last install (${path} differs)`;
  }
  for (const path of Object.keys(have)) {
    if (!Object.hasOwn(wanted, path))
      return `package-lock.json changed since the last install (${path} is no longer wanted)`;
    if (!exists(path)) return `node_modules is incomplete (${path} is missing)`;
  }
  return undefined;
}

/** The packages of `wanted` that `dpkg-query -W -f '${Package} ${Status}\n' …` does not report installed. */
export function missingPackages(dpkgOutput, wanted) {
  const installed = new Set(
    dpkgOutput
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .filter((f) => f.length >= 4 && f.slice(-3).join(' ') === 'install ok installed')
      .map((f) => f[0].split(':')[0]),
  );
  return wanted.filter((p) => !installed.has(p));
}

/**
 * How to install Debian packages: as root directly, else through sudo when it works without a password; else
 * `manual` is the command for the user to run.
 */
export function aptPlan(packages, { root, sudo }) {
  const update = ['apt-get', 'update', '-qq'];
  const install = ['apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...packages];
  const manual = `sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages.join(' ')}`;
  if (root) return { commands: [update, install], manual };
  if (sudo) return { commands: [update, install].map((c) => ['sudo', '-n', ...c]), manual };
  return { commands: undefined, manual };
}

function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  }
}

function ensureDebianPackages(env) {
  const query = spawnSync('dpkg-query', ['-W', '-f', '${Package} ${Status}\\n', ...DEBIAN_PACKAGES], {
    encoding: 'utf8',
  });
  if (query.error) {
    log(
      `not a Debian/Ubuntu system (no dpkg-query): the browser and WebGPU tests need ` +
        `Chromium (MESHTRAIN_CHROMIUM=/path/to/chromium) and a Vulkan loader; continuing`,
    );
    return;
  }
  const missing = missingPackages(query.stdout, DEBIAN_PACKAGES);
  if (missing.length === 0) return;
  const root = process.getuid?.() === 0;
  const sudo = !root && spawnSync('sudo', ['-n', 'true'], { stdio: 'ignore' }).status === 0;
  const plan = aptPlan(missing, { root, sudo });
  if (!plan.commands)
    fail(
      `the tests need the Debian packages ${missing.join(', ')}, and installing them needs root. Run:\n\n  ` +
        `${plan.manual}\n\nthen run this command again.`,
    );
  log(`installing Debian packages the tests need: ${missing.join(' ')}`);
  for (const [command, ...args] of plan.commands) {
    const r = spawnSync(command, args, {
      stdio: 'inherit',
      env: { ...env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    if (r.status !== 0)
      fail(`\`${[command, ...args].join(' ')}\` failed; install them yourself:\n\n  ${plan.manual}\n`);
  }
}

async function ensureDependencies(node, env) {
  const lock = readJson(join(ROOT, 'package-lock.json'));
  if (!lock) fail('package-lock.json is missing: run this from a meshtrain checkout');
  const installed = readJson(join(ROOT, 'node_modules', '.package-lock.json'));
  const stale = dependenciesStale(lock, installed, (p) => existsSync(join(ROOT, p)));
  if (!stale) return;
  log(`${stale}: running npm ci on Node ${node.version}`);
  const npm = npmCommand(node.path, env);
  const r = await runChild(npm.command, [...npm.args, 'ci', '--no-audit', '--no-fund'], { cwd: ROOT, env });
  if (r.signal || r.code !== 0) {
    log('npm ci failed');
    exitLike(r);
  }
}

/** The commands of a task, in order; each must succeed before the next. */
function taskSteps(task, node, env, args) {
  const npm = npmCommand(node.path, env);
  const npmRun = (script, extra = []) => [
    npm.command,
    [...npm.args, 'run', script, ...(extra.length ? ['--', ...extra] : [])],
  ];
  switch (task) {
    case 'start':
      return [[node.path, [join(ROOT, 'scripts', 'start.ts'), ...args]]];
    case 'test':
      return [npmRun('typecheck'), npmRun('lint'), npmRun('test:unit', args)];
    case 'e2e':
      return [npmRun('test:e2e', args)];
    case 'setup':
      return [];
    default:
      return undefined;
  }
}

async function main() {
  const [task, ...args] = process.argv.slice(2);
  if (!['start', 'test', 'e2e', 'setup'].includes(task ?? '')) {
    console.error('usage: node scripts/bootstrap.mjs start|test|e2e|setup [args...]');
    process.exit(2);
  }
  let node;
  try {
    node = ensureNode(log);
  } catch (err) {
    fail(err.message);
  }
  const env = withNodeOnPath(node.binDir);
  if (task !== 'start') {
    ensureDebianPackages(env);
    if (!env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD)) env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  }
  await ensureDependencies(node, env);
  if (task === 'setup') {
    const npm = npmCommand(node.path, env);
    const npmVersion = spawnSync(npm.command, [...npm.args, '--version'], { env, encoding: 'utf8' });
    log(`ready: Node ${node.version} (${node.path}), npm ${npmVersion.stdout.trim()}`);
  }
  for (const [command, commandArgs] of taskSteps(task, node, env, args)) {
    const r = await runChild(command, commandArgs, { cwd: ROOT, env });
    if (r.signal || r.code !== 0) exitLike(r);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
