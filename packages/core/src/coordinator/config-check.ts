// The invariants the state machine itself relies on. The config module does the full, user-facing validation
// of a TOML file (docs/protocol.md "Run configuration"); this guards `createCoordinator` and `update_config`
// against configs that would make the machine stall or divide by zero: each key's type and sign here, then
// the machine's rules of the table the config module applies too (state/config-rules.ts). Unlike Psyche there is no 256-client
// cap: `max_clients` is the limit.
import { CONFIG_RULES, ruleMessage } from '../state/config-rules.ts';
import { MAX_INNER_STEPS, type CoordinatorConfig } from '../state/coordinator-config.ts';
import { MAX_TRUSTED_VERIFIERS } from './trust.ts';
import { isHex32 } from '../crypto/bytes.ts';

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
    else if (!tv.every(isHex32))
      errors.push(
        'config.trusted_verifiers: each key must be 64 lowercase hex digits (an Ed25519 public key)',
      );
  }
  if (errors.length > 0) return errors;
  // The keys are integers of the right sign: the rules relating them to each other apply.
  for (const rule of CONFIG_RULES)
    if (rule.machine && !rule.ok(config)) errors.push(`config.${rule.key}: ${ruleMessage(rule, config)}`);
  return errors;
}
