// The coordinator's view of a run's `[config]` table. Field names are Psyche's TOML keys
// (docs/protocol.md "Run configuration") so a parsed file maps onto this type without renaming; times are
// whole seconds, as in Psyche.
export interface CoordinatorConfig {
  warmup_time: number;
  cooldown_time: number;
  /**
   * Wall-clock length of an epoch; after it, two drain rounds run and the epoch ends (docs/protocol.md
   * "Epochs and drain rounds").
   */
  epoch_time: number;
  max_round_train_time: number;
  round_witness_time: number;
  min_clients: number;
  init_min_clients: number;
  verification_percent: number;
  /** 0 means min(#clients, max_witnesses). */
  witness_nodes: number;
  /** Sequences per step at the start of the ramp and at its end. */
  global_batch_size_start: number;
  global_batch_size_end: number;
  global_batch_size_warmup_tokens: number;
  total_steps: number;
  waiting_for_members_extra_time: number;
  /** Our keys, where Psyche hard-codes a constant. */
  max_clients: number;
  max_witnesses: number;
  /**
   * Sequence length in tokens: the batch-size ramp counts tokens
   * (docs/protocol.md "Batch size and data index").
   */
  max_seq_len: number;
  cold_start_warmup_steps: number;
  /**
   * SparseLoCo's inner steps per round (`[model.LLM.optimizer.SparseLoCo] inner_steps`): a round's batch is
   * this many times the ramped global batch (docs/protocol.md "SparseLoCo rounds"). Absent for DisTrO runs.
   */
  inner_steps?: number;
  /**
   * Ed25519 public keys (64 lowercase hex digits) of verifiers the run creator trusts: their verdicts are
   * final and anchor every other identity's verified history (coordinator/trust.ts). Absent or empty: a run
   * without anchor, which warns that it may be attacker-controlled.
   */
  trusted_verifiers?: string[];
}

/** A round carries at most this many inner steps (H × global_batch_size sequences each). */
export const MAX_INNER_STEPS = 1024;

export const DEFAULT_LIMITS = {
  // A run sets its own; unset, a run still has a finite member list (snapshots grow with it).
  max_clients: 10_000,
  max_witnesses: 32,
} as const;
