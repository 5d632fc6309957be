import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseRunConfig, RunConfigError, stringifyRunConfig, type RunConfig } from '../src/config/index.ts';
import { validRunConfig } from './fixtures/run-config-arbitrary.ts';

function issuePaths(toml: string): string[] {
  try {
    parseRunConfig(toml);
  } catch (err) {
    if (err instanceof RunConfigError) return err.issues.map((i) => i.path);
    throw err;
  }
  return [];
}

describe('random valid configs', () => {
  it('parse, and round-trip through TOML unchanged', () => {
    fc.assert(
      fc.property(validRunConfig, (run) => {
        const parsed = parseRunConfig(stringifyRunConfig(run));
        expect(parsed.config).toEqual(run);
        expect(parsed.notes).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('reject an unknown key added to any table, naming its path', () => {
    fc.assert(
      fc.property(validRunConfig, fc.nat(), (run, pick) => {
        const doc = JSON.parse(JSON.stringify(run)) as Record<string, unknown>;
        const tables: [string, Record<string, unknown>][] = [];
        const walk = (node: Record<string, unknown>, path: string) => {
          tables.push([path, node]);
          for (const [k, v] of Object.entries(node))
            if (v !== null && typeof v === 'object' && !Array.isArray(v))
              walk(v as Record<string, unknown>, path === '' ? k : `${path}.${k}`);
        };
        walk(doc, '');
        const [path, table] = tables[pick % tables.length]!;
        table.zz_typo = 1;
        expect(issuePaths(stringifyRunConfig(doc as unknown as RunConfig))).toContain(
          path === '' ? 'zz_typo' : `${path}.zz_typo`,
        );
      }),
      { numRuns: 200 },
    );
  });
});

type Breaker = (run: RunConfig) => void;

// Each sanity rule, the path it must report, and a change that breaks only that rule's condition.
const RULES: [path: string, breakIt: Breaker][] = [
  ['config.epoch_time', (r) => void (r.config.epoch_time = 0)],
  ['config.warmup_time', (r) => void (r.config.warmup_time = r.config.epoch_time)],
  ['config.max_round_train_time', (r) => void (r.config.max_round_train_time = 0)],
  ['config.max_round_train_time', (r) => void (r.config.max_round_train_time = r.config.epoch_time)],
  ['config.round_witness_time', (r) => void (r.config.round_witness_time = 0)],
  ['config.cooldown_time', (r) => void (r.config.cooldown_time = 0)],
  ['config.waiting_for_members_extra_time', (r) => void (r.config.waiting_for_members_extra_time = 0)],
  ['config.min_clients', (r) => void (r.config.min_clients = 0)],
  ['config.init_min_clients', (r) => void (r.config.init_min_clients = r.config.min_clients - 1)],
  ['config.init_min_clients', (r) => void (r.config.init_min_clients = r.config.max_clients + 1)],
  ['config.max_clients', (r) => void (r.config.max_clients = 0)],
  ['config.global_batch_size_start', (r) => void (r.config.global_batch_size_start = 0)],
  ['config.global_batch_size_end', (r) => void (r.config.global_batch_size_end = 0)],
  [
    'config.global_batch_size_start',
    (r) => void (r.config.global_batch_size_start = r.config.global_batch_size_end + 1),
  ],
  ['config.total_steps', (r) => void (r.config.total_steps = 0)],
  ['config.witness_nodes', (r) => void (r.config.witness_nodes = r.config.min_clients + 1)],
  [
    'config.witness_nodes',
    (r) => {
      r.config.max_witnesses = Math.max(1, r.config.min_clients - 1);
      r.config.witness_nodes = r.config.max_witnesses + 1;
      r.config.min_clients = r.config.witness_nodes;
      r.config.init_min_clients = r.config.max_clients = Math.max(r.config.max_clients, r.config.min_clients);
    },
  ],
  ['config.max_witnesses', (r) => void (r.config.max_witnesses = 0)],
  ['model.LLM.max_seq_len', (r) => void (r.model.LLM.max_seq_len = 0)],
  [
    'model.LLM.cold_start_warmup_steps',
    (r) => {
      const c = r.config;
      r.model.LLM.cold_start_warmup_steps =
        Math.floor((c.epoch_time - c.warmup_time) / c.max_round_train_time) + 1;
    },
  ],
];

describe('sanity rules', () => {
  RULES.forEach(([path, breakIt], i) => {
    it(`rule ${i + 1} reports ${path}`, () => {
      fc.assert(
        fc.property(validRunConfig, (run) => {
          const broken = structuredClone(run);
          breakIt(broken);
          expect(issuePaths(stringifyRunConfig(broken))).toContain(path);
        }),
        { numRuns: 40 },
      );
    });
  });

  it('LR schedule rules name the schedule key', () => {
    fc.assert(
      fc.property(validRunConfig, fc.double({ min: 1e-6, max: 1, noNaN: true }), (run, lr) => {
        const r = structuredClone(run);
        r.model.LLM.lr_schedule = {
          Cosine: { base_lr: lr, warmup_steps: 10, warmup_init_lr: 0, total_steps: 9, final_lr: 0 },
        };
        expect(issuePaths(stringifyRunConfig(r))).toContain('model.LLM.lr_schedule.Cosine.total_steps');
        const wsd = {
          base_lr: lr,
          warmup_steps: 0,
          warmup_init_lr: 0,
          stable_steps: 1,
          cosine_decay_steps: 1,
          cosine_decay_final_lr: lr * 2,
          linear_decay_steps: 1,
          linear_decay_final_lr: lr * 3,
        };
        r.model.LLM.lr_schedule = { WarmupStableDecay: wsd };
        const paths = issuePaths(stringifyRunConfig(r));
        expect(paths).toContain('model.LLM.lr_schedule.WarmupStableDecay.cosine_decay_final_lr');
        expect(paths).toContain('model.LLM.lr_schedule.WarmupStableDecay.linear_decay_final_lr');
      }),
      { numRuns: 20 },
    );
  });
});

// Keys whose value is a number; writing a string there is a type error the schema reports.
const NUMERIC_KEYS = [
  'config.warmup_time',
  'config.cooldown_time',
  'config.epoch_time',
  'config.max_round_train_time',
  'config.round_witness_time',
  'config.min_clients',
  'config.init_min_clients',
  'config.verification_percent',
  'config.witness_nodes',
  'config.global_batch_size_start',
  'config.global_batch_size_end',
  'config.global_batch_size_warmup_tokens',
  'config.total_steps',
  'config.waiting_for_members_extra_time',
  'config.max_clients',
  'config.max_witnesses',
  'model.LLM.max_seq_len',
  'model.LLM.cold_start_warmup_steps',
] as const;

/** Writes a string where `path` (one of NUMERIC_KEYS) holds a number. */
function breakType(run: RunConfig, path: string): void {
  const keys = path.split('.');
  const table = keys
    .slice(0, -1)
    .reduce<Record<string, unknown>>(
      (node, k) => node[k] as Record<string, unknown>,
      run as unknown as Record<string, unknown>,
    );
  table[keys.at(-1)!] = 'oops';
}

// Range and cross-key errors: the path reported, every key its rule reads, and a change that breaks it.
const RANGE_ERRORS: [path: string, reads: string[], breakIt: Breaker][] = [
  ['config.epoch_time', ['config.epoch_time'], (r) => void (r.config.epoch_time = 0)],
  ['config.round_witness_time', ['config.round_witness_time'], (r) => void (r.config.round_witness_time = 0)],
  ['config.cooldown_time', ['config.cooldown_time'], (r) => void (r.config.cooldown_time = 0)],
  [
    'config.waiting_for_members_extra_time',
    ['config.waiting_for_members_extra_time'],
    (r) => void (r.config.waiting_for_members_extra_time = 0),
  ],
  ['config.min_clients', ['config.min_clients'], (r) => void (r.config.min_clients = 0)],
  ['config.max_clients', ['config.max_clients'], (r) => void (r.config.max_clients = 0)],
  ['config.total_steps', ['config.total_steps'], (r) => void (r.config.total_steps = 0)],
  ['config.max_witnesses', ['config.max_witnesses'], (r) => void (r.config.max_witnesses = 0)],
  ['model.LLM.max_seq_len', ['model.LLM.max_seq_len'], (r) => void (r.model.LLM.max_seq_len = 0)],
  [
    'config.init_min_clients',
    ['config.init_min_clients', 'config.min_clients'],
    (r) => void (r.config.init_min_clients = r.config.min_clients - 1),
  ],
  [
    'config.warmup_time',
    ['config.warmup_time', 'config.epoch_time'],
    (r) => void (r.config.warmup_time = r.config.epoch_time),
  ],
];

function issuesOf(toml: string): { path: string; message: string }[] {
  try {
    parseRunConfig(toml);
  } catch (err) {
    if (err instanceof RunConfigError) return [...err.issues];
    throw err;
  }
  return [];
}

describe('one pass reports every error', () => {
  it('a type error alone is the only error: no rule reports a knock-on of it', () => {
    fc.assert(
      fc.property(validRunConfig, fc.constantFrom(...NUMERIC_KEYS), (run, key) => {
        const broken = structuredClone(run);
        breakType(broken, key);
        expect(issuesOf(stringifyRunConfig(broken))).toEqual([
          { path: key, message: 'expected a number, got string "oops"' },
        ]);
      }),
      { numRuns: 300 },
    );
  });

  it('a type error and an independent range error are both reported', () => {
    const pairs = fc
      .tuple(fc.constantFrom(...NUMERIC_KEYS), fc.constantFrom(...RANGE_ERRORS))
      .filter(([key, [, reads]]) => !reads.includes(key));
    fc.assert(
      fc.property(validRunConfig, pairs, (run, [key, [path, , breakIt]]) => {
        const broken = structuredClone(run);
        breakIt(broken);
        breakType(broken, key);
        const found = issuesOf(stringifyRunConfig(broken));
        expect(found.filter((i) => i.path === key)).toEqual([
          { path: key, message: 'expected a number, got string "oops"' },
        ]);
        expect(found.map((i) => i.path)).toContain(path);
      }),
      { numRuns: 400 },
    );
  });
});
