// Checkpoint directories on disk: `config.json` + `model.safetensors` (or HF's sharded
// `model.safetensors.index.json` + `model-0000k-of-0000n.safetensors`). The byte formats live in
// @meshtrain/model; this module only moves bytes between files and memory.
import { readFile, mkdir, access } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CheckpointError,
  decodeCheckpoint,
  encodeCheckpoint,
  type DecodedCheckpoint,
  type LlamaConfig,
  type Parameters,
} from '@meshtrain/model';
import { writeFileAtomic } from '@meshtrain/model/node';

export const CONFIG_FILE = 'config.json';
export const WEIGHTS_FILE = 'model.safetensors';
export const WEIGHTS_INDEX_FILE = 'model.safetensors.index.json';

export interface WrittenCheckpoint {
  weightsPath: string;
  configPath: string;
  bytes: number;
}

export async function writeCheckpoint(
  dir: string,
  config: LlamaConfig,
  params: Parameters,
  options: { dtype?: 'F32' | 'BF16'; metadata?: Record<string, string> } = {},
): Promise<WrittenCheckpoint> {
  const { safetensors, configJson } = encodeCheckpoint(config, params, options);
  await mkdir(dir, { recursive: true });
  const weightsPath = join(dir, WEIGHTS_FILE);
  const configPath = join(dir, CONFIG_FILE);
  await writeFileAtomic(weightsPath, safetensors);
  await writeFileAtomic(configPath, configJson);
  return { weightsPath, configPath, bytes: safetensors.length };
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

/** Reads a checkpoint directory written by us or by transformers' save_pretrained. */
export async function readCheckpoint(dir: string): Promise<DecodedCheckpoint> {
  const configPath = join(dir, CONFIG_FILE);
  if (!(await exists(configPath)))
    throw new CheckpointError(
      'config',
      `${configPath}: not found (a checkpoint directory needs config.json)`,
    );
  const configJson = await readFile(configPath, 'utf8');

  let files: string[];
  if (await exists(join(dir, WEIGHTS_FILE))) files = [WEIGHTS_FILE];
  else if (await exists(join(dir, WEIGHTS_INDEX_FILE))) {
    const index = JSON.parse(await readFile(join(dir, WEIGHTS_INDEX_FILE), 'utf8')) as {
      weight_map?: Record<string, string>;
    };
    if (!index.weight_map || typeof index.weight_map !== 'object')
      throw new CheckpointError('config', `${WEIGHTS_INDEX_FILE}: weight_map missing`);
    files = [...new Set(Object.values(index.weight_map))].sort();
    for (const f of files)
      if (f.includes('/') || f.includes('\\') || f.startsWith('.'))
        throw new CheckpointError(
          'config',
          `${WEIGHTS_INDEX_FILE}: shard name '${f}' must be a plain file name`,
        );
  } else
    throw new CheckpointError(
      'missing-tensor',
      `${dir}: neither ${WEIGHTS_FILE} nor ${WEIGHTS_INDEX_FILE} found (PyTorch .bin checkpoints are not supported)`,
    );
  const buffers = await Promise.all(files.map((f) => readFile(join(dir, f))));
  try {
    return decodeCheckpoint(configJson, buffers);
  } catch (err) {
    if (err instanceof Error && files.length === 1)
      err.message = `${join(dir, files[0] as string)}: ${err.message}`;
    throw err;
  }
}
