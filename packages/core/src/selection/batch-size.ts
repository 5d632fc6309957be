// Global batch size ramp (docs/protocol.md "Batch size and data index"), in sequences of `max_seq_len` tokens.
export interface BatchRampConfig {
  global_batch_size_start: number;
  global_batch_size_end: number;
  global_batch_size_warmup_tokens: number;
  max_seq_len: number;
  /**
   * SparseLoCo's H: a round trains this many inner steps of the ramped batch each (docs/protocol.md
   * "SparseLoCo rounds"); absent for DisTrO, one step per round.
   */
  inner_steps?: number;
}

/** Batch size of a round that starts at sample index `dataIndex`. */
export function globalBatchSize(config: BatchRampConfig, dataIndex: number): number {
  const start = config.global_batch_size_start;
  const end = config.global_batch_size_end;
  const warmup = config.global_batch_size_warmup_tokens;
  const tokens = dataIndex * config.max_seq_len;
  if (tokens >= warmup || warmup <= 0) return end;
  // Rust's f64::round rounds half away from zero; for these non-negative values that is Math.round.
  return Math.round(start + ((end - start) * tokens) / warmup);
}

/**
 * Sequences a round starting at `dataIndex` reads: the ramped batch once per inner step (H × it for a
 * SparseLoCo run, the batch itself for DisTrO).
 */
export function roundBatchSize(config: BatchRampConfig, dataIndex: number): number {
  return globalBatchSize(config, dataIndex) * (config.inner_steps ?? 1);
}

/**
 * The data index training step `step` (1-based) starts at, if every step before it consumed a full ramped
 * batch: Psyche's get_data_index_for_step, used to restart a run from a step.
 */
export function dataIndexForStep(config: BatchRampConfig, step: number): number {
  let index = 0;
  for (let s = 1; s < step; s++) index += roundBatchSize(config, index);
  return index;
}
