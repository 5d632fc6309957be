// Text inputs for prepare-data: files as given, directories walked recursively in sorted order (so the same
// tree always gives the same shards), dot-files and dot-directories skipped.
import { readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { DatasetError } from '@meshtrain/model/node';

export interface InputFile {
  /** Document id used by the held-out split: the path relative to its input directory (with '/'). */
  id: string;
  path: string;
  bytes: number;
}

async function walk(dir: string, root: string, out: InputFile[]): Promise<void> {
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
  for (const e of entries) {
    if (e.name.startsWith('.')) continue;
    const path = join(dir, e.name);
    if (e.isDirectory()) await walk(path, root, out);
    else if (e.isFile())
      out.push({ id: relative(root, path).split(sep).join('/'), path, bytes: (await stat(path)).size });
  }
}

export async function collectInputFiles(inputs: readonly string[]): Promise<InputFile[]> {
  if (inputs.length === 0)
    throw new DatasetError('no input given: pass --input <file|dir> (or --input brown)');
  const out: InputFile[] = [];
  for (const input of inputs) {
    const s = await stat(input).catch(() => undefined);
    if (!s) throw new DatasetError(`input '${input}' does not exist`);
    if (s.isDirectory()) {
      const before = out.length;
      await walk(input, input, out);
      if (out.length === before) throw new DatasetError(`input directory '${input}' contains no files`);
    } else if (s.isFile()) out.push({ id: input.split(sep).join('/'), path: input, bytes: s.size });
    else throw new DatasetError(`input '${input}' is neither a file nor a directory`);
  }
  const seen = new Set<string>();
  for (const f of out) {
    if (seen.has(f.id)) throw new DatasetError(`input '${f.path}' is given twice (document id '${f.id}')`);
    seen.add(f.id);
  }
  return out;
}
