// The Llama decoder, as Hugging Face's LlamaForCausalLM computes it, written as graph-building code that reads
// top to bottom: embedding → N × (RMSNorm → attention with RoPE and grouped KV heads → residual → RMSNorm →
// SwiGLU MLP → residual) → final RMSNorm → LM head → next-token cross-entropy.
//
// Activations are [N, D] matrices with N = batch · seq, so every Linear is one 2-D Gemm that reads the weight
// in its PyTorch layout [out, in] transposed (x @ Wᵀ, no Transpose node). Parameters are graph inputs named
// exactly like HF tensors; q/k/v and gate/up are concatenated in the graph so each group is one Gemm. The
// graph is shaped for GPUs, where every kernel costs a dispatch: few, large kernels, no layout copies a Gemm
// flag or a view avoids. Ops are chosen so the WebGPU EP runs all of them, forward and backward
// (docs/architecture.md "Runtime notes"): no LogSoftmax, no OneHot, no int64 arithmetic; token ids are int32.
import type { LlamaConfig } from './config.ts';
import type { GraphBuilder } from './graph/builder.ts';
import type { FloatDType, Value } from './graph/ir.ts';
import { gemmGradients } from './autodiff/rules.ts';

export interface Shapes {
  batch: number;
  seq: number;
  dtype: FloatDType;
}

type Params = (name: string) => Value;

// ---- RMSNorm: x / sqrt(mean(x²) + eps) * w (HF LlamaRMSNorm; computed in the graph dtype) ---------------------

/**
 * float32: one SimplifiedLayerNormalization kernel (its gradient rule is in autodiff/rules.ts); float64, which
 * ORT has no kernel for, from primitives that autodiff differentiates op by op.
 */
function rmsNorm(b: GraphBuilder, x: Value, w: Value, eps: number): Value {
  if (x.dtype === 'float32') return b.simplifiedLayerNorm(x, w, eps, 'rms_norm');
  const meanSquare = b.reduceMean(b.mul(x, x), [-1], true, 'mean_square');
  const rms = b.sqrt(b.add(meanSquare, b.scalar(eps, x.dtype)), 'rms');
  return b.mul(b.div(x, rms, 'normalized'), w, 'scaled');
}

// ---- Rotary embeddings (HF convention: rotate_half over the two halves of each head) --------------------------

/** Angles t · θ_i for positions 0..seq-1 and i < headDim / 2, in float64. */
function rotaryAngles(c: LlamaConfig, seq: number): Float64Array {
  const headDim = c.hidden_size / c.num_attention_heads;
  const half = headDim / 2;
  const angles = new Float64Array(seq * half);
  for (let t = 0; t < seq; t++)
    for (let i = 0; i < half; i++) angles[t * half + i] = t / c.rope_theta ** ((2 * i) / headDim);
  return angles;
}

/** cos/sin tables [seq, headDim] for positions 0..seq-1, computed in float64 and rounded once to `dtype`. */
export function rotaryTables(c: LlamaConfig, seq: number): { cos: Float64Array; sin: Float64Array } {
  const headDim = c.hidden_size / c.num_attention_heads;
  const half = headDim / 2;
  const angles = rotaryAngles(c, seq);
  const cos = new Float64Array(seq * headDim);
  const sin = new Float64Array(seq * headDim);
  for (let t = 0; t < seq; t++)
    for (let i = 0; i < half; i++)
      // emb = cat(freqs, freqs): both halves of a head use the same frequencies.
      for (const j of [i, i + half]) {
        cos[t * headDim + j] = Math.cos(angles[t * half + i] ?? NaN);
        sin[t * headDim + j] = Math.sin(angles[t * half + i] ?? NaN);
      }
  return { cos, sin };
}

/** rotate_half as a matrix: x @ R = cat(−x₂, x₁) for x = cat(x₁, x₂) along a head. */
function rotateHalfMatrix(headDim: number): number[] {
  const half = headDim / 2;
  const r = new Array<number>(headDim * headDim).fill(0);
  for (let j = 0; j < half; j++) {
    r[(j + half) * headDim + j] = -1;
    r[j * headDim + j + half] = 1;
  }
  return r;
}

/**
 * RoPE of the fused heads x [B, H + 2·KV, T, headDim] (q, then k, then v heads): the query heads rotated and
 * scaled by 1/√headDim (the score scale), the key heads rotated, the value heads untouched.
 */
type Rotary = (x: Value) => Value;

/**
 * float32: one ORT RotaryEmbedding over every head, forward and backward (the inverse rotation). Heads go
 * into its batch axis so each gets its own position ids into one cache [2T + 1, headDim / 2]: rows 0..T−1
 * are the scaled query rotations, rows T..2T−1 the key rotations, row 2T the identity for value heads.
 * float64 (no such CPU kernel): x·cos + (x @ R)·sin with tables [H + 2·KV, T, headDim] built the same way.
 */
function rotary(b: GraphBuilder, c: LlamaConfig, s: Shapes): Rotary {
  const heads = c.num_attention_heads;
  const kvHeads = c.num_key_value_heads;
  const all = heads + 2 * kvHeads;
  const headDim = c.hidden_size / heads;
  const scale = headDim ** -0.5;
  const T = s.seq;
  /** Which cache row head h at position t reads. */
  const row = (h: number, t: number) => (h < heads ? t : h < heads + kvHeads ? T + t : 2 * T);
  if (s.dtype === 'float32') {
    const half = headDim / 2;
    const angles = rotaryAngles(c, T);
    const cosCache = new Float64Array((2 * T + 1) * half);
    const sinCache = new Float64Array((2 * T + 1) * half);
    for (let t = 0; t < T; t++)
      for (let i = 0; i < half; i++) {
        const a = angles[t * half + i] ?? NaN;
        cosCache[t * half + i] = scale * Math.cos(a);
        sinCache[t * half + i] = scale * Math.sin(a);
        cosCache[(T + t) * half + i] = Math.cos(a);
        sinCache[(T + t) * half + i] = Math.sin(a);
      }
    for (let i = 0; i < half; i++) cosCache[2 * T * half + i] = 1;
    const cos = b.constant(cosCache, s.dtype, [2 * T + 1, half], 'rope_cos_cache');
    const sin = b.constant(sinCache, s.dtype, [2 * T + 1, half], 'rope_sin_cache');
    const positions = b.constant(
      Array.from({ length: s.batch * all * T }, (_, i) => row(Math.floor(i / T) % all, i % T)),
      'int64',
      [s.batch * all, T],
      'positions',
    );
    return (x) =>
      b.reshape(
        b.rotaryEmbedding(b.reshape(x, [s.batch * all, 1, T, headDim]), positions, cos, sin, 'rope'),
        x.shape,
      );
  }
  const { cos, sin } = rotaryTables(c, T);
  const rotate = b.constant(rotateHalfMatrix(headDim), s.dtype, [headDim, headDim], 'rotate_half');
  const fusedCos = new Float64Array(all * T * headDim);
  const fusedSin = new Float64Array(all * T * headDim);
  for (let h = 0; h < all; h++)
    for (let t = 0; t < T; t++)
      for (let j = 0; j < headDim; j++) {
        const at = (h * T + t) * headDim + j;
        const r = row(h, t);
        const f = r < T ? scale : 1;
        fusedCos[at] = r === 2 * T ? 1 : f * (cos[t * headDim + j] ?? NaN);
        fusedSin[at] = r === 2 * T ? 0 : f * (sin[t * headDim + j] ?? NaN);
      }
  const cosT = b.constant(fusedCos, s.dtype, [all, T, headDim], 'rope_cos');
  const sinT = b.constant(fusedSin, s.dtype, [all, T, headDim], 'rope_sin');
  return (x) =>
    b.scope('rope', () => b.add(b.mul(x, cosT), b.mul(b.matmul(x, rotate, 'rotate_half'), sinT), 'rotated'));
}

// ---- Causal self-attention with grouped KV heads ------------------------------------------------------------

interface AttentionConsts {
  rope: Rotary;
  /** Additive causal mask [T, T]: 0 on and below the diagonal, a large negative number above. */
  mask: Value;
}

/** x @ Wᵀ (+ residual) with W in its PyTorch layout [out, in]: Gemm reads W transposed, no Transpose node. */
function linear(b: GraphBuilder, x: Value, w: Value, label: string, residual?: Value): Value {
  return b.gemm(x, w, residual ? { transB: true, c: residual } : { transB: true }, label);
}

/**
 * residual + attention(x). q, k and v in one Gemm against the three HF weights concatenated in the graph, one
 * Transpose to heads-major, RoPE on all heads in one op, one Split. Grouped KV heads need no
 * repeat: the rep query heads that share a KV head are consecutive, so queries viewed as [B, KV, rep·T,
 * headDim] meet their own K and V in one batched MatMul each. o_proj adds the residual in its Gemm.
 */
function attention(
  b: GraphBuilder,
  c: LlamaConfig,
  s: Shapes,
  x: Value,
  residual: Value,
  p: Params,
  prefix: string,
  k: AttentionConsts,
): Value {
  const heads = c.num_attention_heads;
  const kvHeads = c.num_key_value_heads;
  const headDim = c.hidden_size / heads;
  const rep = heads / kvHeads;
  const { batch: B, seq: T } = s;
  const w = b.concat(
    [p(`${prefix}.q_proj.weight`), p(`${prefix}.k_proj.weight`), p(`${prefix}.v_proj.weight`)],
    0,
    'qkv_weight',
  );
  const qkv = b.reshape(linear(b, x, w, 'qkv_proj'), [B, T, heads + 2 * kvHeads, headDim]);
  // RoPE on every head at once (see rotary), then a Split of a flattened [B, heads, T·headDim] view: ORT's
  // transpose optimiser would otherwise push the Transpose through a Split (and its gradient's inverse through
  // the Concat), one Transpose per piece instead of one.
  const rotated = k.rope(b.transpose(qkv, [0, 2, 1, 3], 'heads'));
  const byHead = b.reshape(rotated, [B, heads + 2 * kvHeads, T * headDim]);
  const [qr, kr, v] = b
    .split(byHead, 1, [heads, kvHeads, kvHeads], 'qkv')
    .map((x) => b.reshape(x, [B, x.shape[1] ?? 0, T, headDim])) as [Value, Value, Value];
  const scores = b.matmul(b.reshape(qr, [B, kvHeads, rep * T, headDim]), b.transposeLast2(kr), 'scores');
  const masked = b.add(b.reshape(scores, [B, kvHeads, rep, T, T]), k.mask, 'masked_scores');
  const probs = b.softmax(masked, -1, 'probs');
  const ctx = b.matmul(b.reshape(probs, [B, kvHeads, rep * T, T]), v, 'context'); // [B, KV, rep·T, headDim]
  const merged = b.reshape(
    b.transpose(b.reshape(ctx, [B, heads, T, headDim]), [0, 2, 1, 3]),
    [B * T, heads * headDim],
    'merge_heads',
  );
  return linear(b, merged, p(`${prefix}.o_proj.weight`), 'o_proj', residual);
}

// ---- SwiGLU MLP: residual + down(silu(gate(x)) * up(x)), gate and up in one Gemm -----------------------------

function mlp(b: GraphBuilder, c: LlamaConfig, x: Value, residual: Value, p: Params, prefix: string): Value {
  const w = b.concat([p(`${prefix}.gate_proj.weight`), p(`${prefix}.up_proj.weight`)], 0, 'gate_up_weight');
  const [gate, up] = b.split(
    linear(b, x, w, 'gate_up_proj'),
    1,
    [c.intermediate_size, c.intermediate_size],
    'gate_up',
  ) as [Value, Value];
  // float32: one QuickGelu (alpha 1) kernel; float64 (no such CPU kernel) from Sigmoid and Mul.
  const silu = gate.dtype === 'float32' ? b.silu(gate) : b.mul(gate, b.sigmoid(gate), 'silu');
  return linear(b, b.mul(silu, up, 'gated'), p(`${prefix}.down_proj.weight`), 'down_proj', residual);
}

// ---- The decoder ---------------------------------------------------------------------------------------------

/** Hidden states after the final norm, [B·T, D], for int32 token ids [B, T]. */
export function decoder(b: GraphBuilder, c: LlamaConfig, s: Shapes, p: Params, ids: Value): Value {
  const maskData = Float64Array.from({ length: s.seq * s.seq }, (_, i) =>
    i % s.seq > Math.floor(i / s.seq) ? -1e9 : 0,
  );
  // -1e9 rather than -inf: exp underflows to exactly 0 either way, and finite values keep every backend's
  // softmax free of inf − inf.
  const consts: AttentionConsts = {
    rope: rotary(b, c, s),
    mask: b.constant(maskData, s.dtype, [s.seq, s.seq], 'causal_mask'),
  };

  const embedded = b.scope('embed_tokens', () => b.gather(p('model.embed_tokens.weight'), ids, 'lookup'));
  let h = b.reshape(embedded, [s.batch * s.seq, c.hidden_size], 'hidden');
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const prefix = `model.layers.${i}`;
    const input = h;
    h = b.scope(`layers.${i}`, () => {
      const attnIn = b.scope('input_layernorm', () =>
        rmsNorm(b, input, p(`${prefix}.input_layernorm.weight`), c.rms_norm_eps),
      );
      const mid = b.scope('self_attn', () =>
        attention(b, c, s, attnIn, input, p, `${prefix}.self_attn`, consts),
      );
      const mlpIn = b.scope('post_attention_layernorm', () =>
        rmsNorm(b, mid, p(`${prefix}.post_attention_layernorm.weight`), c.rms_norm_eps),
      );
      return b.scope('mlp', () => mlp(b, c, mlpIn, mid, p, `${prefix}.mlp`));
    });
  }
  return b.scope('norm', () => rmsNorm(b, h, p('model.norm.weight'), c.rms_norm_eps));
}

function headWeight(c: LlamaConfig, p: Params): Value {
  return c.tie_word_embeddings ? p('model.embed_tokens.weight') : p('lm_head.weight');
}

/** Logits [rows, vocab]; the head shares the embedding matrix when `tie_word_embeddings`. */
export function lmHead(b: GraphBuilder, c: LlamaConfig, p: Params, h: Value): Value {
  return b.scope('lm_head', () => linear(b, h, headWeight(c, p), 'logits'));
}

/**
 * Mean next-token cross-entropy of the LM head's logits [N, V] = h · Wᵀ against int32 targets [N]:
 * −mean log softmax(logits)[target]. Softmax subtracts the row max, so nothing overflows, and GatherElements
 * picks each target's probability. Head and loss are one `withGradient` group so that the only [N, V] values
 * are the logits, their softmax and dLogits = softmax − onehot(target), built as the softmax with
 * p[target] − 1 scattered at the targets (no one-hot exists); the 1/N of the mean rides in the head's gradient
 * Gemms' alpha instead of a scaled copy of dLogits. The log of the picked probability is exact to the dtype,
 * except that a target more than ~87 nats below its row's best logit underflows float32 to an infinite loss.
 */
export function lmHeadLoss(b: GraphBuilder, c: LlamaConfig, p: Params, h: Value, targets: Value): Value {
  const w = headWeight(c, p);
  const n = h.shape[0] ?? 0;
  const ids = b.scope('loss', () => b.reshape(targets, [n, 1], 'target_ids'));
  let logits: Value | null = null;
  let probs: Value | null = null;
  let targetProb: Value | null = null;
  return b.withGradient(
    [h, w],
    () => {
      logits = lmHead(b, c, p, h);
      const l = logits;
      return b.scope('loss', () => {
        probs = b.softmax(l, -1, 'probs');
        targetProb = b.gatherElements(probs, ids, 1, 'target_prob');
        const meanLog = b.reduceMean(b.log(targetProb, 'log_prob'), [0, 1], false, 'mean_log_prob');
        return b.neg(meanLog, 'loss');
      });
    },
    (dy, needs) => {
      const head = logits?.producer;
      if (!head || !probs || !targetProb) throw new Error('lmHeadLoss: gradient before its forward');
      const update = b.sub(targetProb, b.scalar(1, targetProb.dtype), 'target_update');
      const dLogits = b.scatterElements(probs, ids, update, 1, 'dlogits');
      // dL/dLogits = dLogits · dy / N: a constant dy (the loss is the graph's output) folds into alpha.
      const dyValue = dy.data?.[0];
      if (dyValue !== undefined) return gemmGradients(b, head, dLogits, needs, dyValue / n);
      const scaled = b.mul(dLogits, b.mul(dy, b.scalar(1 / n, dy.dtype)), 'dlogits_scaled');
      return gemmGradients(b, head, scaled, needs);
    },
  );
}
