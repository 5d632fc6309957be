// The Llama shape a run trains: its preset with `[meshtrain.model]` overrides applied. One function for the relay
// (initial checkpoint, upload checks), node-trainer and the browser tab, so every replica builds the same model.
import type { RunConfig } from '@meshtrain/core';
import { LLAMA_CONFIG_FIELDS, PRESETS, validateLlamaConfig, type LlamaConfig } from './config.ts';

export class RunModelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunModelError';
  }
}

/** Throws RunModelError when the run names no preset and its overrides do not give a full, valid shape. */
export function modelConfigForRun(run: RunConfig): LlamaConfig {
  const preset = run.meshtrain.preset;
  const overrides = run.meshtrain.model ?? {};
  const base: Partial<LlamaConfig> = preset === undefined ? {} : PRESETS[preset];
  const config = { ...base, ...overrides } as LlamaConfig;
  const missing = LLAMA_CONFIG_FIELDS.filter((k) => config[k] === undefined);
  if (missing.length > 0)
    throw new RunModelError(
      `the run sets no meshtrain.preset and [meshtrain.model] lacks ${missing.join(', ')}`,
    );
  const problems = validateLlamaConfig(config);
  if (problems.length > 0) throw new RunModelError(`model config: ${problems.join('; ')}`);
  return config;
}
