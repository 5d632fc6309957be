// Rules that relate keys to each other (docs/protocol.md "Run configuration"): the coordinator's table
// (state/config-rules.ts), plus the runtime asserts of Psyche's LR schedules and our own keys. Messages name
// the key to change and both values.
//
// `run` may hold unknown values (keys that failed their own check, see unknown.ts): each rule is a thunk so
// that one needing such a value is skipped while the others still report.
import { CONFIG_RULES, ruleMessage } from '../state/config-rules.ts';
import type { CoordinatorConfig } from '../state/coordinator-config.ts';
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

/** Where a coordinator key lives in the run file. */
function filePath(key: keyof CoordinatorConfig): string {
  if (key === 'max_seq_len' || key === 'cold_start_warmup_steps') return `model.LLM.${key}`;
  if (key === 'inner_steps') return 'model.LLM.optimizer.SparseLoCo.inner_steps';
  return `config.${key}`;
}

/**
 * The coordinator's config as the rules read it, one key at a time (coordinatorConfigOf reads them all at
 * once), so that a rule needing an unknown key is the only one skipped.
 */
function coordinatorView(run: RunConfig): CoordinatorConfig {
  const llm = run.model.LLM;
  return new Proxy({} as CoordinatorConfig, {
    get: (_target, key) => {
      if (key === 'max_seq_len' || key === 'cold_start_warmup_steps') return llm[key];
      if (key === 'inner_steps')
        return 'SparseLoCo' in llm.optimizer ? llm.optimizer.SparseLoCo.inner_steps : undefined;
      return (run.config as unknown as Record<PropertyKey, unknown>)[key];
    },
  });
}

/** The coordinator's rules (state/config-rules.ts), all of them: a run file is held to the sensible ones too. */
function configRules(run: RunConfig): Check {
  const c = coordinatorView(run);
  return (issues) => {
    for (const r of CONFIG_RULES)
      rule(
        issues,
        filePath(r.key),
        () => r.ok(c),
        () => ruleMessage(r, c),
      );
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
