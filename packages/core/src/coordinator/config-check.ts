// The invariants the state machine itself relies on. The config module does the full, user-facing validation
// of a TOML file (docs/protocol.md "Run configuration"); this guards `createCoordinator` and `update_config`
// against configs that would make the machine stall or divide by zero. Unlike Psyche there is no 256-client
// cap: `max_clients` is the limit.
import { MAX_INNER_STEPS } from '../config/sparseloco.ts';
import type { CoordinatorConfig } from '../state/coordinator-config.ts';
import { MAX_TRUSTED_VERIFIERS } from './trust.ts';

const POSITIVE_INTEGERS = [
  'warmup_time',
  'cooldown_time',
  'epoch_time',
  'max_round_train_time',
  'round_witness_time',
  'min_clients',
  'init_min_clients',
  'global_batch_size_start',
  'global_batch_size_end',
  'total_steps',
  'waiting_for_members_extra_time',
  'max_clients',
  'max_witnesses',
  'max_seq_len',
] as const satisfies readonly (keyof CoordinatorConfig)[];

const NON_NEGATIVE_INTEGERS = [
  'verification_percent',
  'witness_nodes',
  'global_batch_size_warmup_tokens',
  'cold_start_warmup_steps',
] as const satisfies readonly (keyof CoordinatorConfig)[];

/** Every problem with `config`, each naming its key; empty when usable. */
export function checkCoordinatorConfig(config: CoordinatorConfig): string[] {
  const errors: string[] = [];
  for (const key of POSITIVE_INTEGERS) {
    const v = config[key];
    if (!Number.isSafeInteger(v) || v <= 0)
      errors.push(`config.${key}: must be a positive integer (got ${String(v)})`);
  }
  for (const key of NON_NEGATIVE_INTEGERS) {
    const v = config[key];
    if (!Number.isSafeInteger(v) || v < 0)
      errors.push(`config.${key}: must be a non-negative integer (got ${String(v)})`);
  }
  const h = config.inner_steps;
  if (h !== undefined && (!Number.isSafeInteger(h) || h < 1 || h > MAX_INNER_STEPS))
    errors.push(`config.inner_steps: must be an integer in 1..${MAX_INNER_STEPS} (got ${String(h)})`);
  const tv = config.trusted_verifiers;
  if (tv !== undefined) {
    if (!Array.isArray(tv) || tv.length > MAX_TRUSTED_VERIFIERS)
      errors.push(`config.trusted_verifiers: must be a list of at most ${MAX_TRUSTED_VERIFIERS} keys`);
    else if (!tv.every((k) => typeof k === 'string' && /^[0-9a-f]{64}$/.test(k)))
      errors.push(
        'config.trusted_verifiers: each key must be 64 lowercase hex digits (an Ed25519 public key)',
      );
    else if (new Set(tv).size !== tv.length) errors.push('config.trusted_verifiers: a key is listed twice');
    else if (tv.length > 0 && config.verification_percent === 0)
      errors.push('config.trusted_verifiers: needs verification_percent > 0 (results carry no fingerprint)');
  }
  if (errors.length > 0) return errors;
  const c = config;
  if (c.global_batch_size_end * (c.inner_steps ?? 1) > 0xffff_ffff)
    errors.push(
      `config.global_batch_size_end × inner_steps must fit in u32 (${c.global_batch_size_end} × ${c.inner_steps})`,
    );
  if (c.verification_percent > 100)
    errors.push(`config.verification_percent: must be <= 100 (got ${c.verification_percent})`);
  if (c.min_clients > c.init_min_clients)
    errors.push(
      `config.min_clients: must be <= config.init_min_clients (${c.min_clients} > ${c.init_min_clients})`,
    );
  if (c.init_min_clients > c.max_clients)
    errors.push(
      `config.init_min_clients: must be <= config.max_clients (${c.init_min_clients} > ${c.max_clients})`,
    );
  if (c.global_batch_size_start > c.global_batch_size_end) {
    errors.push(
      `config.global_batch_size_start: must be <= config.global_batch_size_end (${c.global_batch_size_start} > ${c.global_batch_size_end})`,
    );
  }
  if (c.witness_nodes > c.max_witnesses)
    errors.push(
      `config.witness_nodes: must be <= config.max_witnesses (${c.witness_nodes} > ${c.max_witnesses})`,
    );
  if (c.warmup_time >= c.epoch_time)
    errors.push(`config.warmup_time: must be < config.epoch_time (${c.warmup_time} >= ${c.epoch_time})`);
  if (c.max_round_train_time >= c.epoch_time) {
    errors.push(
      `config.max_round_train_time: must be < config.epoch_time (${c.max_round_train_time} >= ${c.epoch_time})`,
    );
  }
  if (!(c.bloom_false_positive_rate > 0 && c.bloom_false_positive_rate < 1)) {
    errors.push(`config.bloom_false_positive_rate: must be in (0, 1) (got ${c.bloom_false_positive_rate})`);
  }
  return errors;
}
