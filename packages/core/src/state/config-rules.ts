// The rules that relate a run's coordinator keys to each other (docs/protocol.md "Run configuration"): one
// table that the run-file validator (config/sanity.ts) and the state machine's guard
// (coordinator/config-check.ts) both apply, so a rule and its message exist once. Psyche's
// CoordinatorConfig::check_error with its hard-coded limits (256 clients, 32 witnesses) replaced by the run's
// own max_clients / max_witnesses. Messages name the key to change and both values.
import type { CoordinatorConfig } from './coordinator-config.ts';

export interface ConfigRule {
  /** The key the message is about. */
  key: keyof CoordinatorConfig;
  ok: (c: CoordinatorConfig) => boolean;
  message: string | ((c: CoordinatorConfig) => string);
  /**
   * Whether the state machine itself depends on the rule, so createCoordinator and update_config refuse a
   * config that breaks it; the others hold a run file to what a sensible run needs.
   */
  machine: boolean;
}

/** `key` > 0, or with `atLeastOne` >= 1 (the same on integers; the message says which the key is counted in). */
function positive(key: keyof CoordinatorConfig, atLeastOne = false): ConfigRule {
  return atLeastOne
    ? { key, ok: (c) => (c[key] as number) >= 1, message: 'must be >= 1', machine: true }
    : { key, ok: (c) => (c[key] as number) > 0, message: 'must be > 0', machine: true };
}

/** Rounds that fit in an epoch after warmup: the cold-start ramp must end inside the first epoch. */
function roundsAfterWarmup(c: CoordinatorConfig): number {
  return Math.floor((c.epoch_time - c.warmup_time) / c.max_round_train_time);
}

export const CONFIG_RULES: readonly ConfigRule[] = [
  positive('epoch_time'),
  {
    key: 'warmup_time',
    ok: (c) => c.warmup_time < c.epoch_time,
    message: (c) => `must be < config.epoch_time (${c.warmup_time} >= ${c.epoch_time})`,
    machine: true,
  },
  positive('max_round_train_time'),
  {
    key: 'max_round_train_time',
    ok: (c) => c.max_round_train_time < c.epoch_time,
    message: (c) => `must be < config.epoch_time (${c.max_round_train_time} >= ${c.epoch_time})`,
    machine: true,
  },
  positive('round_witness_time'),
  positive('cooldown_time'),
  positive('waiting_for_members_extra_time'),
  positive('min_clients'),
  {
    key: 'init_min_clients',
    ok: (c) => c.init_min_clients >= c.min_clients,
    message: (c) => `must be >= config.min_clients (${c.init_min_clients} < ${c.min_clients})`,
    machine: true,
  },
  positive('max_clients', true),
  {
    key: 'init_min_clients',
    ok: (c) => c.init_min_clients <= c.max_clients,
    message: (c) => `must be <= config.max_clients (${c.init_min_clients} > ${c.max_clients})`,
    machine: true,
  },
  positive('global_batch_size_start', true),
  positive('global_batch_size_end', true),
  {
    key: 'global_batch_size_start',
    ok: (c) => c.global_batch_size_start <= c.global_batch_size_end,
    message: (c) =>
      `must be <= config.global_batch_size_end (${c.global_batch_size_start} > ${c.global_batch_size_end})`,
    machine: true,
  },
  positive('total_steps'),
  positive('max_witnesses', true),
  {
    key: 'trusted_verifiers',
    ok: (c) => new Set(c.trusted_verifiers ?? []).size === (c.trusted_verifiers ?? []).length,
    message: 'lists a key twice',
    machine: true,
  },
  {
    key: 'trusted_verifiers',
    ok: (c) => (c.trusted_verifiers ?? []).length === 0 || c.verification_percent > 0,
    message:
      'needs config.verification_percent > 0: without verification no result carries a fingerprint to check',
    machine: true,
  },
  {
    key: 'witness_nodes',
    ok: (c) => c.witness_nodes <= c.min_clients,
    message: (c) => `must be <= config.min_clients (${c.witness_nodes} > ${c.min_clients})`,
    machine: false,
  },
  {
    key: 'witness_nodes',
    ok: (c) => c.witness_nodes <= c.max_witnesses,
    message: (c) => `must be <= config.max_witnesses (${c.witness_nodes} > ${c.max_witnesses})`,
    machine: true,
  },
  {
    key: 'verification_percent',
    ok: (c) => c.verification_percent <= 100,
    message: (c) => `must be <= 100 (got ${c.verification_percent})`,
    machine: true,
  },
  {
    key: 'global_batch_size_end',
    ok: (c) => c.global_batch_size_end * (c.inner_steps ?? 1) <= 0xffff_ffff,
    message: (c) =>
      `× inner_steps must fit in u32 (${c.global_batch_size_end} × ${String(c.inner_steps ?? 1)})`,
    machine: true,
  },
  positive('max_seq_len'),
  {
    key: 'cold_start_warmup_steps',
    ok: (c) =>
      !(c.max_round_train_time > 0 && c.warmup_time < c.epoch_time) ||
      c.cold_start_warmup_steps <= roundsAfterWarmup(c),
    message: (c) =>
      `must be <= (config.epoch_time − config.warmup_time) / config.max_round_train_time ` +
      `(${c.cold_start_warmup_steps} > ${roundsAfterWarmup(c)})`,
    machine: false,
  },
];

/** The rule's message for `c`. */
export function ruleMessage(rule: ConfigRule, c: CoordinatorConfig): string {
  return typeof rule.message === 'string' ? rule.message : rule.message(c);
}
