// e2e/artifacts/ (git-ignored) holds screenshots and logs for a human to look at after a run.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Page } from 'playwright-core';
import { REPO_ROOT } from './serve.ts';

/** MESHTRAIN_ARTIFACTS overrides the location (CI can point it at an uploaded directory). */
export const ARTIFACTS_DIR = process.env.MESHTRAIN_ARTIFACTS ?? join(REPO_ROOT, 'e2e', 'artifacts');

/** Writes text or bytes under ARTIFACTS_DIR (sub-directories allowed) and returns the path. */
export async function writeArtifact(name: string, data: string | Uint8Array): Promise<string> {
  const path = join(ARTIFACTS_DIR, name);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, data);
  return path;
}

/** Full-page PNG screenshot under ARTIFACTS_DIR; returns the path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(ARTIFACTS_DIR, name.endsWith('.png') ? name : `${name}.png`);
  await mkdir(dirname(path), { recursive: true });
  await page.screenshot({ path, fullPage: true });
  return path;
}
