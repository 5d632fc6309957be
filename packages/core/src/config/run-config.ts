// Views of a RunConfig for the parts of core that consume it.
import type { CoordinatorConfig } from '../state/coordinator-config.ts';
import type { LrSchedule } from '../schedule/lr.ts';
import type { LrScheduleTable, RunConfig } from './types.ts';

/** The coordinator's config: `[config]` plus the `[model.LLM]` keys the coordinator needs. */
export function coordinatorConfigOf(run: RunConfig): CoordinatorConfig {
  const opt = run.model.LLM.optimizer;
  return {
    ...run.config,
    max_seq_len: run.model.LLM.max_seq_len,
    cold_start_warmup_steps: run.model.LLM.cold_start_warmup_steps,
    // Only a SparseLoCo run's rounds span several steps; DisTrO states stay as they were.
    ...('SparseLoCo' in opt ? { inner_steps: opt.SparseLoCo.inner_steps } : {}),
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
