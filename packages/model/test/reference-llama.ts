// An independent float64 forward pass of Hugging Face LlamaForCausalLM in plain loops (no graph, no ONNX),
// written from the HF modelling code's math: LlamaRMSNorm, LlamaRotaryEmbedding + apply_rotary_pos_emb
// (rotate_half), repeat_kv, eager attention with a causal mask, LlamaMLP, tied/untied lm_head, and the
// shifted cross-entropy of LlamaForCausalLM (mean over all predicted positions).
import type { LlamaConfig } from '../src/config.ts';

type Weights = (name: string) => Float64Array;

/** y[r, o] = Σ_i x[r, i] · W[o, i]  (PyTorch Linear, W is [out, in]) */
function linear(x: Float64Array, rows: number, inDim: number, w: Float64Array, outDim: number): Float64Array {
  const y = new Float64Array(rows * outDim);
  for (let r = 0; r < rows; r++)
    for (let o = 0; o < outDim; o++) {
      let acc = 0;
      for (let i = 0; i < inDim; i++) acc += (x[r * inDim + i] ?? 0) * (w[o * inDim + i] ?? 0);
      y[r * outDim + o] = acc;
    }
  return y;
}

function rmsNorm(x: Float64Array, rows: number, dim: number, w: Float64Array, eps: number): Float64Array {
  const y = new Float64Array(x.length);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += (x[r * dim + i] ?? 0) ** 2;
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) y[r * dim + i] = (x[r * dim + i] ?? 0) * inv * (w[i] ?? 0);
  }
  return y;
}

/** In place: HF rotary embedding on one head vector at position `pos`. */
function rope(v: Float64Array, off: number, headDim: number, pos: number, theta: number): void {
  const half = headDim / 2;
  for (let i = 0; i < half; i++) {
    const angle = pos / theta ** ((2 * i) / headDim);
    const c = Math.cos(angle);
    const s = Math.sin(angle);
    const a = v[off + i] ?? 0; // first half
    const b = v[off + i + half] ?? 0; // second half
    // x·cos + rotate_half(x)·sin with rotate_half(x) = (−x2, x1)
    v[off + i] = a * c - b * s;
    v[off + i + half] = b * c + a * s;
  }
}

export interface ReferenceOutput {
  loss: number;
  /** Logits [batch·seq, vocab] for the input positions. */
  logits: Float64Array;
}

/** tokens: rows of seq + 1 ids; predicts tokens[:, 1:] from tokens[:, :-1]. */
export function referenceLlama(c: LlamaConfig, W: Weights, tokens: number[][]): ReferenceOutput {
  const B = tokens.length;
  const T = (tokens[0]?.length ?? 1) - 1;
  const D = c.hidden_size;
  const H = c.num_attention_heads;
  const KV = c.num_key_value_heads;
  const hd = D / H;
  const N = B * T;
  const emb = W('model.embed_tokens.weight');

  let h = new Float64Array(N * D);
  for (let b = 0; b < B; b++)
    for (let t = 0; t < T; t++) {
      const id = tokens[b]?.[t] ?? 0;
      for (let i = 0; i < D; i++) h[(b * T + t) * D + i] = emb[id * D + i] ?? 0;
    }

  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}`;
    const x = rmsNorm(h, N, D, W(`${p}.input_layernorm.weight`), c.rms_norm_eps);
    const q = linear(x, N, D, W(`${p}.self_attn.q_proj.weight`), H * hd);
    const k = linear(x, N, D, W(`${p}.self_attn.k_proj.weight`), KV * hd);
    const v = linear(x, N, D, W(`${p}.self_attn.v_proj.weight`), KV * hd);
    for (let r = 0; r < N; r++) {
      const pos = r % T;
      for (let hh = 0; hh < H; hh++) rope(q, r * H * hd + hh * hd, hd, pos, c.rope_theta);
      for (let hh = 0; hh < KV; hh++) rope(k, r * KV * hd + hh * hd, hd, pos, c.rope_theta);
    }
    const ctx = new Float64Array(N * D);
    const scores = new Float64Array(T);
    for (let b = 0; b < B; b++)
      for (let hh = 0; hh < H; hh++) {
        const kvh = Math.floor(hh / (H / KV)); // repeat_kv
        for (let i = 0; i < T; i++) {
          let max = -Infinity;
          for (let j = 0; j <= i; j++) {
            let dot = 0;
            for (let d = 0; d < hd; d++)
              dot +=
                (q[(b * T + i) * H * hd + hh * hd + d] ?? 0) * (k[(b * T + j) * KV * hd + kvh * hd + d] ?? 0);
            scores[j] = dot / Math.sqrt(hd);
            max = Math.max(max, scores[j] ?? 0);
          }
          let z = 0;
          for (let j = 0; j <= i; j++) z += Math.exp((scores[j] ?? 0) - max);
          for (let j = 0; j <= i; j++) {
            const pr = Math.exp((scores[j] ?? 0) - max) / z;
            for (let d = 0; d < hd; d++)
              ctx[(b * T + i) * D + hh * hd + d] =
                (ctx[(b * T + i) * D + hh * hd + d] ?? 0) +
                pr * (v[(b * T + j) * KV * hd + kvh * hd + d] ?? 0);
          }
        }
      }
    const attnOut = linear(ctx, N, D, W(`${p}.self_attn.o_proj.weight`), D);
    const mid = h.map((val, i) => val + (attnOut[i] ?? 0));
    const y = rmsNorm(mid, N, D, W(`${p}.post_attention_layernorm.weight`), c.rms_norm_eps);
    const I = c.intermediate_size;
    const gate = linear(y, N, D, W(`${p}.mlp.gate_proj.weight`), I);
    const up = linear(y, N, D, W(`${p}.mlp.up_proj.weight`), I);
    const act = gate.map((g, i) => (g / (1 + Math.exp(-g))) * (up[i] ?? 0));
    const down = linear(act, N, I, W(`${p}.mlp.down_proj.weight`), D);
    h = mid.map((val, i) => val + (down[i] ?? 0));
  }

  const hn = rmsNorm(h, N, D, W('model.norm.weight'), c.rms_norm_eps);
  const V = c.vocab_size;
  const logits = linear(hn, N, D, c.tie_word_embeddings ? emb : W('lm_head.weight'), V);
  let total = 0;
  for (let r = 0; r < N; r++) {
    let max = -Infinity;
    for (let j = 0; j < V; j++) max = Math.max(max, logits[r * V + j] ?? 0);
    let z = 0;
    for (let j = 0; j < V; j++) z += Math.exp((logits[r * V + j] ?? 0) - max);
    const target = tokens[Math.floor(r / T)]?.[(r % T) + 1] ?? 0;
    total += max + Math.log(z) - (logits[r * V + target] ?? 0);
  }
  return { loss: total / N, logits };
}
