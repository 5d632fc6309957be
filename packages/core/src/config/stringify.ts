import { stringify } from 'smol-toml';
import type { RunConfig } from './types.ts';

/** Writes a RunConfig as TOML that `parseRunConfig` reads back to an equal RunConfig. */
export function stringifyRunConfig(run: RunConfig): string {
  // TOML has no null/undefined: drop absent optional keys instead of letting the writer choke on them.
  const clean = JSON.parse(JSON.stringify(run)) as Record<string, unknown>;
  return stringify(clean);
}
