// Where a SparseLoCo run's lr schedule is read (docs/protocol.md "SparseLoCo rounds"): the schedule counts
// inner steps, so `warmup_steps` and `total_steps` of [model.LLM.lr_schedule] are optimizer steps as in a
// single-process AdamW run, while `[config] total_steps` counts rounds.

/**
 * The schedule step of inner step `h` (0-based, < H) of round step `step` (progress.step, 1-based):
 * (step − 1)·H + h + 1, so round 1's inner steps are 1..H. With H = 1 it is `step` itself (DisTrO).
 */
export function innerScheduleStep(step: number, h: number, innerSteps: number): number {
  return (step - 1) * innerSteps + h + 1;
}
