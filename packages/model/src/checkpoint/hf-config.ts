// config.json in Hugging Face's LlamaConfig format: what we write next to model.safetensors, and what we
// accept from a checkpoint made by `transformers`.
import { LLAMA_CONFIG_FIELDS, validateLlamaConfig, type LlamaConfig } from '../config.ts';
import { CheckpointError } from './errors.ts';

/** Our LlamaConfig fields: everything else in an HF config.json is either checked below or reported. */
const CONFIG_FIELDS = LLAMA_CONFIG_FIELDS;

/** The std of HF's `_init_weights` normal init; written so `transformers` re-initialises the same way. */
export const INITIALIZER_RANGE = 0.02;

/** Serialises a config as HF `config.json` text (2-space indented, trailing newline). */
export function hfConfigJson(config: LlamaConfig, torchDtype: 'float32' | 'bfloat16' = 'float32'): string {
  const json = {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_act: 'silu',
    attention_bias: false,
    mlp_bias: false,
    head_dim: config.hidden_size / config.num_attention_heads,
    initializer_range: INITIALIZER_RANGE,
    torch_dtype: torchDtype,
    ...Object.fromEntries(CONFIG_FIELDS.map((k) => [k, config[k]])),
  };
  return `${JSON.stringify(json, null, 2)}\n`;
}

export interface ParsedHfConfig {
  config: LlamaConfig;
  /** Keys present in the file that do not change the math we run (e.g. `bos_token_id`), for the user to see. */
  ignoredKeys: string[];
  /** Defaults filled in for fields the file left out, as HF's LlamaConfig would. */
  defaulted: string[];
}

function positiveInt(obj: Record<string, unknown>, key: string): number {
  const v = obj[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
    throw new CheckpointError(
      'config',
      `config.json: ${key} must be a positive integer, got ${JSON.stringify(v)}`,
    );
  return v;
}

/** The config as a JSON object, parsed from text when it is text. */
function configObject(input: string | unknown): Record<string, unknown> {
  let obj: unknown = input;
  if (typeof input === 'string') {
    try {
      obj = JSON.parse(input);
    } catch (err) {
      throw new CheckpointError('config', `config.json is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj))
    throw new CheckpointError('config', 'config.json must be a JSON object');
  return obj as Record<string, unknown>;
}

/** Refuses the model types and features our graph does not implement. */
function checkSupported(o: Record<string, unknown>): void {
  if (o.model_type !== undefined && o.model_type !== 'llama')
    throw new CheckpointError(
      'unsupported',
      `config.json: model_type '${String(o.model_type)}' is not 'llama'`,
    );
  if (Array.isArray(o.architectures) && !o.architectures.includes('LlamaForCausalLM'))
    throw new CheckpointError(
      'unsupported',
      `config.json: architectures ${JSON.stringify(o.architectures)} do not include LlamaForCausalLM`,
    );
  if (o.hidden_act !== undefined && o.hidden_act !== 'silu')
    throw new CheckpointError('unsupported', `config.json: hidden_act '${String(o.hidden_act)}' (only silu)`);
  for (const k of ['attention_bias', 'mlp_bias'])
    if (o[k] === true)
      throw new CheckpointError('unsupported', `config.json: ${k}=true (our graph has no biases)`);
  if (o.rope_scaling !== undefined && o.rope_scaling !== null)
    throw new CheckpointError(
      'unsupported',
      `config.json: rope_scaling ${JSON.stringify(o.rope_scaling)} is not supported (plain RoPE only)`,
    );
}

const isPosInt = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v > 0;
const isPosNum = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v > 0;

/** The model's shape; keys with a default are listed in `defaulted` when the file leaves them out. */
function readShape(o: Record<string, unknown>, defaulted: string[]): LlamaConfig {
  const heads = positiveInt(o, 'num_attention_heads');
  const pick = <T>(key: string, fallback: T, ok: (v: unknown) => boolean): T => {
    if (o[key] === undefined || o[key] === null) {
      defaulted.push(`${key}=${JSON.stringify(fallback)}`);
      return fallback;
    }
    if (!ok(o[key]))
      throw new CheckpointError('config', `config.json: ${key} has invalid value ${JSON.stringify(o[key])}`);
    return o[key] as T;
  };
  // Defaults are those of transformers' LlamaConfig.__init__.
  return {
    vocab_size: positiveInt(o, 'vocab_size'),
    hidden_size: positiveInt(o, 'hidden_size'),
    intermediate_size: positiveInt(o, 'intermediate_size'),
    num_hidden_layers: positiveInt(o, 'num_hidden_layers'),
    num_attention_heads: heads,
    num_key_value_heads: pick('num_key_value_heads', heads, isPosInt),
    max_position_embeddings: pick('max_position_embeddings', 2048, isPosInt),
    rms_norm_eps: pick('rms_norm_eps', 1e-6, isPosNum),
    rope_theta: pick('rope_theta', 10000, isPosNum),
    tie_word_embeddings: pick('tie_word_embeddings', false, (v) => typeof v === 'boolean'),
  };
}

/** Keys parseHfConfig reads or knowingly passes over; any other key is reported as ignored. */
const CHECKED_KEYS = new Set<string>([
  ...CONFIG_FIELDS,
  'model_type',
  'architectures',
  'hidden_act',
  'attention_bias',
  'mlp_bias',
  'rope_scaling',
  'head_dim',
  // Written by us and by transformers; they describe the file, not the math.
  'torch_dtype',
  'initializer_range',
  'transformers_version',
]);

/**
 * Reads an HF Llama config.json (text or parsed object). Rejects shapes and features our graph does not
 * implement (biases, rope scaling, another activation, a head_dim that isn't hidden/heads) with a message
 * naming the key, because silently training a different model is worse than refusing.
 */
export function parseHfConfig(input: string | unknown): ParsedHfConfig {
  const o = configObject(input);
  checkSupported(o);
  const defaulted: string[] = [];
  const config = readShape(o, defaulted);
  const heads = config.num_attention_heads;
  if (o.head_dim !== undefined && o.head_dim !== null && o.head_dim !== config.hidden_size / heads)
    throw new CheckpointError(
      'unsupported',
      `config.json: head_dim ${String(o.head_dim)} differs from hidden_size / num_attention_heads (${config.hidden_size / heads})`,
    );
  const errors = validateLlamaConfig(config);
  if (errors.length > 0) throw new CheckpointError('unsupported', `config.json: ${errors.join('; ')}`);
  const ignoredKeys = Object.keys(o).filter((k) => !CHECKED_KEYS.has(k));
  return { config, ignoredKeys, defaulted };
}
