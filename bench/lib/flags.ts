// Command-line values as the benches with many flags read them (bench:quality, bench:integrity): a bad value is
// a UsageError naming its flag, which the bench prints with its usage.
import { PRESET_NAMES, type ModelPreset } from '@meshtrain/core';

export class UsageError extends Error {}

/** `--name`'s value as a number that passes `ok`, or `fallback` when the flag is absent. */
export function num(
  name: string,
  v: string | undefined,
  fallback: number,
  ok: (x: number) => boolean,
): number {
  if (v === undefined) return fallback;
  const x = Number(v);
  if (!Number.isFinite(x) || !ok(x)) throw new UsageError(`--${name}: bad value '${v}'`);
  return x;
}

/** An integer of at least `min`. */
export const int = (min: number) => (x: number) => Number.isInteger(x) && x >= min;

/** `--name`'s value as one of the model presets, or `fallback` when the flag is absent. */
export function presetFlag(name: string, v: string | undefined, fallback: ModelPreset): ModelPreset {
  const preset = (v ?? fallback) as ModelPreset;
  if (!PRESET_NAMES.includes(preset)) throw new UsageError(`--${name}: one of ${PRESET_NAMES.join(', ')}`);
  return preset;
}
