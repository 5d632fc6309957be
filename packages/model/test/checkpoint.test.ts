import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  PRESETS,
  decodeCheckpoint,
  encodeCheckpoint,
  initParameters,
  parameterSpecs,
  parseHfConfig,
  type LlamaConfig,
} from '../src/index.ts';

function errorCode(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CheckpointError);
    return (err as CheckpointError).code;
  }
  throw new Error('expected a CheckpointError');
}

/** Byte-wise identity (Buffer.equals: much faster than a deep equal over a million elements). */
const sameBits = (a: Float32Array, b: Float32Array) =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

describe('checkpoint encode/decode', () => {
  for (const preset of ['micro', 'tiny'] as const) {
    it(`${preset}: reads back bit-exactly with the same config`, () => {
      const config = PRESETS[preset];
      const params = initParameters(config, 7);
      const { safetensors, configJson } = encodeCheckpoint(config, params);
      const json = JSON.parse(configJson) as Record<string, unknown>;
      expect(json).toMatchObject({
        architectures: ['LlamaForCausalLM'],
        model_type: 'llama',
        hidden_act: 'silu',
      });
      expect(json.torch_dtype).toBe('float32');
      const back = decodeCheckpoint(configJson, safetensors);
      expect(back.config).toEqual(config);
      expect([...back.params.keys()]).toEqual(parameterSpecs(config).map((s) => s.name));
      for (const [name, data] of params) expect(sameBits(back.params.get(name)!, data), name).toBe(true);
      // Re-encoding what we read gives the identical file.
      expect(Buffer.from(encodeCheckpoint(back.config, back.params).safetensors).equals(safetensors)).toBe(
        true,
      );
      expect(back.params.has('lm_head.weight')).toBe(!config.tie_word_embeddings);
    });
  }

  it('refuses to encode parameters that do not fit the config', () => {
    const config = PRESETS.micro;
    const params = initParameters(config, 1);
    const extra = new Map(params).set('model.layers.9.mlp.up_proj.weight', new Float32Array(1));
    expect(errorCode(() => encodeCheckpoint(config, extra))).toBe('unknown-tensor');
    const short = new Map(params).set('model.norm.weight', new Float32Array(3));
    expect(errorCode(() => encodeCheckpoint(config, short))).toBe('shape-mismatch');
    const missing = new Map(params);
    missing.delete('model.embed_tokens.weight');
    expect(errorCode(() => encodeCheckpoint(config, missing))).toBe('missing-tensor');
  });
});

// A checkpoint as transformers' save_pretrained(safe_serialization=True) writes it for a bfloat16 model,
// assembled byte by byte here so the test does not depend on our encoder.
const hfConfig = {
  _name_or_path: 'synthetic/llama-mini',
  architectures: ['LlamaForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 1,
  eos_token_id: 2,
  hidden_act: 'silu',
  hidden_size: 8,
  initializer_range: 0.02,
  intermediate_size: 12,
  max_position_embeddings: 32,
  mlp_bias: false,
  model_type: 'llama',
  num_attention_heads: 2,
  num_hidden_layers: 1,
  num_key_value_heads: 1,
  pretraining_tp: 1,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 10000.0,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  transformers_version: '4.44.2',
  use_cache: true,
  vocab_size: 16,
};

const hfTensors: [string, number[]][] = [
  // Deliberately not sorted: HF orders by its own rules; we must not care.
  ['model.layers.0.self_attn.rotary_emb.inv_freq', [2]],
  ['model.embed_tokens.weight', [16, 8]],
  ['model.layers.0.input_layernorm.weight', [8]],
  ['model.layers.0.mlp.down_proj.weight', [8, 12]],
  ['model.layers.0.mlp.gate_proj.weight', [12, 8]],
  ['model.layers.0.mlp.up_proj.weight', [12, 8]],
  ['model.layers.0.post_attention_layernorm.weight', [8]],
  ['model.layers.0.self_attn.k_proj.weight', [4, 8]],
  ['model.layers.0.self_attn.o_proj.weight', [8, 8]],
  ['model.layers.0.self_attn.q_proj.weight', [8, 8]],
  ['model.layers.0.self_attn.v_proj.weight', [4, 8]],
  ['model.norm.weight', [8]],
];

/** bf16 bit pattern for tensor t, element i: sign and a 3-bit mantissa vary, so values are exact in f32. */
const bf16Bits = (t: number, i: number) => ((i + t) % 2 ? 0xbf80 : 0x3f80) + ((i * 3 + t) % 8) * 16;
/** The float that pattern encodes: ±(1 + k/8). */
const bf16Value = (t: number, i: number) => ((i + t) % 2 ? -1 : 1) * (1 + ((i * 3 + t) % 8) / 8);

function hfSafetensors(tensors: [string, number[]][], dtypeOf = (_name: string) => 'BF16'): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  const chunks: number[] = [];
  tensors.forEach(([name, shape], t) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const dtype = dtypeOf(name);
    const begin = chunks.length;
    for (let i = 0; i < n; i++) {
      if (dtype === 'BF16' || dtype === 'I16') {
        const b = bf16Bits(t, i);
        chunks.push(b & 0xff, b >> 8);
      } else {
        // F32: the same value as the BF16 pattern, i.e. the bf16 bits in the top half.
        const b = bf16Bits(t, i);
        chunks.push(0, 0, b & 0xff, b >> 8);
      }
    }
    header[name] = { dtype, shape, data_offsets: [begin, chunks.length] };
  });
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + chunks.length);
  out[0] = json.length & 0xff;
  out[1] = (json.length >> 8) & 0xff;
  out.set(json, 8);
  out.set(chunks, 8 + json.length);
  return out;
}

describe('Hugging Face checkpoint import', () => {
  it('imports a bf16, tied, sharded-free HF Llama checkpoint and notes what it ignored', () => {
    const { config, params, notes } = decodeCheckpoint(JSON.stringify(hfConfig), hfSafetensors(hfTensors));
    expect(config).toEqual<LlamaConfig>({
      vocab_size: 16,
      hidden_size: 8,
      intermediate_size: 12,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      max_position_embeddings: 32,
      rms_norm_eps: 1e-6,
      rope_theta: 10000,
      tie_word_embeddings: true,
    });
    expect(params.has('lm_head.weight')).toBe(false);
    expect(params.size).toBe(11);
    hfTensors.forEach(([name], t) => {
      if (name.endsWith('inv_freq')) return;
      const data = params.get(name)!;
      data.forEach((v, i) => expect(v).toBe(bf16Value(t, i)));
    });
    expect(notes.join('\n')).toMatch(/rotary_emb\.inv_freq: ignored/);
    expect(notes.join('\n')).toMatch(/ignored keys .*bos_token_id/);
    expect(notes.join('\n')).toMatch(/use_cache/);
    expect(notes.join('\n')).toMatch(/11 BF16 tensor\(s\) converted to F32/);
  });

  it('reads a checkpoint split over several files', () => {
    const a = hfSafetensors(hfTensors.slice(0, 6));
    // Indices t in the second file restart at 0, so compare against that file's own patterns.
    const b = hfSafetensors(hfTensors.slice(6), () => 'F32');
    const { params } = decodeCheckpoint(hfConfig, [a, b]);
    expect(params.get('model.norm.weight')![0]).toBe(bf16Value(hfTensors.length - 7, 0));
  });

  it('needs lm_head.weight when embeddings are untied, and uses it', () => {
    const untied = { ...hfConfig, tie_word_embeddings: false };
    expect(() => decodeCheckpoint(untied, hfSafetensors(hfTensors))).toThrow(/lm_head\.weight is required/);
    const withHead = hfSafetensors([...hfTensors, ['lm_head.weight', [16, 8]]]);
    expect(decodeCheckpoint(untied, withHead).params.has('lm_head.weight')).toBe(true);
    // A tied model may carry a copy of the head; it is dropped with a note.
    expect(decodeCheckpoint(hfConfig, withHead).notes.join()).toMatch(/lm_head\.weight: ignored/);
  });

  it('rejects checkpoints whose tensors do not match config.json', () => {
    const extraLayer = hfSafetensors([...hfTensors, ['model.layers.1.input_layernorm.weight', [8]]]);
    expect(errorCode(() => decodeCheckpoint(hfConfig, extraLayer))).toBe('unknown-tensor');
    const wrongShape = hfTensors.map(([n, s]): [string, number[]] => [
      n,
      n.endsWith('k_proj.weight') ? [8, 8] : s,
    ]);
    expect(errorCode(() => decodeCheckpoint(hfConfig, hfSafetensors(wrongShape)))).toBe('shape-mismatch');
    expect(errorCode(() => decodeCheckpoint(hfConfig, hfSafetensors(hfTensors.slice(0, 5))))).toBe(
      'missing-tensor',
    );
    const ints = hfSafetensors(hfTensors, (n) => (n === 'model.norm.weight' ? 'I16' : 'BF16'));
    expect(errorCode(() => decodeCheckpoint(hfConfig, ints))).toBe('dtype');
  });

  it('rejects model features the graph does not implement, naming the key', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ rope_scaling: { rope_type: 'llama3', factor: 32 } }, /rope_scaling/],
      [{ attention_bias: true }, /attention_bias/],
      [{ hidden_act: 'gelu' }, /hidden_act/],
      [{ model_type: 'mistral' }, /model_type/],
      [{ head_dim: 8 }, /head_dim/],
      [{ num_key_value_heads: 3 }, /num_key_value_heads/],
      [{ hidden_size: 9 }, /hidden_size/],
    ];
    for (const [patch, message] of cases) {
      expect(() => parseHfConfig({ ...hfConfig, ...patch })).toThrow(message);
      expect(errorCode(() => parseHfConfig({ ...hfConfig, ...patch }))).toBe('unsupported');
    }
    expect(errorCode(() => parseHfConfig({ ...hfConfig, vocab_size: undefined }))).toBe('config');
    expect(errorCode(() => parseHfConfig('{not json'))).toBe('config');
  });

  it('fills HF defaults for omitted optional fields and says so', () => {
    const { num_key_value_heads: _k, rope_theta: _r, ...rest } = hfConfig;
    const parsed = parseHfConfig(rest);
    expect(parsed.config.num_key_value_heads).toBe(2);
    expect(parsed.config.rope_theta).toBe(10000);
    expect(parsed.defaulted).toEqual(['num_key_value_heads=2', 'rope_theta=10000']);
  });
});
