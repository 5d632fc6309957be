// bench:quality's settings: its flags, and the run configs the network methods train — `distro`: the default
// run's DisTrO variant (DISTRO_RUN_TOML: the embedded default before SparseLoCo, one step per round);
// `sparseloco`: the embedded default run itself (DEFAULT_RUN_TOML: H inner steps per round) — each with only
// the flags' keys changed, validated by core's parser like any run config. Lengths are in optimizer steps of
// one global batch each (--steps), so every method trains the same tokens.
import { parseArgs } from 'node:util';
import {
  DEFAULT_RUN_TOML,
  DISTRO_RUN_TOML,
  parseRunConfig,
  stringifyRunConfig,
  type ModelPreset,
  type RunConfig,
} from '@meshtrain/core';
import { int, num, presetFlag, UsageError } from './flags.ts';

export interface QualityFlags {
  json: boolean;
  methods: string[];
  preset: ModelPreset;
  peers: number;
  /** Optimizer steps of one global batch each (SparseLoCo: inner steps, steps / H rounds). */
  steps: number;
  /** Global batch: sequences per step. */
  batchSize: number;
  seqLen: number;
  /** Network methods' peak lr (SparseLoCo: the inner AdamW's), one run per value; empty: the run's. */
  lr: number[];
  /** Top-k per chunk (one run per value); empty: the run's. */
  topk: number[];
  chunk: number | null;
  /**
   * Bits per sent value. DisTrO: 1 (signs, the run's) or 32 (float coefficients); SparseLoCo: its
   * quantization_bits, 1..8 (the run's 1). null: each run's own.
   */
  bits: number | null;
  /** SparseLoCo's inner steps per round (H); null: the default run's. */
  innerSteps: number | null;
  /** The run's verification_percent (a verified run's trainers skip DisTrO's lookahead); null: the run's. */
  verificationPercent: number | null;
  adamwLr: number;
  /**
   * AdamW's data: 'run' (the network run's global batches, the fair comparison) and/or 'shuffled'
   * (node-trainer baseline unchanged: its own shuffle, seed 0, all `steps`).
   */
  adamwOrders: ('run' | 'shuffled')[];
  /**
   * The run's sample order (its data location's shuffle): 'corpus' (DontShuffle, the order the first figures
   * were measured in) or 'seeded' (the default run's seed); null: the default run's own.
   */
  dataOrder: 'corpus' | 'seeded' | null;
  evalEvery: number;
  evalBatches: number;
  progressEvery: number;
  /** ONNX Runtime intra-op threads (CPU EP, spinning off). */
  threads: number;
  data: string | null;
}

export const USAGE = `npm run -s bench:quality -- [--json] [--method adamw,distro,sparseloco] [--preset tiny] [--peers 4] [--steps 300]
  [--lr 1e-3,3e-3] [--topk 8,32] [--chunk 64] [--bits B] [--inner-steps H] [--verification-percent P] [--adamw-lr 1e-3]
  [--adamw-order run,shuffled] [--data-order corpus|seeded]
  [--batch-size 64] [--seq-len 128] [--eval-every 50] [--eval-batches 8] [--progress-every 10] [--threads 2] [--data DIR]

Held-out loss of what each method trains from the embedded default run's settings, at equal tokens and data
order, and what a peer sends. Network methods run N real clients on core's coordinator in this process:
distro trains the default run's DisTrO variant (one step per round), sparseloco the default run itself
(SparseLoCo: --inner-steps H inner AdamW steps per round, default the run's 5). --steps counts optimizer
steps of --batch-size sequences; for sparseloco they are inner steps, so --steps must be a multiple of H
(steps / H rounds). --lr is the network methods' peak lr (sparseloco: the inner AdamW's); --topk, --chunk
and --bits set the run's compression (--bits: 1 or 32 for distro, 1..8 for sparseloco). adamw is
node-trainer baseline's single-process AdamW on the same global batches, one per optimizer step, in the
first network method's order (--adamw-order shuffled: on baseline's own shuffled order instead, as
\`node-trainer baseline\` trains). --data-order sets the run's sample order (default: the default run's,
seeded). --lr and --topk take comma lists (one run per value). --json prints only the JSON result on stdout.`;

export { UsageError };

function list(name: string, v: string | undefined, ok: (x: number) => boolean): number[] {
  if (v === undefined) return [];
  return v.split(',').map((s) => num(name, s.trim(), NaN, ok));
}

export function parseQualityFlags(argv: string[], base: RunConfig = defaultRun()): QualityFlags {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      json: { type: 'boolean' },
      method: { type: 'string' },
      preset: { type: 'string' },
      peers: { type: 'string' },
      steps: { type: 'string' },
      'batch-size': { type: 'string' },
      'seq-len': { type: 'string' },
      lr: { type: 'string' },
      topk: { type: 'string' },
      chunk: { type: 'string' },
      bits: { type: 'string' },
      'inner-steps': { type: 'string' },
      'adamw-lr': { type: 'string' },
      'verification-percent': { type: 'string' },
      'adamw-order': { type: 'string' },
      'data-order': { type: 'string' },
      'eval-every': { type: 'string' },
      'eval-batches': { type: 'string' },
      'progress-every': { type: 'string' },
      threads: { type: 'string' },
      data: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) throw new UsageError('');
  const preset = presetFlag('preset', values.preset, base.meshtrain.preset ?? 'tiny');
  const methods = (values.method ?? 'adamw,distro').split(',').map((s) => s.trim());
  const bits = values.bits === undefined ? null : num('bits', values.bits, 0, int(1));
  const adamwOrders = (values['adamw-order'] ?? 'run').split(',').map((x) => x.trim());
  for (const x of adamwOrders)
    if (x !== 'run' && x !== 'shuffled') throw new UsageError(`--adamw-order: run or shuffled, got '${x}'`);
  // DisTrO sends signs or floats; SparseLoCo codes of 1..8 bits with a per-chunk level table.
  if (bits !== null && methods.includes('distro') && bits !== 1 && bits !== 32)
    throw new UsageError('--bits: 1 or 32 for distro');
  if (bits !== null && methods.includes('sparseloco') && bits > 8)
    throw new UsageError('--bits: 1..8 for sparseloco');
  const innerSteps =
    values['inner-steps'] === undefined ? null : num('inner-steps', values['inner-steps'], 0, int(1));
  const steps = num('steps', values.steps, base.config.total_steps, int(3));
  if (methods.includes('sparseloco')) checkWholeRounds(steps, innerSteps ?? defaultInnerSteps());
  const dataOrder = values['data-order'] ?? null;
  if (dataOrder !== null && dataOrder !== 'corpus' && dataOrder !== 'seeded')
    throw new UsageError(`--data-order: corpus or seeded, got '${dataOrder}'`);
  return {
    json: Boolean(values.json),
    methods,
    preset,
    peers: num('peers', values.peers, 4, int(1)),
    steps,
    batchSize: num('batch-size', values['batch-size'], base.config.global_batch_size_end, int(1)),
    seqLen: num('seq-len', values['seq-len'], base.model.LLM.max_seq_len, int(1)),
    lr: list('lr', values.lr, (x) => x > 0),
    topk: list('topk', values.topk, int(1)),
    chunk: values.chunk === undefined ? null : num('chunk', values.chunk, 0, int(2)),
    bits,
    innerSteps,
    verificationPercent:
      values['verification-percent'] === undefined
        ? null
        : num('verification-percent', values['verification-percent'], 0, (x) => x >= 0 && x <= 100),
    adamwLr: num('adamw-lr', values['adamw-lr'], 1e-3, (x) => x > 0),
    adamwOrders: adamwOrders as QualityFlags['adamwOrders'],
    dataOrder,
    evalEvery: num('eval-every', values['eval-every'], 50, int(1)),
    evalBatches: num('eval-batches', values['eval-batches'], 8, int(1)),
    progressEvery: num('progress-every', values['progress-every'], 10, int(1)),
    threads: num('threads', values.threads, 2, int(1)),
    data: values.data ?? null,
  };
}

/** The default run's DisTrO variant: the shape every method shares (one step per round, steps = rounds). */
export function defaultRun(): RunConfig {
  return parseRunConfig(DISTRO_RUN_TOML).config;
}

/** The embedded default run: SparseLoCo, H inner steps per round. */
export function sparseLoCoDefaultRun(): RunConfig {
  return parseRunConfig(DEFAULT_RUN_TOML).config;
}

function defaultInnerSteps(): number {
  const opt = sparseLoCoDefaultRun().model.LLM.optimizer;
  if (!('SparseLoCo' in opt)) throw new Error('the embedded default run is not a SparseLoCo run');
  return opt.SparseLoCo.inner_steps;
}

/** A SparseLoCo run of `steps` inner steps is steps / H whole rounds; anything else trains other tokens. */
function checkWholeRounds(steps: number, h: number): void {
  if (steps % h !== 0)
    throw new UsageError(
      `--steps ${steps}: sparseloco trains whole rounds of ${h} inner steps (--inner-steps), so --steps must be a multiple of ${h}`,
    );
}

/**
 * The default run's DisTrO variant at the flags' shape: preset, steps (run and lr schedule), batch, sequence
 * length. What every method shares (model, data, AdamW's warmup) and what `distro` trains.
 */
export function baseRunFor(f: QualityFlags): RunConfig {
  return atShape(defaultRun(), f, f.steps);
}

/**
 * The embedded default run (SparseLoCo) at the flags' shape: H = --inner-steps (default the run's), steps / H
 * rounds of H inner steps of --batch-size sequences each, the inner lr schedule over all steps inner steps
 * (docs/protocol.md "SparseLoCo rounds": the schedule counts inner steps).
 */
export function sparseLoCoRunFor(f: QualityFlags): RunConfig {
  const run = structuredClone(sparseLoCoDefaultRun());
  const opt = run.model.LLM.optimizer;
  if (!('SparseLoCo' in opt)) throw new Error('the embedded default run is not a SparseLoCo run');
  if (f.innerSteps !== null) opt.SparseLoCo.inner_steps = f.innerSteps;
  const h = opt.SparseLoCo.inner_steps;
  checkWholeRounds(f.steps, h);
  return atShape(run, f, f.steps / h);
}

/** `template` with the flags' shape: `rounds` rounds, the lr schedule over f.steps optimizer steps. */
function atShape(template: RunConfig, f: QualityFlags, rounds: number): RunConfig {
  const run = structuredClone(template);
  run.meshtrain.preset = f.preset;
  run.config.total_steps = rounds;
  if (f.verificationPercent !== null) run.config.verification_percent = f.verificationPercent;
  run.config.global_batch_size_start = f.batchSize;
  run.config.global_batch_size_end = f.batchSize;
  run.meshtrain.micro_batch_size = Math.min(run.meshtrain.micro_batch_size, f.batchSize);
  run.model.LLM.max_seq_len = f.seqLen;
  if (f.dataOrder !== null) setDataOrder(run, f.dataOrder);
  const table = Object.values(run.model.LLM.lr_schedule)[0] as { total_steps?: number; warmup_steps: number };
  if (table.total_steps !== undefined) table.total_steps = f.steps;
  table.warmup_steps = Math.min(table.warmup_steps, f.steps);
  return validated(run);
}

/** Sets the Relay data location's shuffle: DontShuffle for 'corpus'; 'seeded' needs the run's own seed. */
function setDataOrder(run: RunConfig, order: 'corpus' | 'seeded'): void {
  const loc = run.model.LLM.data_location;
  if (typeof loc !== 'object' || !('Relay' in loc))
    throw new UsageError('--data-order: the run has no Relay data');
  if (order === 'corpus') loc.Relay.shuffle = 'DontShuffle';
  else if (loc.Relay.shuffle === 'DontShuffle')
    throw new UsageError('--data-order seeded: the default run has no shuffle seed to use');
}

/** `run` with its peak lr set to `lr`, the final lr scaled with it (the schedule's shape is kept). */
export function withPeakLr(run: RunConfig, lr: number): RunConfig {
  const out = structuredClone(run);
  const table = Object.values(out.model.LLM.lr_schedule)[0] as unknown as Record<string, number>;
  const scale = lr / (table.base_lr as number);
  for (const k of ['base_lr', 'final_lr', 'warmup_init_lr', 'cosine_decay_final_lr', 'linear_decay_final_lr'])
    if (typeof table[k] === 'number') table[k] *= scale;
  return validated(out);
}

/** Checks the edited run as the relay checks a run creator's config. */
export function validated(run: RunConfig): RunConfig {
  return parseRunConfig(stringifyRunConfig(run)).config;
}

/** The run's lr schedule: its kind and the keys of its TOML table. */
export function describeSchedule(run: RunConfig): Record<string, number | string> {
  const [kind, table] = Object.entries(run.model.LLM.lr_schedule)[0] as unknown as [
    string,
    Record<string, number>,
  ];
  return { kind, ...table };
}
