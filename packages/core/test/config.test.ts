import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../src/state/coordinator-config.ts';
import {
  coordinatorConfigOf,
  DEFAULT_RUN_TOML,
  DISTRO_RUN_TOML,
  parseRunConfig,
  RunConfigError,
  runLrSchedule,
  stringifyRunConfig,
  setTrustedVerifiers,
  withTrustedVerifiers,
  type ConfigIssue,
} from '../src/config/index.ts';
import { learningRate } from '../src/schedule/index.ts';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');
const BOOK = fixture('psyche-book-example.toml');
/** The default run's shuffle seed, as its comment says: SHA-256("meshtrain default run"). */
const DEFAULT_SEED = [...createHash('sha256').update('meshtrain default run').digest()];

function issues(toml: string): ConfigIssue[] {
  try {
    parseRunConfig(toml);
  } catch (err) {
    if (err instanceof RunConfigError) return [...err.issues];
    throw err;
  }
  throw new Error('expected the config to be rejected');
}

/** The default run with one line replaced (the line must exist, so a stale test fails loudly). */
function defaultWith(line: string, replacement: string): string {
  expect(DISTRO_RUN_TOML).toContain(line);
  return DISTRO_RUN_TOML.replace(line, replacement);
}

describe("Psyche's book example", () => {
  const parsed = parseRunConfig(BOOK);

  it('parses, converting rounds_per_epoch to epoch_time and saying so', () => {
    // rounds_per_epoch 20 × (max_round_train_time 30 + round_witness_time 1)
    expect(parsed.config.config.epoch_time).toBe(620);
    const note = parsed.notes.find((n) => n.path === 'config.rounds_per_epoch');
    expect(note?.reason).toContain('620');
    expect(parsed.notes.map((n) => n.path)).toEqual(
      expect.arrayContaining(['config.waiting_for_members_extra_time', 'model.LLM.cold_start_warmup_steps']),
    );
  });

  it('lists what meshtrain cannot run yet instead of failing', () => {
    expect(parsed.unsupported.map((u) => u.path).sort()).toEqual([
      'meshtrain.preset',
      'model.LLM.checkpoint.Hub',
      'model.LLM.data_location.Http',
    ]);
  });

  it('maps onto the coordinator config, with our limits from DEFAULT_LIMITS', () => {
    const c = coordinatorConfigOf(parsed.config);
    expect(c).toMatchObject({
      max_seq_len: 2048,
      cold_start_warmup_steps: 0,
      witness_nodes: 1,
      total_steps: 25000,
    });
    expect(c.max_clients).toBe(DEFAULT_LIMITS.max_clients);
    expect(c.max_witnesses).toBe(DEFAULT_LIMITS.max_witnesses);
  });

  it('keeps its optimizer and schedule values', () => {
    expect(parsed.config.model.LLM.optimizer).toEqual({
      Distro: {
        clip_grad_norm: 1,
        compression_decay: 0.999,
        compression_chunk: 64,
        compression_topk: 8,
        quantize_1bit: true,
      },
    });
    expect(learningRate(runLrSchedule(parsed.config), 250)).toBe(4e-4);
  });
});

describe('the embedded default run', () => {
  it('is the fixture, byte for byte', () => {
    expect(fixture('meshtrain-default.toml')).toBe(DEFAULT_RUN_TOML);
  });

  it('parses with nothing unsupported and nothing defaulted', () => {
    const parsed = parseRunConfig(DEFAULT_RUN_TOML);
    expect(parsed.unsupported).toEqual([]);
    expect(parsed.notes).toEqual([]);
    expect(parsed.summary).toBe(
      'run default preset tiny, 60 rounds × 5 steps, gbs 64→64, SparseLoCo H=5 chunk 64 top-32 1-bit raw, Cosine lr 3e-3',
    );
  });

  it('has the cosine schedule of the measured defaults: 20 warmup steps to 3e-3, down to a 10% floor', () => {
    const lr = runLrSchedule(parseRunConfig(DEFAULT_RUN_TOML).config);
    expect(learningRate(lr, 0)).toBe(0);
    expect(learningRate(lr, 20)).toBe(3e-3);
    expect(learningRate(lr, 300)).toBe(3e-4);
    expect(learningRate(lr, 400)).toBe(3e-4);
  });

  it('its DisTrO variant trains the same model on the same data and tokens, one step per round', () => {
    const sparse = parseRunConfig(DEFAULT_RUN_TOML).config;
    const distro = parseRunConfig(DISTRO_RUN_TOML);
    expect(distro.notes).toEqual([]);
    expect(distro.summary).toBe(
      'run default preset tiny, 300 steps, gbs 64→64, DisTrO chunk 64 top-8 1-bit, Cosine lr 1e-3',
    );
    expect(distro.config.model.LLM.data_location).toEqual(sparse.model.LLM.data_location);
    expect(distro.config.meshtrain).toEqual(sparse.meshtrain);
    const inner =
      'SparseLoCo' in sparse.model.LLM.optimizer ? sparse.model.LLM.optimizer.SparseLoCo.inner_steps : 0;
    expect(distro.config.config.total_steps).toBe(sparse.config.total_steps * inner);
  });
});

describe('errors', () => {
  it('a TOML syntax error reports its line and column under <toml>', () => {
    const [issue, ...rest] = issues(defaultWith('total_steps = 300\n', 'total_steps = = 300\n'));
    expect(rest).toEqual([]);
    expect(issue?.path).toBe('<toml>');
    const line = DISTRO_RUN_TOML.split('\n').findIndex((l) => l === 'total_steps = 300') + 1;
    expect(issue?.message).toMatch(new RegExp(`^line ${line}, column \\d+: `));
  });

  it('the brief example message: warmup_time >= epoch_time', () => {
    const bad = defaultWith('warmup_time = 30\n', 'warmup_time = 30\n').replace(
      'epoch_time = 600',
      'epoch_time = 20',
    );
    expect(issues(bad)).toContainEqual({
      path: 'config.warmup_time',
      message: 'must be < config.epoch_time (30 >= 20)',
    });
  });

  it('unknown keys name their path and suggest the key meant', () => {
    const found = issues(
      defaultWith('total_steps = 300\n', 'total_step = 300\n').replace('compression_topk', 'compresion_topk'),
    );
    expect(found).toContainEqual({
      path: 'config.total_step',
      message: 'unknown key (did you mean total_steps?)',
    });
    expect(found).toContainEqual({ path: 'config.total_steps', message: 'required key is missing' });
    expect(found).toContainEqual({
      path: 'model.LLM.optimizer.Distro.compresion_topk',
      message: 'unknown key (did you mean compression_topk?)',
    });
  });

  it('unknown top-level tables and variants are errors too', () => {
    const found = issues(
      `${DISTRO_RUN_TOML}\n[meshtrian]\nseed = 2\n`.replace(
        '[model.LLM.lr_schedule.Cosine]',
        '[model.LLM.lr_schedule.Cosin]',
      ),
    );
    const paths = found.map((i) => i.path);
    expect(paths).toContain('meshtrian');
    expect(paths).toContain('model.LLM.lr_schedule.Cosin');
  });

  it('every problem is reported at once, and the message lists them all', () => {
    const bad = DISTRO_RUN_TOML.replace('cooldown_time = 5', 'cooldown_time = -5')
      .replace('preset = "tiny"', 'preset = "tinny"')
      .replace('architecture = "HfLlama"', 'architecture = 3');
    let error: unknown;
    try {
      parseRunConfig(bad);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(RunConfigError);
    const e = error as RunConfigError;
    expect(e.issues.map((i) => i.path)).toEqual([
      'config.cooldown_time',
      'model.LLM.architecture',
      'meshtrain.preset',
    ]);
    for (const i of e.issues) expect(e.message).toContain(`${i.path}: ${i.message}`);
    expect(e.issues[2]?.message).toContain('did you mean tiny?');
  });

  it('a type error and a range error are both reported in one pass, each with its key path', () => {
    const bad = defaultWith('max_round_train_time = 15', 'max_round_train_time = "thirty"').replace(
      '\nmin_clients = 1\n',
      '\nmin_clients = 0\n',
    );
    expect(issues(bad)).toEqual([
      { path: 'config.max_round_train_time', message: 'expected a number, got string "thirty"' },
      { path: 'config.min_clients', message: 'must be > 0' },
    ]);
  });

  it('rules that need a key with a type error are skipped, not reported as knock-on errors', () => {
    // init_min_clients 500 > the default max_clients, but max_clients itself is unreadable.
    const clients = defaultWith('init_min_clients = 1', 'init_min_clients = 500').replace(
      'max_clients = 1024',
      'max_clients = "lots"',
    );
    expect(issues(clients)).toEqual([
      { path: 'config.max_clients', message: 'expected a number, got string "lots"' },
    ]);
    // total_steps < warmup_steps cannot be judged when warmup_steps is not a number.
    const schedule = defaultWith('warmup_steps = 20', 'warmup_steps = "twenty"').replace(
      'total_steps = 300\nfinal_lr',
      'total_steps = 10\nfinal_lr',
    );
    expect(issues(schedule).map((i) => i.path)).toEqual(['model.LLM.lr_schedule.Cosine.warmup_steps']);
    // A value given twice (epoch_time and rounds_per_epoch) but unreadable gets one error, not two.
    const both = defaultWith('epoch_time = 600\n', 'epoch_time = 600\nrounds_per_epoch = "ten"\n');
    expect(issues(both)).toEqual([
      { path: 'config.rounds_per_epoch', message: 'expected a number, got string "ten"' },
    ]);
  });

  it('a missing table, a rejected optimizer or a missing epoch_time does not hide the other rules', () => {
    const noConfig = defaultWith('total_steps = 300\nfinal_lr', 'total_steps = 10\nfinal_lr').replace(
      /\n\[config\][^[]*/,
      '\n',
    );
    expect(issues(noConfig).map((i) => i.path)).toEqual([
      'config',
      'model.LLM.lr_schedule.Cosine.total_steps',
    ]);
    const dummy = DISTRO_RUN_TOML.replace(/\[model\.LLM\.optimizer\.Distro\][^[]*/, '')
      .replace('checkpoint = "Ephemeral"', 'checkpoint = "Ephemeral"\noptimizer = "Dummy"')
      .replace('\nmin_clients = 1\n', '\nmin_clients = 0\n');
    expect(issues(dummy).map((i) => i.path)).toEqual(['model.LLM.optimizer', 'config.min_clients']);
    const noEpoch = defaultWith('epoch_time = 600\n', '').replace('cooldown_time = 5', 'cooldown_time = 0');
    expect(issues(noEpoch).map((i) => i.path)).toEqual(['config.epoch_time', 'config.cooldown_time']);
  });

  it('enum tables must name exactly one variant', () => {
    const two = DISTRO_RUN_TOML.replace(
      '[model.LLM.optimizer.Distro]',
      '[model.LLM.optimizer.AdamW]\nbetas = [0.9, 0.95]\nweight_decay = 0.0\neps = 1e-8\n\n[model.LLM.optimizer.Distro]',
    );
    expect(issues(two)).toContainEqual({
      path: 'model.LLM.optimizer',
      message: 'names 2 variants (Distro, AdamW); give exactly one',
    });
    const unitForm = defaultWith('checkpoint = "Ephemeral"', 'checkpoint = "Hub"');
    expect(issues(unitForm)).toContainEqual({
      path: 'model.LLM.checkpoint',
      message: 'variant Hub needs settings: write it as a table [model.LLM.checkpoint.Hub]',
    });
    const unknown = defaultWith('checkpoint = "Ephemeral"', 'checkpoint = "Ephemerl"');
    expect(issues(unknown)[0]?.message).toMatch(/^unknown variant "Ephemerl" \(did you mean Ephemeral\?\)/);
  });

  it('the "Dummy" optimizer is rejected, as Psyche\'s Model::check does', () => {
    const bad = DISTRO_RUN_TOML.replace(/\[model\.LLM\.optimizer\.Distro\][^[]*/, '').replace(
      'checkpoint = "Ephemeral"',
      'checkpoint = "Ephemeral"\noptimizer = "Dummy"',
    );
    expect(issues(bad).map((i) => i.path)).toEqual(['model.LLM.optimizer']);
  });

  it('epoch_time and rounds_per_epoch: exactly one of them', () => {
    const both = defaultWith('epoch_time = 600\n', 'epoch_time = 600\nrounds_per_epoch = 10\n');
    expect(issues(both).map((i) => i.path)).toEqual(['config.rounds_per_epoch']);
    const neither = defaultWith('epoch_time = 600\n', '');
    expect(issues(neither)).toEqual([
      { path: 'config.epoch_time', message: 'required key is missing (or give the older rounds_per_epoch)' },
    ]);
  });

  it('types and ranges: integers, u8 caps, Seeded shuffle length', () => {
    const found = issues(
      defaultWith('round_witness_time = 1', 'round_witness_time = 1.5').replace(
        'waiting_for_members_extra_time = 15',
        'waiting_for_members_extra_time = 256',
      ),
    );
    expect(found).toContainEqual({
      path: 'config.round_witness_time',
      message: 'expected an integer, got float 1.5',
    });
    expect(found).toContainEqual({
      path: 'config.waiting_for_members_extra_time',
      message: 'must be <= 255 (got 256)',
    });
  });

  it('run_id is at most 32 bytes of UTF-8, not 32 characters', () => {
    expect(() =>
      parseRunConfig(defaultWith('run_id = "default"', `run_id = "${'€'.repeat(10)}"`)),
    ).not.toThrow();
    expect(
      issues(defaultWith('run_id = "default"', `run_id = "${'€'.repeat(11)}"`)).map((i) => i.path),
    ).toEqual(['run_id']);
  });
});

describe('limits come from the config', () => {
  it('no 256-client cap: 1000 clients and 64 witnesses parse when the limits allow them', () => {
    const big = DISTRO_RUN_TOML.replace(
      'min_clients = 1\ninit_min_clients = 1',
      'min_clients = 1000\ninit_min_clients = 5000',
    )
      .replace('witness_nodes = 0', 'witness_nodes = 64\nmax_witnesses = 64')
      .replace('max_clients = 1024', 'max_clients = 5000');
    const c = coordinatorConfigOf(parseRunConfig(big).config);
    expect(c).toMatchObject({
      min_clients: 1000,
      init_min_clients: 5000,
      witness_nodes: 64,
      max_clients: 5000,
    });
  });

  it('max_clients and max_witnesses bound the client and witness counts', () => {
    const bad = DISTRO_RUN_TOML.replace(
      'min_clients = 1\ninit_min_clients = 1',
      'min_clients = 10\ninit_min_clients = 20',
    )
      .replace('witness_nodes = 0', 'witness_nodes = 5\nmax_witnesses = 4')
      .replace('max_clients = 1024', 'max_clients = 19');
    expect(issues(bad)).toEqual([
      { path: 'config.init_min_clients', message: 'must be <= config.max_clients (20 > 19)' },
      { path: 'config.witness_nodes', message: 'must be <= config.max_witnesses (5 > 4)' },
    ]);
  });
});

describe('unsupported features parse and are reported', () => {
  const cases: [string, string, string][] = [
    ['architecture = "HfLlama"', 'architecture = "HfDeepseek"', 'model.LLM.architecture'],
    ['architecture = "HfLlama"', 'architecture = "Torchtitan"', 'model.LLM.architecture'],
    ['checkpoint = "Ephemeral"', 'checkpoint = { Gcs = { bucket = "b" } }', 'model.LLM.checkpoint.Gcs'],
    [
      'checkpoint = "Ephemeral"',
      'checkpoint = { P2PGcs = { bucket = "b", prefix = "p" } }',
      'model.LLM.checkpoint.P2PGcs',
    ],
    [
      'checkpoint = "Ephemeral"',
      'checkpoint = { Hub = { repo_id = "a/b", revision = "main" } }',
      'model.LLM.checkpoint.Hub',
    ],
  ];
  it('verification_percent > 0 is supported (the default run verifies), and 0 turns it off', () => {
    const parsed = parseRunConfig(DISTRO_RUN_TOML);
    expect(parsed.unsupported).toEqual([]);
    expect(parsed.config.config.verification_percent).toBe(10);
    const off = parseRunConfig(defaultWith('verification_percent = 10', 'verification_percent = 0'));
    expect(off.config.config.verification_percent).toBe(0);
  });
  for (const [from, to, path] of cases)
    it(`${to} → ${path}`, () => {
      const parsed = parseRunConfig(defaultWith(from, to));
      expect(parsed.unsupported.map((u) => u.path)).toEqual([path]);
      expect(parsed.unsupported[0]?.reason.length).toBeGreaterThan(10);
    });

  // The default run's whole Relay table: its lines up to the blank line.
  const relay = /\[model\.LLM\.data_location\.Relay\]\n(?:.+\n)*/.exec(DISTRO_RUN_TOML)![0];
  const dataCases: [string, string][] = [
    ['[model.LLM.data_location]\nServer = "host:1234"\n', 'model.LLM.data_location.Server'],
    ['[model.LLM.data_location]\nLocal = "/data"\n', 'model.LLM.data_location.Local'],
    [
      '[model.LLM.data_location]\nWeightedHttp = "https://x/w.json"\n',
      'model.LLM.data_location.WeightedHttp',
    ],
    ['[model.LLM.data_location]\nPreprocessed = "org/repo"\n', 'model.LLM.data_location.Preprocessed'],
    [
      '[model.LLM.data_location.Http]\ntoken_size_in_bytes = "FourBytes"\nshuffle = "DontShuffle"\n' +
        '[model.LLM.data_location.Http.location]\nSingleUrl = "https://x/a.ds"\n',
      'model.LLM.data_location.Http',
    ],
  ];
  for (const [table, path] of dataCases)
    it(`data location → ${path}`, () => {
      const parsed = parseRunConfig(defaultWith(relay, table));
      expect(parsed.unsupported.map((u) => u.path)).toEqual([path]);
    });

  it('"Dummy" data → model.LLM.data_location', () => {
    const parsed = parseRunConfig(
      defaultWith(relay, '').replace(
        'checkpoint = "Ephemeral"',
        'checkpoint = "Ephemeral"\ndata_location = "Dummy"',
      ),
    );
    expect(parsed.unsupported.map((u) => u.path)).toEqual(['model.LLM.data_location']);
  });

  it('AdamW → model.LLM.optimizer.AdamW', () => {
    const parsed = parseRunConfig(
      DISTRO_RUN_TOML.replace(
        /\[model\.LLM\.optimizer\.Distro\][^[]*/,
        '[model.LLM.optimizer.AdamW]\nbetas = [0.9, 0.95]\nweight_decay = 0.1\neps = 1e-8\n\n',
      ),
    );
    expect(parsed.unsupported.map((u) => u.path)).toEqual(['model.LLM.optimizer.AdamW']);
    expect(parsed.summary).toContain('AdamW');
  });

  it('Relay data without token_size_in_bytes defaults to TwoBytes, with a note', () => {
    const parsed = parseRunConfig(defaultWith('token_size_in_bytes = "TwoBytes"\n', ''));
    expect(parsed.config.model.LLM.data_location).toEqual({
      Relay: { dataset: 'brown', token_size_in_bytes: 'TwoBytes', shuffle: { Seeded: DEFAULT_SEED } },
    });
    expect(parsed.notes.map((n) => n.path)).toEqual(['model.LLM.data_location.Relay.token_size_in_bytes']);
  });
});

describe('[model.LLM.data_location.Relay] shuffle', () => {
  const shuffleLine = /^shuffle = .*\n/m.exec(DISTRO_RUN_TOML)![0];
  const withShuffle = (line: string) => defaultWith(shuffleLine, line);

  it('the default run reads its data in a seeded order', () => {
    expect(parseRunConfig(DISTRO_RUN_TOML).config.model.LLM.data_location).toEqual({
      Relay: { dataset: 'brown', token_size_in_bytes: 'TwoBytes', shuffle: { Seeded: DEFAULT_SEED } },
    });
    expect(DEFAULT_SEED).toHaveLength(32);
  });

  it("absent means DontShuffle (Psyche's meaning: existing run files keep their order), with a note", () => {
    const parsed = parseRunConfig(withShuffle(''));
    expect(parsed.config.model.LLM.data_location).toEqual({
      Relay: { dataset: 'brown', token_size_in_bytes: 'TwoBytes', shuffle: 'DontShuffle' },
    });
    expect(parsed.notes.map((n) => n.path)).toEqual(['model.LLM.data_location.Relay.shuffle']);
    expect(parsed.unsupported).toEqual([]);
  });

  it('takes "DontShuffle" and { Seeded = [32 bytes] } as Http does, and writes them back', () => {
    const seed = Array.from({ length: 32 }, (_, i) => (i * 37) % 256);
    for (const [line, want] of [
      ['shuffle = "DontShuffle"\n', 'DontShuffle'],
      [`shuffle = { Seeded = [${seed.join(', ')}] }\n`, { Seeded: seed }],
    ] as const) {
      const parsed = parseRunConfig(withShuffle(line));
      expect(parsed.notes).toEqual([]);
      const loc = parsed.config.model.LLM.data_location as { Relay: { shuffle: unknown } };
      expect(loc.Relay.shuffle).toEqual(want);
      expect(parseRunConfig(stringifyRunConfig(parsed.config)).config).toEqual(parsed.config);
    }
  });

  it('refuses a seed that is not 32 bytes, and an unknown variant, at the key', () => {
    const short = Array.from({ length: 31 }, () => 1).join(', ');
    for (const line of [
      `shuffle = { Seeded = [${short}] }\n`,
      `shuffle = { Seeded = [${Array.from({ length: 31 }, () => 1).join(', ')}, 256] }\n`,
      'shuffle = "Shuffle"\n',
      'shuffle = { Random = 1 }\n',
    ]) {
      const paths = issues(withShuffle(line)).map((i) => i.path);
      expect(paths.length, line).toBeGreaterThan(0);
      expect(
        paths.every((p) => p.startsWith('model.LLM.data_location.Relay.shuffle')),
        `${line}: ${paths.join(', ')}`,
      ).toBe(true);
    }
  });
});

describe('[meshtrain] model overrides', () => {
  it('are kept and counted in the summary', () => {
    const parsed = parseRunConfig(
      `${DISTRO_RUN_TOML}\n[meshtrain.model]\nnum_hidden_layers = 2\nrope_theta = 500000.0\n`,
    );
    expect(parsed.config.meshtrain.model).toEqual({ num_hidden_layers: 2, rope_theta: 500000 });
    expect(parsed.summary).toContain('preset tiny (+2 overrides)');
  });

  it('reject head counts that do not divide', () => {
    const found = issues(
      `${DISTRO_RUN_TOML}\n[meshtrain.model]\nhidden_size = 100\nnum_attention_heads = 3\nnum_key_value_heads = 2\n`,
    );
    expect(found.map((i) => i.path)).toEqual([
      'meshtrain.model.hidden_size',
      'meshtrain.model.num_key_value_heads',
    ]);
  });
});

describe('trusted_verifiers', () => {
  const key = 'ab'.repeat(32);
  it('lists the run creator’s verifier keys in [config], and survives a round trip', () => {
    const toml = withTrustedVerifiers(DEFAULT_RUN_TOML, [key]);
    const run = parseRunConfig(toml).config;
    expect(run.config.trusted_verifiers).toEqual([key]);
    expect(coordinatorConfigOf(run).trusted_verifiers).toEqual([key]);
    expect(parseRunConfig(stringifyRunConfig(run)).config).toEqual(run);
    // Absent by default: the default run has no anchor unless its host starts a verifier.
    expect(parseRunConfig(DEFAULT_RUN_TOML).config.config.trusted_verifiers).toBeUndefined();
    expect(withTrustedVerifiers(DEFAULT_RUN_TOML, [])).toBe(DEFAULT_RUN_TOML);
    // The admin console's edit: replace the list, or remove it, leaving the rest of the text as it was.
    const other = 'cd'.repeat(32);
    const replaced = setTrustedVerifiers(toml, [other, key]);
    expect(parseRunConfig(replaced).config.config.trusted_verifiers).toEqual([other, key]);
    expect(setTrustedVerifiers(replaced, [])).toBe(DEFAULT_RUN_TOML);
  });

  it('refuses malformed, repeated keys and a run without verification', () => {
    expect(() => parseRunConfig(withTrustedVerifiers(DEFAULT_RUN_TOML, ['AB']))).toThrow(/trusted_verifiers/);
    expect(() => parseRunConfig(withTrustedVerifiers(DEFAULT_RUN_TOML, [key, key]))).toThrow(
      /trusted_verifiers/,
    );
    const off = withTrustedVerifiers(DEFAULT_RUN_TOML, [key]).replace(
      'verification_percent = 10',
      'verification_percent = 0',
    );
    expect(() => parseRunConfig(off)).toThrow(/trusted_verifiers/);
  });
});
