// The run the relay creates when started without a config: small enough to train on one machine in minutes,
// near the settings docs/architecture.md "Measured defaults" found to train well on the tiny byte-level model
// (DisTrO chunk 64, top-8, 1-bit, decay 0.999; cosine lr 1e-3 with 20 warmup steps and a 10% floor). The same
// text is kept as packages/core/test/fixtures/meshtrain-default.toml, and a test holds the two equal.
export const DEFAULT_RUN_TOML = `# meshtrain's embedded default run. Psyche's [config] and [model.LLM] keys, plus [meshtrain].
run_id = "default"

[config]
warmup_time = 30
cooldown_time = 5
epoch_time = 600
max_round_train_time = 15
round_witness_time = 1
waiting_for_members_extra_time = 3
min_clients = 1
init_min_clients = 1
# Each result is re-checked by two other clients with this probability (docs/protocol.md "Verification of work").
verification_percent = 10
# An open run takes at most this many clients (docs/protocol.md "Threat model").
max_clients = 1024
# 0: every round picks min(#clients, max_witnesses) witnesses.
witness_nodes = 0
# 64 sequences of 128 tokens: the 8,192 tokens per step of the measured defaults (docs/architecture.md).
global_batch_size_start = 64
global_batch_size_end = 64
global_batch_size_warmup_tokens = 0
total_steps = 300

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

[model.LLM.lr_schedule.Cosine]
base_lr = 1.0e-3
warmup_steps = 20
warmup_init_lr = 0.0
total_steps = 300
final_lr = 1.0e-4

[model.LLM.optimizer.Distro]
clip_grad_norm = 1.0
compression_decay = 0.999
compression_chunk = 64
compression_topk = 8
quantize_1bit = true

[meshtrain]
preset = "tiny"
seed = 1
micro_batch_size = 8
`;
