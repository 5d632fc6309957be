// The run the relay creates when started without a config: small enough to train on one machine in minutes.
// SparseLoCo (docs/protocol.md "SparseLoCo rounds") at the setting packages/distro/README.md "Tuning" measured
// best among those at >= 1000x fewer bytes per token than fp32 gradients: 60 rounds of 5 inner AdamW steps
// on 64 x 128-token batches (the tokens of 300 AdamW steps), top 32 of each 64 x 64 chunk at 1 bit. The same
// text is kept as packages/core/test/fixtures/meshtrain-default.toml, and a test holds the two equal.
interface Variant {
  rounds: string;
  roundTime: string;
  schedule: string;
  lr: string;
  finalLr: string;
  optimizer: string;
}

const runToml = (
  v: Variant,
): string => `# meshtrain's embedded default run. Psyche's [config] and [model.LLM] keys, plus [meshtrain].
run_id = "default"

[config]
warmup_time = 30
cooldown_time = 5
epoch_time = 600
${v.roundTime}
round_witness_time = 1
# Trainers started together (each solving the join puzzle first) all make the first epoch.
waiting_for_members_extra_time = 15
min_clients = 1
init_min_clients = 1
# Each result is re-checked by two other clients with this probability (docs/protocol.md "Verification of work").
verification_percent = 10
# An open run takes at most this many clients (docs/protocol.md "Threat model").
max_clients = 1024
# 0: every round picks min(#clients, max_witnesses) witnesses.
witness_nodes = 0
# 64 sequences of 128 tokens per optimizer step: 8,192 tokens (docs/architecture.md "Measured defaults").
global_batch_size_start = 64
global_batch_size_end = 64
global_batch_size_warmup_tokens = 0
${v.rounds}

[model.LLM]
architecture = "HfLlama"
data_type = "Pretraining"
max_seq_len = 128
cold_start_warmup_steps = 0
# Fresh weights from meshtrain.seed; later checkpoints come from peers and the relay's store.
checkpoint = "Ephemeral"

[model.LLM.data_location.Relay]
dataset = "brown"
token_size_in_bytes = "TwoBytes"
# The training split in a seeded order, a new permutation each pass (docs/protocol.md "Batch size and data
# index"); the seed is SHA-256("meshtrain default run"). Without it the run reads the corpus in document order.
shuffle = { Seeded = [122, 238, 214, 186, 245, 128, 172, 47, 151, 38, 52, 52, 16, 86, 19, 13, 141, 14, 237, 127, 226, 21, 204, 89, 247, 176, 141, 38, 117, 82, 0, 195] }

${v.schedule}[model.LLM.lr_schedule.Cosine]
base_lr = ${v.lr}
warmup_steps = 20
warmup_init_lr = 0.0
total_steps = 300
final_lr = ${v.finalLr}

${v.optimizer}

[meshtrain]
preset = "tiny"
seed = 1
micro_batch_size = 8
`;

export const DEFAULT_RUN_TOML = runToml({
  rounds: `# Rounds: each is inner_steps optimizer steps, so 60 rounds of 5 are 300 steps of AdamW's tokens.
total_steps = 60`,
  roundTime: `# A round is 5 steps of 64 sequences, shared by the trainers.
max_round_train_time = 60`,
  schedule: `# The inner AdamW steps' schedule, in optimizer steps (300 = 60 rounds of 5).\n`,
  lr: '3.0e-3',
  finalLr: '3.0e-4',
  optimizer: `# packages/distro/README.md "Tuning": the best measured setting at >= 1000x fewer bytes than fp32 gradients.
[model.LLM.optimizer.SparseLoCo]
inner_steps = 5
betas = [0.9, 0.95]
eps = 1.0e-8
weight_decay = 0.1
clip_grad_norm = 1.0
error_decay = 0.95
compression_chunk = 64
compression_topk = 32
quantization_bits = 1
domain = "raw"
outer_lr = 1.0`,
});

/**
 * The default run with DisTrO instead (the default before SparseLoCo: chunk 64, top-8, 1-bit, decay 0.999,
 * cosine lr 1e-3; 300 rounds of one step each): what DisTrO's tests and benches (bench:quality's `distro`,
 * bench:integrity) train. Same data, model, batch and tokens as the default.
 */
export const DISTRO_RUN_TOML = runToml({
  rounds: 'total_steps = 300',
  roundTime: 'max_round_train_time = 15',
  schedule: '',
  lr: '1.0e-3',
  finalLr: '1.0e-4',
  optimizer: `[model.LLM.optimizer.Distro]
clip_grad_norm = 1.0
compression_decay = 0.999
compression_chunk = 64
compression_topk = 8
quantize_1bit = true`,
});
