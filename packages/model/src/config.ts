// Llama model shapes. Field names follow Hugging Face's LlamaConfig so config.json round-trips unchanged.
export interface LlamaConfig {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  max_position_embeddings: number;
  rms_norm_eps: number;
  rope_theta: number;
  tie_word_embeddings: boolean;
}

export type PresetName = 'micro' | 'tiny' | '20m' | '125m' | '1b';

const base = { rms_norm_eps: 1e-5, rope_theta: 10000 } as const;

export const PRESETS: Record<PresetName, LlamaConfig> = {
  // ~100k parameters: software WebGPU runs ORT's matmuls at ~0.4 GFLOP/s, so browser tests use this.
  // Grouped KV heads (4 query heads over 2 KV heads) so GQA is exercised everywhere.
  micro: {
    ...base,
    vocab_size: 256,
    hidden_size: 48,
    intermediate_size: 128,
    num_hidden_layers: 3,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    max_position_embeddings: 64,
    tie_word_embeddings: false,
  },
  // ~1.08M parameters, byte-level: the shape of docs/architecture.md "Measured defaults".
  tiny: {
    ...base,
    vocab_size: 256,
    hidden_size: 128,
    intermediate_size: 512,
    num_hidden_layers: 4,
    num_attention_heads: 4,
    num_key_value_heads: 4,
    max_position_embeddings: 128,
    tie_word_embeddings: true,
  },
  // Psyche's llama2-20m shape.
  '20m': {
    ...base,
    vocab_size: 32000,
    hidden_size: 256,
    intermediate_size: 768,
    num_hidden_layers: 8,
    num_attention_heads: 8,
    num_key_value_heads: 8,
    max_position_embeddings: 2048,
    tie_word_embeddings: false,
  },
  '125m': {
    ...base,
    vocab_size: 32000,
    hidden_size: 768,
    intermediate_size: 2560,
    num_hidden_layers: 12,
    num_attention_heads: 12,
    num_key_value_heads: 12,
    max_position_embeddings: 2048,
    tie_word_embeddings: true,
  },
  // Llama-3.2-1B's shape; used for bandwidth figures, too large to train in CI.
  '1b': {
    ...base,
    vocab_size: 128256,
    hidden_size: 2048,
    intermediate_size: 8192,
    num_hidden_layers: 16,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    max_position_embeddings: 2048,
    rope_theta: 500000,
    tie_word_embeddings: true,
  },
};

export interface ParameterSpec {
  /** Hugging Face tensor name, e.g. `model.layers.0.self_attn.q_proj.weight`. */
  name: string;
  /** PyTorch layout: Linear weights are [out_features, in_features]. */
  shape: number[];
}

/**
 * Every trainable tensor, in ascending byte-lexicographic order of its name: the order DisTrO results and
 * checkpoints use (docs/protocol.md "Variable order"), so "model.layers.10" sorts before "model.layers.2".
 */
export function parameterSpecs(c: LlamaConfig): ParameterSpec[] {
  const headDim = c.hidden_size / c.num_attention_heads;
  const kvDim = headDim * c.num_key_value_heads;
  const specs: ParameterSpec[] = [
    { name: 'model.embed_tokens.weight', shape: [c.vocab_size, c.hidden_size] },
  ];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}`;
    specs.push(
      { name: `${p}.input_layernorm.weight`, shape: [c.hidden_size] },
      { name: `${p}.self_attn.q_proj.weight`, shape: [c.hidden_size, c.hidden_size] },
      { name: `${p}.self_attn.k_proj.weight`, shape: [kvDim, c.hidden_size] },
      { name: `${p}.self_attn.v_proj.weight`, shape: [kvDim, c.hidden_size] },
      { name: `${p}.self_attn.o_proj.weight`, shape: [c.hidden_size, c.hidden_size] },
      { name: `${p}.post_attention_layernorm.weight`, shape: [c.hidden_size] },
      { name: `${p}.mlp.gate_proj.weight`, shape: [c.intermediate_size, c.hidden_size] },
      { name: `${p}.mlp.up_proj.weight`, shape: [c.intermediate_size, c.hidden_size] },
      { name: `${p}.mlp.down_proj.weight`, shape: [c.hidden_size, c.intermediate_size] },
    );
  }
  specs.push({ name: 'model.norm.weight', shape: [c.hidden_size] });
  if (!c.tie_word_embeddings) specs.push({ name: 'lm_head.weight', shape: [c.vocab_size, c.hidden_size] });
  return specs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Element count of every parameter by HF name (what a flat parameter blob is cut back into). */
export function parameterSizes(c: LlamaConfig): Map<string, number> {
  return new Map(parameterSpecs(c).map((s) => [s.name, s.shape.reduce((a, b) => a * b, 1)]));
}

export function parameterCount(c: LlamaConfig): number {
  return parameterSpecs(c).reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
}

/** Every field of LlamaConfig: the keys of an HF config.json we read and write, and of a full model shape. */
export const LLAMA_CONFIG_FIELDS = [
  'vocab_size',
  'hidden_size',
  'intermediate_size',
  'num_hidden_layers',
  'num_attention_heads',
  'num_key_value_heads',
  'max_position_embeddings',
  'rms_norm_eps',
  'rope_theta',
  'tie_word_embeddings',
] as const satisfies readonly (keyof LlamaConfig)[];

export function validateLlamaConfig(c: LlamaConfig): string[] {
  const errors: string[] = [];
  if (c.hidden_size % c.num_attention_heads !== 0)
    errors.push(
      `hidden_size: must be divisible by num_attention_heads (${c.hidden_size} % ${c.num_attention_heads})`,
    );
  else if ((c.hidden_size / c.num_attention_heads) % 2 !== 0)
    errors.push('hidden_size / num_attention_heads: head dim must be even for rotary embeddings');
  if (c.num_attention_heads % c.num_key_value_heads !== 0)
    errors.push(
      `num_key_value_heads: must divide num_attention_heads (${c.num_attention_heads} % ${c.num_key_value_heads})`,
    );
  for (const k of ['vocab_size', 'hidden_size', 'intermediate_size', 'num_hidden_layers'] as const)
    if (!Number.isInteger(c[k]) || c[k] <= 0) errors.push(`${k}: must be a positive integer (${c[k]})`);
  return errors;
}
