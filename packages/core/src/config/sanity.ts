// Rules that relate keys to each other: Psyche's CoordinatorConfig::check_error (psyche-spec §2.9) with its
// hard-coded limits (256 clients, 32 witnesses) replaced by the run's own max_clients / max_witnesses, plus the
// runtime asserts of Psyche's LR schedules and our own keys. Messages name the key to change and both values.
import type { ConfigIssue } from './errors.ts';
import type { LlmModel, MeshtrainTable, RunConfig } from './types.ts';

type Check = (issues: ConfigIssue[]) => void;

function rule(issues: ConfigIssue[], ok: boolean, path: string, message: string): void {
  if (!ok) issues.push({ path, message });
}

function configRules(run: RunConfig): Check {
  const c = run.config;
  const llm = run.model.LLM;
  return (issues) => {
    rule(issues, c.epoch_time > 0, 'config.epoch_time', 'must be > 0');
    rule(
      issues,
      c.warmup_time < c.epoch_time,
      'config.warmup_time',
      `must be < config.epoch_time (${c.warmup_time} >= ${c.epoch_time})`,
    );
    rule(issues, c.max_round_train_time > 0, 'config.max_round_train_time', 'must be > 0');
    rule(
      issues,
      c.max_round_train_time < c.epoch_time,
      'config.max_round_train_time',
      `must be < config.epoch_time (${c.max_round_train_time} >= ${c.epoch_time})`,
    );
    rule(issues, c.round_witness_time > 0, 'config.round_witness_time', 'must be > 0');
    rule(issues, c.cooldown_time > 0, 'config.cooldown_time', 'must be > 0');
    rule(
      issues,
      c.waiting_for_members_extra_time > 0,
      'config.waiting_for_members_extra_time',
      'must be > 0',
    );
    rule(issues, c.min_clients > 0, 'config.min_clients', 'must be > 0');
    rule(
      issues,
      c.init_min_clients >= c.min_clients,
      'config.init_min_clients',
      `must be >= config.min_clients (${c.init_min_clients} < ${c.min_clients})`,
    );
    rule(issues, c.max_clients >= 1, 'config.max_clients', 'must be >= 1');
    rule(
      issues,
      c.init_min_clients <= c.max_clients,
      'config.init_min_clients',
      `must be <= config.max_clients (${c.init_min_clients} > ${c.max_clients})`,
    );
    rule(issues, c.global_batch_size_start >= 1, 'config.global_batch_size_start', 'must be >= 1');
    rule(issues, c.global_batch_size_end >= 1, 'config.global_batch_size_end', 'must be >= 1');
    rule(
      issues,
      c.global_batch_size_start <= c.global_batch_size_end,
      'config.global_batch_size_start',
      `must be <= config.global_batch_size_end (${c.global_batch_size_start} > ${c.global_batch_size_end})`,
    );
    rule(issues, c.total_steps > 0, 'config.total_steps', 'must be > 0');
    rule(issues, c.max_witnesses >= 1, 'config.max_witnesses', 'must be >= 1');
    rule(
      issues,
      c.witness_nodes <= c.min_clients,
      'config.witness_nodes',
      `must be <= config.min_clients (${c.witness_nodes} > ${c.min_clients})`,
    );
    rule(
      issues,
      c.witness_nodes <= c.max_witnesses,
      'config.witness_nodes',
      `must be <= config.max_witnesses (${c.witness_nodes} > ${c.max_witnesses})`,
    );
    rule(
      issues,
      c.bloom_false_positive_rate > 0 && c.bloom_false_positive_rate < 0.5,
      'config.bloom_false_positive_rate',
      `must be in (0, 0.5) (got ${c.bloom_false_positive_rate})`,
    );
    rule(issues, llm.max_seq_len > 0, 'model.LLM.max_seq_len', 'must be > 0');
    if (c.max_round_train_time > 0 && c.warmup_time < c.epoch_time) {
      // Rounds that fit in an epoch after warmup: the cold-start ramp must end inside the first epoch.
      const rounds = Math.floor((c.epoch_time - c.warmup_time) / c.max_round_train_time);
      rule(
        issues,
        llm.cold_start_warmup_steps <= rounds,
        'model.LLM.cold_start_warmup_steps',
        `must be <= (config.epoch_time − config.warmup_time) / config.max_round_train_time ` +
          `(${llm.cold_start_warmup_steps} > ${rounds})`,
      );
    }
  };
}

function lrRules(llm: LlmModel): Check {
  return (issues) => {
    const s = llm.lr_schedule;
    const at = `model.LLM.lr_schedule.${Object.keys(s)[0] ?? ''}`;
    if ('Linear' in s || 'Cosine' in s) {
      const t = 'Linear' in s ? s.Linear : s.Cosine;
      rule(
        issues,
        t.total_steps >= t.warmup_steps,
        `${at}.total_steps`,
        `must be >= ${at}.warmup_steps (${t.total_steps} < ${t.warmup_steps})`,
      );
    }
    if ('WarmupStableDecay' in s) {
      // Psyche asserts these at every get_lr call, i.e. it panics mid-run; here they are config errors.
      const w = s.WarmupStableDecay;
      rule(
        issues,
        w.cosine_decay_final_lr <= w.base_lr,
        `${at}.cosine_decay_final_lr`,
        `must be <= ${at}.base_lr (${w.cosine_decay_final_lr} > ${w.base_lr})`,
      );
      rule(
        issues,
        w.linear_decay_final_lr <= w.cosine_decay_final_lr,
        `${at}.linear_decay_final_lr`,
        `must be <= ${at}.cosine_decay_final_lr (${w.linear_decay_final_lr} > ${w.cosine_decay_final_lr})`,
      );
    }
  };
}

function modelShapeRules(m: MeshtrainTable): Check {
  return (issues) => {
    const o = m.model;
    if (!o) return;
    const { hidden_size: h, num_attention_heads: q, num_key_value_heads: kv } = o;
    if (h !== undefined && q !== undefined)
      rule(
        issues,
        h % q === 0,
        'meshtrain.model.hidden_size',
        `must be divisible by meshtrain.model.num_attention_heads (${h} % ${q} = ${h % q})`,
      );
    if (q !== undefined && kv !== undefined)
      rule(
        issues,
        q % kv === 0,
        'meshtrain.model.num_key_value_heads',
        `must divide meshtrain.model.num_attention_heads (${q} % ${kv} = ${q % kv})`,
      );
  };
}

/** Every cross-key rule that `run` breaks; empty when it is sane. */
export function sanityIssues(run: RunConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  for (const check of [configRules(run), lrRules(run.model.LLM), modelShapeRules(run.meshtrain)])
    check(issues);
  return issues;
}
