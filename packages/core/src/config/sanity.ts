// Rules that relate keys to each other: Psyche's CoordinatorConfig::check_error
// (docs/protocol.md "Run configuration") with its hard-coded limits (256 clients, 32 witnesses) replaced by
// the run's own max_clients / max_witnesses, plus the runtime asserts of Psyche's LR schedules and our own
// keys. Messages name the key to change and both values.
//
// `run` may hold unknown values (keys that failed their own check, see unknown.ts): each rule is a thunk so
// that one needing such a value is skipped while the others still report.
import type { ConfigIssue } from './errors.ts';
import type { LlmModel, MeshtrainTable, RunConfig } from './types.ts';
import { whenKnown } from './unknown.ts';

type Check = (issues: ConfigIssue[]) => void;

function rule(
  issues: ConfigIssue[],
  path: string,
  ok: () => boolean,
  message: string | (() => string),
): void {
  whenKnown(() => {
    if (!ok()) issues.push({ path, message: typeof message === 'string' ? message : message() });
  });
}

function configRules(run: RunConfig): Check {
  const c = run.config;
  const llm = run.model.LLM;
  return (issues) => {
    rule(issues, 'config.epoch_time', () => c.epoch_time > 0, 'must be > 0');
    rule(
      issues,
      'config.warmup_time',
      () => c.warmup_time < c.epoch_time,
      () => `must be < config.epoch_time (${c.warmup_time} >= ${c.epoch_time})`,
    );
    rule(issues, 'config.max_round_train_time', () => c.max_round_train_time > 0, 'must be > 0');
    rule(
      issues,
      'config.max_round_train_time',
      () => c.max_round_train_time < c.epoch_time,
      () => `must be < config.epoch_time (${c.max_round_train_time} >= ${c.epoch_time})`,
    );
    rule(issues, 'config.round_witness_time', () => c.round_witness_time > 0, 'must be > 0');
    rule(issues, 'config.cooldown_time', () => c.cooldown_time > 0, 'must be > 0');
    rule(
      issues,
      'config.waiting_for_members_extra_time',
      () => c.waiting_for_members_extra_time > 0,
      'must be > 0',
    );
    rule(issues, 'config.min_clients', () => c.min_clients > 0, 'must be > 0');
    rule(
      issues,
      'config.init_min_clients',
      () => c.init_min_clients >= c.min_clients,
      () => `must be >= config.min_clients (${c.init_min_clients} < ${c.min_clients})`,
    );
    rule(issues, 'config.max_clients', () => c.max_clients >= 1, 'must be >= 1');
    rule(
      issues,
      'config.init_min_clients',
      () => c.init_min_clients <= c.max_clients,
      () => `must be <= config.max_clients (${c.init_min_clients} > ${c.max_clients})`,
    );
    rule(issues, 'config.global_batch_size_start', () => c.global_batch_size_start >= 1, 'must be >= 1');
    rule(issues, 'config.global_batch_size_end', () => c.global_batch_size_end >= 1, 'must be >= 1');
    rule(
      issues,
      'config.global_batch_size_start',
      () => c.global_batch_size_start <= c.global_batch_size_end,
      () =>
        `must be <= config.global_batch_size_end (${c.global_batch_size_start} > ${c.global_batch_size_end})`,
    );
    rule(issues, 'config.total_steps', () => c.total_steps > 0, 'must be > 0');
    rule(issues, 'config.max_witnesses', () => c.max_witnesses >= 1, 'must be >= 1');
    const trusted = c.trusted_verifiers ?? [];
    rule(
      issues,
      'config.trusted_verifiers',
      () => new Set(trusted).size === trusted.length,
      'lists a key twice',
    );
    rule(
      issues,
      'config.trusted_verifiers',
      () => trusted.length === 0 || c.verification_percent > 0,
      'needs config.verification_percent > 0: without verification no result carries a fingerprint to check',
    );
    rule(
      issues,
      'config.witness_nodes',
      () => c.witness_nodes <= c.min_clients,
      () => `must be <= config.min_clients (${c.witness_nodes} > ${c.min_clients})`,
    );
    rule(
      issues,
      'config.witness_nodes',
      () => c.witness_nodes <= c.max_witnesses,
      () => `must be <= config.max_witnesses (${c.witness_nodes} > ${c.max_witnesses})`,
    );
    rule(
      issues,
      'config.bloom_false_positive_rate',
      () => c.bloom_false_positive_rate > 0 && c.bloom_false_positive_rate < 0.5,
      () => `must be in (0, 0.5) (got ${c.bloom_false_positive_rate})`,
    );
    rule(issues, 'model.LLM.max_seq_len', () => llm.max_seq_len > 0, 'must be > 0');
    whenKnown(() => {
      if (!(c.max_round_train_time > 0 && c.warmup_time < c.epoch_time)) return;
      // Rounds that fit in an epoch after warmup: the cold-start ramp must end inside the first epoch.
      const rounds = Math.floor((c.epoch_time - c.warmup_time) / c.max_round_train_time);
      rule(
        issues,
        'model.LLM.cold_start_warmup_steps',
        () => llm.cold_start_warmup_steps <= rounds,
        () =>
          `must be <= (config.epoch_time − config.warmup_time) / config.max_round_train_time ` +
          `(${llm.cold_start_warmup_steps} > ${rounds})`,
      );
    });
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
        `${at}.total_steps`,
        () => t.total_steps >= t.warmup_steps,
        () => `must be >= ${at}.warmup_steps (${t.total_steps} < ${t.warmup_steps})`,
      );
    }
    if ('WarmupStableDecay' in s) {
      // Psyche asserts these at every get_lr call, i.e. it panics mid-run; here they are config errors.
      const w = s.WarmupStableDecay;
      rule(
        issues,
        `${at}.cosine_decay_final_lr`,
        () => w.cosine_decay_final_lr <= w.base_lr,
        () => `must be <= ${at}.base_lr (${w.cosine_decay_final_lr} > ${w.base_lr})`,
      );
      rule(
        issues,
        `${at}.linear_decay_final_lr`,
        () => w.linear_decay_final_lr <= w.cosine_decay_final_lr,
        () =>
          `must be <= ${at}.cosine_decay_final_lr (${w.linear_decay_final_lr} > ${w.cosine_decay_final_lr})`,
      );
    }
  };
}

/** SparseLoCo's keys against each other and against the schedule's rates (inner AdamW's decay factor). */
function sparseLoCoRules(llm: LlmModel): Check {
  return (issues) => {
    const o = llm.optimizer;
    if (!('SparseLoCo' in o)) return;
    const at = 'model.LLM.optimizer.SparseLoCo';
    const s = o.SparseLoCo;
    rule(
      issues,
      `${at}.compression_topk`,
      () => s.compression_topk <= s.compression_chunk * s.compression_chunk,
      () =>
        `must be <= ${at}.compression_chunk² (${s.compression_topk} > ${s.compression_chunk}² = ` +
        `${s.compression_chunk * s.compression_chunk}): a chunk has at most chunk² entries`,
    );
    // AdamW multiplies every parameter by 1 − lr·weight_decay each inner step; above 1 that flips signs.
    const maxLr = () => {
      const table = Object.values(llm.lr_schedule)[0] as unknown as Record<string, number>;
      return Math.max(...Object.entries(table).flatMap(([k, v]) => (k.endsWith('lr') ? [v] : [])));
    };
    rule(
      issues,
      `${at}.weight_decay`,
      () => maxLr() * s.weight_decay <= 1,
      () => `× the schedule's largest lr must be <= 1 (${s.weight_decay} × ${maxLr()} > 1)`,
    );
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
        'meshtrain.model.hidden_size',
        () => h % q === 0,
        () => `must be divisible by meshtrain.model.num_attention_heads (${h} % ${q} = ${h % q})`,
      );
    if (q !== undefined && kv !== undefined)
      rule(
        issues,
        'meshtrain.model.num_key_value_heads',
        () => q % kv === 0,
        () => `must divide meshtrain.model.num_attention_heads (${q} % ${kv} = ${q % kv})`,
      );
  };
}

/** Every cross-key rule that `run` breaks and whose keys are all known; empty when it is sane. */
export function sanityIssues(run: RunConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  // A check's own preamble (which LR schedule variant, is there a model table) may need an unknown value too.
  for (const check of [
    configRules(run),
    lrRules(run.model.LLM),
    sparseLoCoRules(run.model.LLM),
    modelShapeRules(run.meshtrain),
  ])
    whenKnown(() => check(issues));
  return issues;
}
