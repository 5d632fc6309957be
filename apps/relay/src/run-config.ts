// A hosted run's parsed config, for the services beside the coordinator (data, checkpoints).
import { parseRunConfig } from '@meshtrain/core';
import type { RunConfig } from '@meshtrain/core';
import type { RunHost } from './run-host.ts';

/** The run's current config; undefined when its TOML no longer parses (nothing is served for it then). */
export function runConfigOf(host: RunHost): RunConfig | undefined {
  try {
    return parseRunConfig(host.toml).config;
  } catch {
    return undefined;
  }
}
