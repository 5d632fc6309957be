// The run file of a short local run (local-testnet, the e2e scenarios): Psyche keys with short timers, the Brown
// corpus served by the relay, DisTrO chunk 64 top-8 1-bit (or SparseLoCo with H inner steps), a cosine
// schedule. Callers choose the sizes and timers.
import { withTrustedVerifiers } from '@meshtrain/core';
import { PRESETS, type PresetName } from '@meshtrain/model';
import { TESTNET_DEFAULTS } from './defaults.ts';

export interface ShortRunValues {
  runId: string;
  warmupTime: number;
  epochTime: number;
  maxRoundTrainTime: number;
  /** Seconds every round spends in RoundWitness (default 1). */
  roundWitnessTime?: number;
  initMinClients: number;
  /** Global batch (sequences per step). */
  batch: number;
  steps: number;
  seqLen: number;
  lrWarmupSteps: number;
  preset: PresetName;
  seed: number;
  microBatchSize: number;
  /** Share of results two other clients re-check (docs/protocol.md "Verification of work"); default 0. */
  verificationPercent?: number;
  /**
   * Train with SparseLoCo, this many inner steps per round (the schedule then counts inner steps:
   * docs/protocol.md "SparseLoCo rounds"); absent: DisTrO.
   */
  innerSteps?: number;
}

/** The optimizer table: DisTrO's, or SparseLoCo's with its defaults but H. */
function optimizerToml(innerSteps: number | undefined): string {
  if (innerSteps === undefined)
    return `[model.LLM.optimizer.Distro]
clip_grad_norm = 1.0
compression_decay = 0.999
compression_chunk = 64
compression_topk = 8
quantize_1bit = true`;
  return `[model.LLM.optimizer.SparseLoCo]
inner_steps = ${innerSteps}`;
}

export function shortRunToml(v: ShortRunValues): string {
  const h = v.innerSteps ?? 1;
  return `run_id = "${v.runId}"

[config]
warmup_time = ${v.warmupTime}
cooldown_time = 3
epoch_time = ${v.epochTime}
max_round_train_time = ${v.maxRoundTrainTime}
round_witness_time = ${v.roundWitnessTime ?? TESTNET_DEFAULTS.roundWitnessTime}
waiting_for_members_extra_time = 2
min_clients = 1
init_min_clients = ${v.initMinClients}
verification_percent = ${v.verificationPercent ?? 0}
witness_nodes = 0
global_batch_size_start = ${v.batch}
global_batch_size_end = ${v.batch}
global_batch_size_warmup_tokens = 0
total_steps = ${v.steps}

[model.LLM]
architecture = "HfLlama"
data_type = "Pretraining"
max_seq_len = ${v.seqLen}
cold_start_warmup_steps = 0
checkpoint = "Ephemeral"

[model.LLM.data_location.Relay]
dataset = "brown"
token_size_in_bytes = "TwoBytes"

[model.LLM.lr_schedule.Cosine]
base_lr = 3.0e-3
warmup_steps = ${v.lrWarmupSteps * h}
warmup_init_lr = 0.0
total_steps = ${v.steps * h}
final_lr = 3.0e-4

${optimizerToml(v.innerSteps)}

[meshtrain]
preset = "${v.preset}"
seed = ${v.seed}
micro_batch_size = ${v.microBatchSize}
`;
}

/** What the testnet's run depends on (local-testnet's options). */
export interface TestnetRunValues {
  numClients: number;
  steps: number;
  preset: PresetName;
  randomKillNum: number;
  randomKillInterval: number;
  seed: number;
  /** Trainers besides the N honest ones that must be in the first epoch (adversary processes). */
  extraClients?: number;
  /** Seconds per epoch; default: one epoch for the whole run, or two kill intervals with kills. */
  epochTime?: number;
  /**
   * Seconds each round stays in RoundWitness (default 1). It bounds a round's length from below whatever the
   * machine's speed, so tests that need several epochs can rely on steps × this > the epochs' time.
   */
  roundWitnessTime?: number;
  /** Default 25: cheats are caught within a few rounds of a short run. */
  verificationPercent?: number;
  /** SparseLoCo with this many inner steps per round instead of DisTrO. */
  innerSteps?: number;
  /**
   * Sequences per step; default 4 per trainer that must be in the first epoch. An honest-only baseline of an
   * attacked run sets it to the attacked run's, so both train on as many tokens per step.
   */
  globalBatch?: number;
  /** Keys (hex) of the run's trusted verifiers (`[config] trusted_verifiers`); default none. */
  trustedVerifiers?: readonly string[];
}

/** Sequences each trainer of the first epoch adds to the default global batch. */
const PER_CLIENT = 4;

/** The run's global batch (sequences per step). */
export function testnetBatch(
  o: Pick<TestnetRunValues, 'numClients' | 'extraClients' | 'globalBatch'>,
): number {
  return o.globalBatch ?? PER_CLIENT * (o.numClients + (o.extraClients ?? 0));
}

/** The testnet's run: Psyche keys with short timers, the micro or tiny preset on the Brown corpus. */
export function testnetToml(o: TestnetRunValues): string {
  const cfg = PRESETS[o.preset];
  const seqLen = Math.min(64, cfg.max_position_embeddings);
  const batch = testnetBatch(o);
  // Killed trainers come back at the next epoch, so with kills an epoch lasts about two kill intervals.
  const epochTime = o.epochTime ?? (o.randomKillNum > 0 ? Math.max(30, 2 * o.randomKillInterval) : 100_000);
  // Warmup waits for every member's model load (joiners download the checkpoint); it must end inside an epoch.
  const warmupTime = Math.min(60, epochTime - 10);
  const toml = shortRunToml({
    runId: 'testnet',
    warmupTime,
    epochTime,
    maxRoundTrainTime: 20,
    ...(o.roundWitnessTime === undefined ? {} : { roundWitnessTime: o.roundWitnessTime }),
    // Core waits for init_min_clients members at every epoch start, so counting processes an attack may get
    // ejected (adversaries) would stall the run once one is; the testnet holds the run paused until every
    // first-epoch process joined instead (index.ts).
    initMinClients: o.numClients,
    batch,
    steps: o.steps,
    seqLen,
    lrWarmupSteps: Math.max(1, Math.min(5, Math.floor(o.steps / 8))),
    preset: o.preset,
    seed: o.seed,
    microBatchSize: PER_CLIENT,
    verificationPercent: o.verificationPercent ?? TESTNET_DEFAULTS.verificationPercent,
    ...(o.innerSteps === undefined ? {} : { innerSteps: o.innerSteps }),
  });
  return withTrustedVerifiers(toml, o.trustedVerifiers ?? []);
}
