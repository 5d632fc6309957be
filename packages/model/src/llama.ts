// The Llama decoder, as Hugging Face's LlamaForCausalLM computes it, written as graph-building code that reads
// top to bottom: embedding → N × (RMSNorm → attention with RoPE and grouped KV heads → residual → RMSNorm →
// SwiGLU MLP → residual) → final RMSNorm → LM head → next-token cross-entropy.
//
// Activations are [N, D] matrices with N = batch · seq, so every Linear is one 2-D MatMul against the weight
// in its PyTorch layout [out, in] (x @ Wᵀ). Parameters are graph inputs named exactly like HF tensors. Ops
// are chosen so the WebGPU EP runs all of them, forward and backward (docs/architecture.md "Runtime notes"):
// no LogSoftmax, no OneHot, no int64 arithmetic; token ids are int32.
import type { LlamaConfig } from './config.ts';
import type { GraphBuilder } from './graph/builder.ts';
import type { FloatDType, Value } from './graph/ir.ts';

export interface Shapes {
  batch: number;
  seq: number;
  dtype: FloatDType;
}

type Params = (name: string) => Value;

// ---- RMSNorm: x / sqrt(mean(x²) + eps) * w (HF LlamaRMSNorm; computed in the graph dtype) ---------------------

function rmsNorm(b: GraphBuilder, x: Value, w: Value, eps: number): Value {
  const meanSquare = b.reduceMean(b.mul(x, x), [-1], true, 'mean_square');
  const rms = b.sqrt(b.add(meanSquare, b.scalar(eps, x.dtype)), 'rms');
  return b.mul(b.div(x, rms, 'normalized'), w, 'scaled');
}

// ---- Rotary embeddings (HF convention: rotate_half over the two halves of each head) --------------------------

/** cos/sin tables [seq, headDim] for positions 0..seq-1, computed in float64 and rounded once to `dtype`. */
export function rotaryTables(c: LlamaConfig, seq: number): { cos: Float64Array; sin: Float64Array } {
  const headDim = c.hidden_size / c.num_attention_heads;
  const half = headDim / 2;
  const cos = new Float64Array(seq * headDim);
  const sin = new Float64Array(seq * headDim);
  for (let t = 0; t < seq; t++) {
    for (let i = 0; i < half; i++) {
      const invFreq = 1 / c.rope_theta ** ((2 * i) / headDim);
      const angle = t * invFreq;
      // emb = cat(freqs, freqs): both halves of a head use the same frequencies.
      for (const j of [i, i + half]) {
        cos[t * headDim + j] = Math.cos(angle);
        sin[t * headDim + j] = Math.sin(angle);
      }
    }
  }
  return { cos, sin };
}

function rotateHalf(b: GraphBuilder, x: Value): Value {
  const d = x.shape[x.shape.length - 1] ?? 0;
  const x1 = b.slice(x, -1, 0, d / 2, 'x1');
  const x2 = b.slice(x, -1, d / 2, d, 'x2');
  return b.concat([b.neg(x2), x1], -1, 'rotate_half');
}

/** x: [B, heads, T, headDim]; cos/sin: [T, headDim] broadcast over batch and heads. */
function applyRotary(b: GraphBuilder, x: Value, cos: Value, sin: Value): Value {
  return b.add(b.mul(x, cos), b.mul(rotateHalf(b, x), sin), 'rotated');
}

// ---- Causal self-attention with grouped KV heads ------------------------------------------------------------

interface AttentionConsts {
  cos: Value;
  sin: Value;
  /** Additive causal mask [T, T]: 0 on and below the diagonal, a large negative number above. */
  mask: Value;
}

function linear(b: GraphBuilder, x: Value, w: Value, label: string): Value {
  return b.matmul(x, b.transpose(w, [1, 0], `${label}_t`), label);
}

/** [N, heads·headDim] → [B, heads, T, headDim] */
function splitHeads(
  b: GraphBuilder,
  x: Value,
  s: Shapes,
  heads: number,
  headDim: number,
  label: string,
): Value {
  return b.transpose(b.reshape(x, [s.batch, s.seq, heads, headDim]), [0, 2, 1, 3], label);
}

/** HF repeat_kv: each KV head serves numHeads / numKvHeads consecutive query heads. */
function repeatKv(b: GraphBuilder, x: Value, rep: number, label: string): Value {
  if (rep === 1) return x;
  const [batch, kvHeads, seq, headDim] = x.shape as [number, number, number, number];
  const expanded = b.expand(b.reshape(x, [batch, kvHeads, 1, seq, headDim]), [
    batch,
    kvHeads,
    rep,
    seq,
    headDim,
  ]);
  return b.reshape(expanded, [batch, kvHeads * rep, seq, headDim], label);
}

function attention(
  b: GraphBuilder,
  c: LlamaConfig,
  s: Shapes,
  x: Value,
  p: Params,
  prefix: string,
  k: AttentionConsts,
): Value {
  const heads = c.num_attention_heads;
  const kvHeads = c.num_key_value_heads;
  const headDim = c.hidden_size / heads;
  const q = splitHeads(b, linear(b, x, p(`${prefix}.q_proj.weight`), 'q_proj'), s, heads, headDim, 'q');
  const key = splitHeads(b, linear(b, x, p(`${prefix}.k_proj.weight`), 'k_proj'), s, kvHeads, headDim, 'k');
  const v = splitHeads(b, linear(b, x, p(`${prefix}.v_proj.weight`), 'v_proj'), s, kvHeads, headDim, 'v');
  const qr = b.scope('rope_q', () => applyRotary(b, q, k.cos, k.sin));
  const kr = b.scope('rope_k', () => applyRotary(b, key, k.cos, k.sin));
  const kAll = repeatKv(b, kr, heads / kvHeads, 'k_repeated');
  const vAll = repeatKv(b, v, heads / kvHeads, 'v_repeated');
  const scores = b.mul(
    b.matmul(qr, b.transposeLast2(kAll), 'qk'),
    b.scalar(headDim ** -0.5, s.dtype),
    'scores',
  );
  const probs = b.softmax(b.add(scores, k.mask, 'masked_scores'), -1, 'probs');
  const ctx = b.matmul(probs, vAll, 'context'); // [B, H, T, headDim]
  const merged = b.reshape(b.transpose(ctx, [0, 2, 1, 3]), [s.batch * s.seq, heads * headDim], 'merge_heads');
  return linear(b, merged, p(`${prefix}.o_proj.weight`), 'o_proj');
}

// ---- SwiGLU MLP: down(silu(gate(x)) * up(x)) -----------------------------------------------------------------

function mlp(b: GraphBuilder, x: Value, p: Params, prefix: string): Value {
  const gate = linear(b, x, p(`${prefix}.gate_proj.weight`), 'gate_proj');
  const up = linear(b, x, p(`${prefix}.up_proj.weight`), 'up_proj');
  const silu = b.mul(gate, b.sigmoid(gate), 'silu');
  return linear(b, b.mul(silu, up, 'gated'), p(`${prefix}.down_proj.weight`), 'down_proj');
}

// ---- The decoder ---------------------------------------------------------------------------------------------

/** Hidden states after the final norm, [B·T, D], for int32 token ids [B, T]. */
export function decoder(b: GraphBuilder, c: LlamaConfig, s: Shapes, p: Params, ids: Value): Value {
  const { cos, sin } = rotaryTables(c, s.seq);
  const headDim = c.hidden_size / c.num_attention_heads;
  const maskData = Float64Array.from({ length: s.seq * s.seq }, (_, i) =>
    i % s.seq > Math.floor(i / s.seq) ? -1e9 : 0,
  );
  // -1e9 rather than -inf: exp underflows to exactly 0 either way, and finite values keep every backend's
  // softmax free of inf − inf.
  const consts: AttentionConsts = {
    cos: b.constant(cos, s.dtype, [s.seq, headDim], 'rope_cos'),
    sin: b.constant(sin, s.dtype, [s.seq, headDim], 'rope_sin'),
    mask: b.constant(maskData, s.dtype, [s.seq, s.seq], 'causal_mask'),
  };

  const embedded = b.scope('embed_tokens', () => b.gather(p('model.embed_tokens.weight'), ids, 'lookup'));
  let h = b.reshape(embedded, [s.batch * s.seq, c.hidden_size], 'hidden');
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const prefix = `model.layers.${i}`;
    h = b.scope(`layers.${i}`, () => {
      const attnIn = b.scope('input_layernorm', () =>
        rmsNorm(b, h, p(`${prefix}.input_layernorm.weight`), c.rms_norm_eps),
      );
      const attnOut = b.scope('self_attn', () =>
        attention(b, c, s, attnIn, p, `${prefix}.self_attn`, consts),
      );
      const mid = b.add(h, attnOut, 'residual_attn');
      const mlpIn = b.scope('post_attention_layernorm', () =>
        rmsNorm(b, mid, p(`${prefix}.post_attention_layernorm.weight`), c.rms_norm_eps),
      );
      const mlpOut = b.scope('mlp', () => mlp(b, mlpIn, p, `${prefix}.mlp`));
      return b.add(mid, mlpOut, 'residual_mlp');
    });
  }
  return b.scope('norm', () => rmsNorm(b, h, p('model.norm.weight'), c.rms_norm_eps));
}

/** Logits [rows, vocab]; the head shares the embedding matrix when `tie_word_embeddings`. */
export function lmHead(b: GraphBuilder, c: LlamaConfig, p: Params, h: Value): Value {
  const w = c.tie_word_embeddings ? p('model.embed_tokens.weight') : p('lm_head.weight');
  return b.scope('lm_head', () => linear(b, h, w, 'logits'));
}

/**
 * Mean cross-entropy of logits [N, V] against int32 targets [N]: logsumexp − logit[target], with
 * logsumexp = m + log Σ exp(x − m) and m = max(x) held constant (its gradient cancels exactly). The target
 * logit is picked by a one-hot mask built from Equal against an arange (GatherElements would work too, but
 * Mul + ReduceSum needs no extra gradient rule).
 */
export function crossEntropy(b: GraphBuilder, logits: Value, targets: Value): Value {
  const [n, vocab] = logits.shape as [number, number];
  const m = b.reduceMaxNoGrad(logits, [-1], true, 'max');
  const sumExp = b.reduceSum(b.exp(b.sub(logits, m), 'exp'), [-1], true, 'sum_exp');
  const lse = b.add(m, b.log(sumExp), 'logsumexp');
  const vocabIds = b.constant(
    Array.from({ length: vocab }, (_, i) => i),
    'int32',
    [1, vocab],
    'vocab_ids',
  );
  const onehot = b.cast(b.equal(b.reshape(targets, [n, 1]), vocabIds, 'is_target'), logits.dtype, 'onehot');
  const picked = b.reduceSum(b.mul(logits, onehot), [-1], true, 'target_logit');
  return b.reduceMean(b.sub(lse, picked, 'nll'), [0, 1], false, 'loss');
}
