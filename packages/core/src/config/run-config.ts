// Views of a RunConfig for the parts of core that consume it.
import type { CoordinatorConfig } from '../coordinator/config.ts';
import type { LrSchedule } from '../schedule/lr.ts';
import type { LrScheduleTable, RunConfig } from './types.ts';

/** The coordinator's config: `[config]` plus the two `[model.LLM]` keys the coordinator needs. */
export function coordinatorConfigOf(run: RunConfig): CoordinatorConfig {
  return {
    ...run.config,
    max_seq_len: run.model.LLM.max_seq_len,
    cold_start_warmup_steps: run.model.LLM.cold_start_warmup_steps,
  };
}

/** The TOML's externally tagged schedule table as the `kind`-tagged union `learningRate` takes. */
export function lrScheduleOf(table: LrScheduleTable): LrSchedule {
  if ('Constant' in table) return { kind: 'Constant', ...table.Constant };
  if ('Linear' in table) return { kind: 'Linear', ...table.Linear };
  if ('Cosine' in table) return { kind: 'Cosine', ...table.Cosine };
  return { kind: 'WarmupStableDecay', ...table.WarmupStableDecay };
}

/** The run's learning-rate schedule. */
export function runLrSchedule(run: RunConfig): LrSchedule {
  return lrScheduleOf(run.model.LLM.lr_schedule);
}
