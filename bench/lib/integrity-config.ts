// bench:integrity's settings: its flags, and the run configs its three parts train — each the default run's
// DisTrO variant (DISTRO_RUN_TOML) with only the keys a part needs changed, validated by core's parser.
import { parseArgs } from 'node:util';
import type { ModelPreset, RunConfig } from '@meshtrain/core';
import type { AdversaryKind } from '@meshtrain/client/testing';
import { int, num, presetFlag, UsageError } from './flags.ts';
import { defaultRun, validated } from './quality-config.ts';

/** The fabricated results bench:integrity measures (adversary kinds of @meshtrain/client/testing). */
export const FABRICATED_KINDS = [
  'random-signs',
  'sign-flip',
  'stale-replay',
  'other-batch',
  'dense',
] as const;
export type FabricatedKind = (typeof FABRICATED_KINDS)[number] & AdversaryKind;

export type Part = 'detection' | 'trials' | 'throughput' | 'mixed';
export const PARTS: readonly Part[] = ['detection', 'trials', 'throughput', 'mixed'];

export interface IntegrityFlags {
  json: boolean;
  parts: Part[];
  /** The default run's verification_percent unless given. */
  verificationPercent: number;
  verificationPercentSource: 'default run' | 'flag';
  kinds: FabricatedKind[];
  /** Detection and throughput runs: the model and batch shape (the default run's unless given). */
  preset: ModelPreset;
  batchSize: number;
  seqLen: number;
  honest: number;
  warmupSteps: number;
  /** Epochs with a fresh cheater of every kind (each gives about two verdicts per kind). */
  cheatEpochs: number;
  /** Virtual seconds per epoch in the detection run (short, so that cheaters come back often). */
  epochTime: number;
  throughputSteps: number;
  /** Runs of the default run's length at the default percentage with a cheater of every sampled kind. */
  trials: number;
  trialPreset: ModelPreset;
  trialBatch: number;
  trialSeqLen: number;
  /** Mixed CPU / WebGPU run (micro preset). */
  mixedSteps: number;
  /** micro by default: SwiftShader is slow. */
  mixedPreset: ModelPreset;
  mixedCpu: number;
  mixedWebgpu: number;
  mixedBatch: number;
  mixedSeqLen: number;
  mixedPercent: number;
  threads: number;
  progressEvery: number;
  data: string | null;
}

export const USAGE = `npm run -s bench:integrity -- [--json] [--part detection,trials,throughput,mixed] [--verification-percent P]
  [--kinds random-signs,sign-flip,stale-replay,other-batch,dense] [--preset tiny] [--batch-size 64] [--seq-len 128]
  [--honest 4] [--warmup-steps 40] [--cheat-epochs 10] [--epoch-time 12] [--throughput-steps 24]
  [--trials 8] [--trial-preset micro] [--trial-batch 16] [--trial-seq-len 32]
  [--mixed-steps 300] [--mixed-preset micro] [--mixed-cpu 2] [--mixed-webgpu 2] [--mixed-batch 4] [--mixed-seq-len 32]
  [--mixed-verification-percent 100] [--threads 2] [--progress-every 10] [--data DIR]

Verification of work on real models, with the real client, coordinator and optimizer code in this process:
 detection   honest peers and, after --warmup-steps, a fresh cheater of every kind each epoch (a cheater that
             comes back under a new key), every result verified: how often a verifier fails a fabricated
             result, and from that how likely a cheater is ejected within a run at the default percentage;
 trials      --trials runs of the default run's length at the default percentage, a cheater of every sampled
             kind in each from the start: in how many of them each is ejected, and at which step;
 throughput  the same honest peers with verification off, at the default percentage and at 100%;
 mixed       onnxruntime-node CPU clients and WebGPU clients (ORT's WebGPU EP and DisTrO's WGSL on Dawn;
             SwiftShader without a GPU) verifying each other for --mixed-steps steps of --mixed-preset.
--json prints only the JSON result on stdout; progress goes to stderr.`;

export { UsageError };

const percent = (x: number) => x >= 0 && x <= 100;

function names<T extends string>(flag: string, v: string, allowed: readonly T[]): T[] {
  const out = v.split(',').map((s) => s.trim());
  for (const x of out)
    if (!allowed.includes(x as T))
      throw new UsageError(`--${flag}: '${x}' is not one of ${allowed.join(', ')}`);
  return out as T[];
}

export function parseIntegrityFlags(argv: string[], base: RunConfig = defaultRun()): IntegrityFlags {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      json: { type: 'boolean' },
      part: { type: 'string' },
      'verification-percent': { type: 'string' },
      kinds: { type: 'string' },
      preset: { type: 'string' },
      'batch-size': { type: 'string' },
      'seq-len': { type: 'string' },
      honest: { type: 'string' },
      'warmup-steps': { type: 'string' },
      'cheat-epochs': { type: 'string' },
      'epoch-time': { type: 'string' },
      'throughput-steps': { type: 'string' },
      trials: { type: 'string' },
      'trial-preset': { type: 'string' },
      'trial-batch': { type: 'string' },
      'trial-seq-len': { type: 'string' },
      'mixed-steps': { type: 'string' },
      'mixed-preset': { type: 'string' },
      'mixed-cpu': { type: 'string' },
      'mixed-webgpu': { type: 'string' },
      'mixed-batch': { type: 'string' },
      'mixed-seq-len': { type: 'string' },
      'mixed-verification-percent': { type: 'string' },
      threads: { type: 'string' },
      'progress-every': { type: 'string' },
      data: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) throw new UsageError('');
  const preset = presetFlag('preset', values.preset, base.meshtrain.preset ?? 'tiny');
  const trialPreset = presetFlag('trial-preset', values['trial-preset'], 'micro');
  const mixedPreset = presetFlag('mixed-preset', values['mixed-preset'], 'micro');
  const flagPercent = values['verification-percent'];
  const f: IntegrityFlags = {
    json: Boolean(values.json),
    parts: names('part', values.part ?? PARTS.join(','), PARTS),
    verificationPercent: num('verification-percent', flagPercent, base.config.verification_percent, percent),
    verificationPercentSource: flagPercent === undefined ? 'default run' : 'flag',
    kinds: names('kinds', values.kinds ?? FABRICATED_KINDS.join(','), FABRICATED_KINDS),
    preset,
    batchSize: num('batch-size', values['batch-size'], base.config.global_batch_size_end, int(1)),
    seqLen: num('seq-len', values['seq-len'], base.model.LLM.max_seq_len, int(1)),
    honest: num('honest', values.honest, 4, int(3)),
    warmupSteps: num('warmup-steps', values['warmup-steps'], 40, int(0)),
    cheatEpochs: num('cheat-epochs', values['cheat-epochs'], 10, int(1)),
    epochTime: num('epoch-time', values['epoch-time'], 12, int(6)),
    throughputSteps: num('throughput-steps', values['throughput-steps'], 24, int(8)),
    trials: num('trials', values.trials, 8, int(1)),
    trialPreset,
    trialBatch: num('trial-batch', values['trial-batch'], 16, int(1)),
    trialSeqLen: num('trial-seq-len', values['trial-seq-len'], 32, int(1)),
    mixedSteps: num('mixed-steps', values['mixed-steps'], 300, int(3)),
    mixedPreset,
    mixedCpu: num('mixed-cpu', values['mixed-cpu'], 2, int(1)),
    mixedWebgpu: num('mixed-webgpu', values['mixed-webgpu'], 2, int(1)),
    mixedBatch: num('mixed-batch', values['mixed-batch'], 4, int(1)),
    mixedSeqLen: num('mixed-seq-len', values['mixed-seq-len'], 32, int(1)),
    mixedPercent: num('mixed-verification-percent', values['mixed-verification-percent'], 100, percent),
    threads: num('threads', values.threads, 2, int(1)),
    progressEvery: num('progress-every', values['progress-every'], 10, int(1)),
    data: values.data ?? null,
  };
  if (f.mixedBatch < f.mixedCpu + f.mixedWebgpu)
    throw new UsageError('--mixed-batch: at least one sequence per mixed client');
  return f;
}

/**
 * The default run at the detection / throughput shape: `percent` verification, `steps` steps (the lr
 * schedule stays the default run's), all `peers` needed to start.
 */
export function integrityRun(
  f: IntegrityFlags,
  o: { percent: number; steps: number; peers: number; epochTime?: number },
): RunConfig {
  const run = structuredClone(defaultRun());
  run.meshtrain.preset = f.preset;
  run.config.verification_percent = o.percent;
  run.config.total_steps = o.steps;
  run.config.global_batch_size_start = f.batchSize;
  run.config.global_batch_size_end = f.batchSize;
  run.config.init_min_clients = o.peers;
  run.config.min_clients = Math.min(run.config.min_clients, o.peers);
  if (o.epochTime !== undefined) {
    // Short epochs, so that ejected cheaters come back often. Time is virtual (it moves only while every
    // client is idle), so no honest client misses a deadline; short timeouts only cut the rounds a cheater
    // that sends nothing makes everyone wait for.
    run.config.epoch_time = o.epochTime;
    run.config.warmup_time = Math.min(run.config.warmup_time, 3);
    run.config.max_round_train_time = Math.min(run.config.max_round_train_time, 4);
  }
  run.meshtrain.micro_batch_size = Math.min(run.meshtrain.micro_batch_size, f.batchSize);
  run.model.LLM.max_seq_len = f.seqLen;
  return validated(run);
}

/** The mixed CPU / WebGPU run: the micro preset by default, the default run's optimizer and schedule shape. */
export function mixedRun(f: IntegrityFlags): RunConfig {
  const run = structuredClone(defaultRun());
  const peers = f.mixedCpu + f.mixedWebgpu;
  run.meshtrain.preset = f.mixedPreset;
  run.config.verification_percent = f.mixedPercent;
  run.config.total_steps = f.mixedSteps;
  run.config.global_batch_size_start = f.mixedBatch;
  run.config.global_batch_size_end = f.mixedBatch;
  run.config.init_min_clients = peers;
  run.meshtrain.micro_batch_size = Math.min(run.meshtrain.micro_batch_size, f.mixedBatch);
  run.model.LLM.max_seq_len = f.mixedSeqLen;
  const table = Object.values(run.model.LLM.lr_schedule)[0] as { total_steps?: number; warmup_steps: number };
  if (table.total_steps !== undefined) table.total_steps = f.mixedSteps;
  table.warmup_steps = Math.min(table.warmup_steps, f.mixedSteps);
  return validated(run);
}

/**
 * A trial: the default run (its length, epochs and timers) at `percent` verification, on the trial preset and
 * batch shape, with `peers` clients from the start.
 */
export function trialRun(f: IntegrityFlags, percent: number, peers: number): RunConfig {
  const run = structuredClone(defaultRun());
  run.meshtrain.preset = f.trialPreset;
  run.config.verification_percent = percent;
  run.config.global_batch_size_start = f.trialBatch;
  run.config.global_batch_size_end = f.trialBatch;
  run.config.init_min_clients = peers;
  run.meshtrain.micro_batch_size = Math.min(run.meshtrain.micro_batch_size, f.trialBatch);
  run.model.LLM.max_seq_len = f.trialSeqLen;
  return validated(run);
}
