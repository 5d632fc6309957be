// Flag parsing for node-trainer commands: node:util parseArgs, with every mistake turned into a CliError
// (printed without a stack) that names the flag and what it accepts.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { PRESETS, type LlamaConfig, type PresetName } from '@meshtrain/model';
import { DatasetError } from '@meshtrain/model/node';
import { CliError } from '../command.ts';
import { ensureBrownDataset } from '../dataset/brown.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

export function parseFlags<O extends Options>(argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals });
  } catch (err) {
    throw new CliError((err as Error).message.replace(/^TypeError \[[A-Z_]+\]: /, ''));
  }
}

export function intFlag(name: string, value: string | undefined, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min)
    throw new CliError(`--${name}: expected an integer ≥ ${min}, got '${value}'`);
  return n;
}

export function floatFlag(
  name: string,
  value: string | undefined,
  fallback: number,
  check?: (n: number) => boolean,
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || (check && !check(n))) throw new CliError(`--${name}: invalid number '${value}'`);
  return n;
}

export function presetFlag(
  value: string | undefined,
  fallback?: PresetName,
): { name: PresetName; config: LlamaConfig } {
  const name = value ?? fallback;
  if (name === undefined)
    throw new CliError(`--preset is required (one of ${Object.keys(PRESETS).join(', ')})`);
  if (!(name in PRESETS))
    throw new CliError(`--preset: unknown preset '${name}' (one of ${Object.keys(PRESETS).join(', ')})`);
  return { name: name as PresetName, config: PRESETS[name as PresetName] };
}

/** `work()`, with the dataset's own errors (a missing or malformed corpus) reported as a usage error. */
export async function datasetErrorsAsCli<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof DatasetError) throw new CliError(err.message);
    throw err;
  }
}

/** --data DIR (a prepare-data directory), or else the cached Brown corpus, fetched on first use. */
export function dataFlag(value: string | undefined): Promise<string> {
  return datasetErrorsAsCli(async () => value ?? (await ensureBrownDataset()));
}
