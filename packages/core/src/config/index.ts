export type * from './types.ts';
export { PRESET_NAMES } from './types.ts';
export { RunConfigError, formatIssue, type ConfigIssue } from './errors.ts';
export { parseRunConfig } from './parse.ts';
export { stringifyRunConfig } from './stringify.ts';
export { summarizeRunConfig, formatRate } from './summary.ts';
export { coordinatorConfigOf, lrScheduleOf, runLrSchedule } from './run-config.ts';
export { DEFAULT_RUN_TOML } from './default-run.ts';
export { PSYCHE_DEFAULTS, DEFAULT_SEED, DEFAULT_MICRO_BATCH_SIZE } from './normalize.ts';
