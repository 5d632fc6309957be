// Builds apps/web (vite build → apps/web/dist) when the build is missing or older than anything it is built
// from: the app's sources and config, and the workspace packages it bundles.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../../lib/serve.ts';

export const WEB_ROOT = join(REPO_ROOT, 'apps/web');
export const WEB_DIST = join(WEB_ROOT, 'dist');

const INPUTS = [
  'apps/web/src',
  'apps/web/public',
  'apps/web/index.html',
  'apps/web/vite.config.ts',
  'apps/web/svelte.config.js',
  'packages/core/src',
  'packages/model/src',
  'packages/client/src',
];

function newestMtime(path: string): number {
  if (!existsSync(path)) return 0;
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let newest = s.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

export function webBuildIsStale(): boolean {
  const index = join(WEB_DIST, 'index.html');
  if (!existsSync(index)) return true;
  const built = statSync(index).mtimeMs;
  return INPUTS.some((p) => newestMtime(join(REPO_ROOT, p)) > built);
}

/** Runs Vite's build with apps/web's own config; returns whether it built. */
export async function ensureWebBuild(force = false): Promise<boolean> {
  if (!force && !webBuildIsStale()) return false;
  const { build } = await import('vite');
  await build({ root: WEB_ROOT, configFile: join(WEB_ROOT, 'vite.config.ts'), logLevel: 'warn' });
  return true;
}
