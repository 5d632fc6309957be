#!/usr/bin/env node
// Launches a TypeScript entry point. meshtrain runs its .ts sources directly on Node's type stripping
// (Node >= 22.18), so there is no build step for the CLIs. This file itself is plain JS so that an older
// `node` on PATH can still start it and hand over to a Node that can (see node-runtime.mjs), instead of
// failing on a syntax error far from the cause.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { exitLike, findNode, MIN_NODE, nodeSupported, runChild, withNodeOnPath } from './node-runtime.mjs';

/** Runs `entry` (a path or file URL of a .ts module) with the remaining argv as its arguments. */
export async function runTs(entry, args) {
  const file = entry instanceof URL ? entry.pathname : resolve(entry);
  if (nodeSupported(process.versions.node)) {
    process.argv = [process.argv[0], file, ...args];
    await import(pathToFileURL(file).href);
    return;
  }
  let node;
  try {
    node = findNode();
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
  if (!node) {
    console.error(
      `meshtrain needs Node >= ${MIN_NODE.join('.')} (found ${process.versions.node}). ` +
        '`npm start` or `npm test` in the checkout installs Node 24 from the npm registry into ~/.cache/meshtrain; ' +
        'or install Node >= 22.18 yourself, or set MESHTRAIN_NODE to its path.',
    );
    process.exit(1);
  }
  // Its bin dir first on PATH, so that what the entry point starts (npm, other CLIs) runs on it too.
  exitLike(await runChild(node.path, [file, ...args], { env: withNodeOnPath(node.binDir) }));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [entry, ...args] = process.argv.slice(2);
  if (!entry) {
    console.error('usage: run-ts.mjs ENTRY.ts [args...]');
    process.exit(2);
  }
  await runTs(entry, args);
}
