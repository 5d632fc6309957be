// File writes shared by everything Node-side that produces files other processes read (datasets,
// checkpoints, metrics): write to a temporary name and rename, so a crash never leaves a half-written file
// under the real name.
import { rename, writeFile } from 'node:fs/promises';

/** Writes to a temporary name and renames, so a crash never leaves a half-written file under the real name. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}
