// node-trainer's home for the embedded Brown dataset: a cache directory it is prepared into once, and a
// progress bar while that happens. The preparation itself is @meshtrain/model/node's, shared with the relay.
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { TokenBytes } from '@meshtrain/model';
import {
  brownDirName,
  ensureBrown,
  prepareBrown as prepareBrownShared,
  type BrownOptions,
} from '@meshtrain/model/node';
import { Progress } from '../progress/index.ts';

/** `$MESHTRAIN_CACHE_DIR`, else `~/.cache/meshtrain`. */
export function cacheRoot(): string {
  return process.env.MESHTRAIN_CACHE_DIR ?? join(homedir(), '.cache', 'meshtrain');
}

function brownCacheRoot(): string {
  return join(cacheRoot(), 'data');
}

export function brownCacheDir(tokenBytes: TokenBytes = 2): string {
  return join(brownCacheRoot(), brownDirName(tokenBytes));
}

interface CliBrownOptions {
  tokenBytes?: TokenBytes;
  valFraction?: number;
  quiet?: boolean;
}

/** The shared options plus a stderr progress bar (created on the first report, when the total is known). */
function withProgress(options: CliBrownOptions): { shared: BrownOptions; finish(): void } {
  let progress: Progress | undefined;
  const shared: BrownOptions = { tokenBytes: options.tokenBytes, valFraction: options.valFraction };
  if (!options.quiet)
    shared.onProgress = (done, total) => {
      progress ??= new Progress('brown', total, { format: (n) => `${(n / 1e6).toFixed(1)}MB` });
      progress.update(done);
    };
  return { shared, finish: () => progress?.finish() };
}

/** Prepares the Brown dataset into `outDir` (prepare-data --input brown). */
export async function prepareBrown(outDir: string, options: CliBrownOptions = {}): Promise<void> {
  const { shared, finish } = withProgress(options);
  await prepareBrownShared(outDir, shared);
  finish();
}

/** The cached Brown dataset directory (brownCacheDir), prepared on first use. */
export async function ensureBrownDataset(
  options: { tokenBytes?: TokenBytes; quiet?: boolean } = {},
): Promise<string> {
  const { shared, finish } = withProgress(options);
  const dir = await ensureBrown(brownCacheRoot(), shared);
  finish();
  return dir;
}
