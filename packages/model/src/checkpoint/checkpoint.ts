// A model checkpoint = HF config.json + safetensors with HF Llama tensor names. This module is the pure
// part (bytes in, bytes out); node-trainer's fsio layer and the browser's Dexie store do the I/O.
import { parameterSpecs, type LlamaConfig } from '../config.ts';
import { CheckpointError } from './errors.ts';
import { hfConfigJson, parseHfConfig } from './hf-config.ts';
import { decodeSafetensors, encodeSafetensors, tensorToFloat32, type TensorToEncode } from './safetensors.ts';

/** Model parameters by HF tensor name, each in PyTorch layout (row-major, Linear weights [out, in]). */
export type Parameters = Map<string, Float32Array>;

export interface EncodedCheckpoint {
  /** Contents of `model.safetensors`. */
  safetensors: Uint8Array;
  /** Contents of `config.json`. */
  configJson: string;
}

/** Checks that `params` holds exactly the tensors `config` needs, each of the right size. */
export function checkParameters(config: LlamaConfig, params: Parameters): void {
  const specs = parameterSpecs(config);
  const expected = new Set(specs.map((s) => s.name));
  for (const name of params.keys())
    if (!expected.has(name))
      throw new CheckpointError('unknown-tensor', `${name}: not a parameter of this model config`);
  for (const s of specs) {
    const data = params.get(s.name);
    if (!data) throw new CheckpointError('missing-tensor', `${s.name}: missing`);
    const n = s.shape.reduce((a, b) => a * b, 1);
    if (data.length !== n)
      throw new CheckpointError(
        'shape-mismatch',
        `${s.name}: expected [${s.shape.join(', ')}] (${n} values), got ${data.length} values`,
      );
  }
}

export function encodeCheckpoint(
  config: LlamaConfig,
  params: Parameters,
  options: { dtype?: 'F32' | 'BF16'; metadata?: Record<string, string> } = {},
): EncodedCheckpoint {
  checkParameters(config, params);
  const dtype = options.dtype ?? 'F32';
  const tensors = new Map<string, TensorToEncode>();
  for (const s of parameterSpecs(config))
    tensors.set(s.name, { shape: s.shape, data: params.get(s.name) as Float32Array, dtype });
  // transformers refuses safetensors files whose metadata lacks format=pt.
  const safetensors = encodeSafetensors(tensors, { format: 'pt', ...options.metadata });
  return { safetensors, configJson: hfConfigJson(config, dtype === 'BF16' ? 'bfloat16' : 'float32') };
}

export interface DecodedCheckpoint {
  config: LlamaConfig;
  params: Parameters;
  /** Human-readable notes: ignored config keys and tensors, defaults filled in, dtype conversions. */
  notes: string[];
}

/** Buffers HF keeps in some checkpoints but recomputes from the config: safe to drop. */
const DERIVED_BUFFER = /(^|\.)rotary_emb\.inv_freq$/;

/**
 * Reads a checkpoint from config.json and one or more safetensors files (HF shards large models as
 * `model-0000k-of-0000n.safetensors`; pass every shard). Converts BF16/F16/F64 tensors to float32, drops
 * derived buffers, accepts a tied model without `lm_head.weight`, and rejects anything else that does not
 * match the config with a CheckpointError naming the tensor.
 */
export function decodeCheckpoint(
  configJson: string | unknown,
  files: Uint8Array | Uint8Array[],
): DecodedCheckpoint {
  const { config, ignoredKeys, defaulted } = parseHfConfig(configJson);
  const notes: string[] = [];
  if (ignoredKeys.length > 0) notes.push(`config.json: ignored keys ${ignoredKeys.join(', ')}`);
  if (defaulted.length > 0) notes.push(`config.json: defaults used for ${defaulted.join(', ')}`);

  const specs = new Map(parameterSpecs(config).map((s) => [s.name, s.shape]));
  const params: Parameters = new Map();
  const converted = new Map<string, number>();
  for (const file of Array.isArray(files) ? files : [files]) {
    for (const [name, raw] of decodeSafetensors(file).tensors) {
      if (DERIVED_BUFFER.test(name)) {
        notes.push(`${name}: ignored (recomputed from rope_theta)`);
        continue;
      }
      if (name === 'lm_head.weight' && config.tie_word_embeddings) {
        notes.push('lm_head.weight: ignored (tie_word_embeddings=true uses model.embed_tokens.weight)');
        continue;
      }
      const shape = specs.get(name);
      if (!shape)
        throw new CheckpointError(
          'unknown-tensor',
          `${name}: not a tensor of LlamaForCausalLM with this config.json (${config.num_hidden_layers} layers)`,
        );
      if (params.has(name))
        throw new CheckpointError('unknown-tensor', `${name}: appears in more than one file`);
      if (raw.shape.length !== shape.length || raw.shape.some((d, i) => d !== shape[i]))
        throw new CheckpointError(
          'shape-mismatch',
          `${name}: file has [${raw.shape.join(', ')}], config.json implies [${shape.join(', ')}]`,
        );
      try {
        params.set(name, tensorToFloat32(name, raw));
      } catch (err) {
        throw new CheckpointError('dtype', (err as Error).message);
      }
      if (raw.dtype !== 'F32') converted.set(raw.dtype, (converted.get(raw.dtype) ?? 0) + 1);
    }
  }
  for (const [dtype, n] of converted) notes.push(`${n} ${dtype} tensor(s) converted to F32`);
  const missing = [...specs.keys()].filter((n) => !params.has(n));
  if (missing.length > 0) {
    const hint =
      missing.includes('lm_head.weight') && !config.tie_word_embeddings
        ? ' (lm_head.weight is required because config.json has tie_word_embeddings=false)'
        : '';
    throw new CheckpointError('missing-tensor', `missing tensors: ${missing.join(', ')}${hint}`);
  }
  // Return in the canonical (sorted) parameter order regardless of file order.
  const ordered: Parameters = new Map([...specs.keys()].map((n) => [n, params.get(n) as Float32Array]));
  return { config, params: ordered, notes };
}
