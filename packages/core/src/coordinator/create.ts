import type { CoordinatorConfig } from '../state/coordinator-config.ts';
import { checkCoordinatorConfig } from './config-check.ts';
import { CoordinatorError } from './errors.ts';
import type { CoordinatorState, RunState } from '../state/coordinator-state.ts';
import { isHex32 } from '../crypto/bytes.ts';

export interface CreateCoordinatorOptions {
  run_id: string;
  /** 32 bytes of hex chosen by the run creator (the shell's randomness, not core's). */
  run_seed: string;
  config: CoordinatorConfig;
  /** Unix seconds. */
  now: number;
  /**
   * 'waiting' (default): open for members at once. 'paused': created paused, `resume` opens it.
   * 'uninitialized': no usable config yet; `update_config` makes it Paused.
   */
  start?: 'waiting' | 'paused' | 'uninitialized';
}

/** A new run. Throws CoordinatorError('InvalidConfig' | 'BadEvent') for unusable input. */
export function createCoordinator(options: CreateCoordinatorOptions): CoordinatorState {
  const start = options.start ?? 'waiting';
  if (typeof options.run_id !== 'string' || options.run_id.length === 0 || options.run_id.length > 64) {
    throw new CoordinatorError('BadEvent', 'run_id must be a non-empty string of at most 64 characters');
  }
  if (!isHex32(options.run_seed))
    throw new CoordinatorError('BadEvent', 'run_seed must be 32 bytes as 64 lowercase hex digits');
  if (!Number.isSafeInteger(options.now) || options.now < 0)
    throw new CoordinatorError('BadEvent', 'now must be whole unix seconds');
  if (start !== 'uninitialized') {
    const problems = checkCoordinatorConfig(options.config);
    if (problems.length > 0) throw new CoordinatorError('InvalidConfig', problems.join('; '));
  }
  const runState: RunState =
    start === 'waiting' ? 'WaitingForMembers' : start === 'paused' ? 'Paused' : 'Uninitialized';
  return {
    version: 1,
    run_id: options.run_id,
    run_seed: options.run_seed,
    config: { ...options.config },
    run_state: runState,
    run_state_start: options.now,
    pending_pause: false,
    progress: { epoch: 0, step: 1, epoch_start_data_index: 0, retry_batches: [] },
    entropy: '',
    members: [],
    epoch: {
      clients: [],
      rounds: [],
      rounds_head: 0,
      start_step: 1,
      last_step: 0,
      start_timestamp: options.now,
      cold_start_epoch: false,
      warmup_witnesses: [],
    },
    ejected: [],
    strikes: {},
  };
}
