// Learning-rate schedules with Psyche's semantics (docs/protocol.md "Learning-rate schedules", Psyche
// `shared/core/src/definitions.rs`). Field names are Psyche's TOML keys; `kind` names the variant, which
// Psyche's TOML spells as the table name (`[model.LLM.lr_schedule.Cosine]`). Steps start at 1 in the
// coordinator, but every formula is defined from 0.

export interface ConstantLr {
  kind: 'Constant';
  base_lr: number;
  warmup_steps: number;
  warmup_init_lr: number;
}

export interface LinearLr {
  kind: 'Linear';
  base_lr: number;
  warmup_steps: number;
  warmup_init_lr: number;
  total_steps: number;
  final_lr: number;
}

export interface CosineLr {
  kind: 'Cosine';
  base_lr: number;
  warmup_steps: number;
  warmup_init_lr: number;
  total_steps: number;
  final_lr: number;
}

export interface WarmupStableDecayLr {
  kind: 'WarmupStableDecay';
  base_lr: number;
  warmup_steps: number;
  warmup_init_lr: number;
  stable_steps: number;
  cosine_decay_steps: number;
  cosine_decay_final_lr: number;
  linear_decay_steps: number;
  linear_decay_final_lr: number;
}

export type LrSchedule = ConstantLr | LinearLr | CosineLr | WarmupStableDecayLr;
export type LrScheduleKind = LrSchedule['kind'];
export const LR_SCHEDULE_KINDS: readonly LrScheduleKind[] = [
  'Constant',
  'Linear',
  'Cosine',
  'WarmupStableDecay',
];

/** Linear ramp from warmup_init_lr (at step 0) towards base_lr (reached at step warmup_steps). */
function warmupLr(
  s: { base_lr: number; warmup_init_lr: number; warmup_steps: number },
  step: number,
): number {
  return s.warmup_init_lr + (s.base_lr - s.warmup_init_lr) * (step / s.warmup_steps);
}

/** Half a cosine period from `from` (progress 0) down to `to` (progress 1). */
function cosineBetween(from: number, to: number, progress: number): number {
  return to + (from - to) * 0.5 * (1 + Math.cos(Math.PI * progress));
}

/** The learning rate at `step` (a non-negative integer). */
export function learningRate(schedule: LrSchedule, step: number): number {
  if (step < schedule.warmup_steps) return warmupLr(schedule, step);
  switch (schedule.kind) {
    case 'Constant':
      return schedule.base_lr;
    case 'Linear': {
      if (step >= schedule.total_steps) return schedule.final_lr;
      const progress = (step - schedule.warmup_steps) / (schedule.total_steps - schedule.warmup_steps);
      return schedule.base_lr + (schedule.final_lr - schedule.base_lr) * progress;
    }
    case 'Cosine': {
      // Deliberate difference from Psyche, which keeps evaluating the cosine past total_steps so the rate
      // climbs back towards base_lr, and divides by zero when total_steps == warmup_steps. A run that is
      // extended past its schedule should keep training at the floor, so we hold final_lr from total_steps on
      // (this also covers total_steps <= warmup_steps without a division).
      if (step >= schedule.total_steps) return schedule.final_lr;
      const progress = (step - schedule.warmup_steps) / (schedule.total_steps - schedule.warmup_steps);
      return cosineBetween(schedule.base_lr, schedule.final_lr, progress);
    }
    case 'WarmupStableDecay': {
      const stableEnd = schedule.warmup_steps + schedule.stable_steps;
      if (step < stableEnd) return schedule.base_lr;
      const cosineEnd = stableEnd + schedule.cosine_decay_steps;
      if (step < cosineEnd) {
        const progress = (step - stableEnd) / schedule.cosine_decay_steps;
        return cosineBetween(schedule.base_lr, schedule.cosine_decay_final_lr, progress);
      }
      const linearEnd = cosineEnd + schedule.linear_decay_steps;
      if (step < linearEnd) {
        const progress = (step - cosineEnd) / schedule.linear_decay_steps;
        return (
          schedule.cosine_decay_final_lr -
          (schedule.cosine_decay_final_lr - schedule.linear_decay_final_lr) * progress
        );
      }
      return schedule.linear_decay_final_lr;
    }
  }
}
