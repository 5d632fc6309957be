// Cold-start learning-rate ramp (docs/protocol.md "Learning-rate schedules",
// "Joiners, checkpoints and cold start"). After a pause/resume the optimizer state is zeroed, so for the
// first `cold_start_warmup_steps` of that epoch the scheduled rate is scaled by a ramp from 0 to 1.

/**
 * The factor that multiplies the scheduled rate at `step`: `(step − a) / (b − a)` for `a ≤ step ≤ b`, 1 outside
 * the window or without one. `window` is `[epoch start step, epoch start step + cold_start_warmup_steps]`,
 * given only in cold-start epochs.
 */
export function coldStartFactor(step: number, window?: readonly [number, number]): number {
  if (window === undefined) return 1;
  const [a, b] = window;
  if (step < a || step > b) return 1;
  // Psyche divides by b − a unguarded; an empty window (cold_start_warmup_steps = 0) means no ramp at all.
  if (b <= a) return 1;
  return (step - a) / (b - a);
}
