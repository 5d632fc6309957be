export type * from './types.ts';
export { PRESET_NAMES } from './types.ts';
export { RunConfigError, formatIssue, type ConfigIssue } from './errors.ts';
export { parseRunConfig } from './parse.ts';
export { stringifyRunConfig } from './stringify.ts';
export { summarizeRunConfig, formatRate, optimizerSummary } from './summary.ts';
export {
  SPARSELOCO_DEFAULTS,
  SPARSE_DOMAINS,
  MAX_INNER_STEPS,
  MAX_COMPRESSION_CHUNK,
  MAX_QUANTIZATION_BITS,
  innerStepsOf,
  compressionChunkOf,
} from './sparseloco.ts';
export { coordinatorConfigOf, lrScheduleOf, runLrSchedule } from './run-config.ts';
export { DEFAULT_RUN_TOML, DISTRO_RUN_TOML } from './default-run.ts';
export { setTrustedVerifiers, withTrustedVerifiers } from './trusted-verifiers.ts';
export { PSYCHE_DEFAULTS, DEFAULT_SEED, DEFAULT_MICRO_BATCH_SIZE } from './normalize.ts';
