// A run small enough for WebGPU on SwiftShader (≈0.35 GFLOP/s): the `micro` preset (~100k parameters), 32
// tokens per sequence, 2 sequences per client per round, generous round timers.
export function microRunToml(o: {
  runId: string;
  steps: number;
  /** Clients the first epoch waits for (init_min_clients); each trains 2 sequences per round. */
  clients: number;
  /** Seconds per epoch: epoch ends are where clients report parameter hashes and upload checkpoints. */
  epochTime?: number;
}): string {
  const batch = 2 * o.clients;
  // Warmup (model load: session creation on SwiftShader takes seconds) and a round's training must fit in an epoch.
  const slow = o.epochTime === undefined ? 60 : Math.min(60, Math.floor(o.epochTime / 2));
  return `run_id = "${o.runId}"

[config]
warmup_time = ${slow}
cooldown_time = 3
epoch_time = ${o.epochTime ?? 100000}
max_round_train_time = ${slow}
round_witness_time = 1
waiting_for_members_extra_time = 2
min_clients = 1
init_min_clients = ${o.clients}
verification_percent = 0
witness_nodes = 0
global_batch_size_start = ${batch}
global_batch_size_end = ${batch}
global_batch_size_warmup_tokens = 0
total_steps = ${o.steps}

[model.LLM]
architecture = "HfLlama"
data_type = "Pretraining"
max_seq_len = 32
cold_start_warmup_steps = 0
checkpoint = "Ephemeral"

[model.LLM.data_location.Relay]
dataset = "brown"
token_size_in_bytes = "TwoBytes"

[model.LLM.lr_schedule.Cosine]
base_lr = 3.0e-3
warmup_steps = 2
warmup_init_lr = 0.0
total_steps = ${o.steps}
final_lr = 3.0e-4

[model.LLM.optimizer.Distro]
clip_grad_norm = 1.0
compression_decay = 0.999
compression_chunk = 64
compression_topk = 8
quantize_1bit = true

[meshtrain]
preset = "micro"
seed = 7
micro_batch_size = 2
`;
}
