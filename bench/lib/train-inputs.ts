// The inputs a train-step benchmark feeds: a preset's seed-0 initialisation and a fixed, deterministic batch
// of token ids, so every backend (and PyTorch, through bench/lib/torch-ref.ts) trains the same numbers.
import * as ort from 'onnxruntime-node';
import { initParameters, parameterSpecs, type LlamaConfig, type Parameters } from '@meshtrain/model';
import { floatTensor } from '../../apps/node-trainer/src/ort/session.ts';

/** Init seed of every benchmark's parameters. */
export const BENCH_SEED = 0;

/** `batch` rows of `seq + 1` token ids spread over the vocabulary (a stride prime to any vocab size here). */
export function syntheticTokens(batch: number, seq: number, vocab: number): Int32Array {
  return Int32Array.from({ length: batch * (seq + 1) }, (_, i) => (i * 7919) % vocab);
}

export interface TrainInputs {
  params: Parameters;
  tokens: Int32Array;
}

export function trainInputs(config: LlamaConfig, batch: number, seq: number): TrainInputs {
  return {
    params: initParameters(config, BENCH_SEED),
    tokens: syntheticTokens(batch, seq, config.vocab_size),
  };
}

/** The train-step graph's feeds (float32 parameters by HF name, int32 `tokens` [batch, seq + 1]). */
export function trainFeeds(
  config: LlamaConfig,
  inputs: TrainInputs,
  batch: number,
  seq: number,
): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const p of parameterSpecs(config))
    feeds[p.name] = floatTensor('float32', inputs.params.get(p.name) ?? [], p.shape);
  feeds.tokens = new ort.Tensor('int32', inputs.tokens, [batch, seq + 1]);
  return feeds;
}

/**
 * The same inputs with every matrix 25× larger. At the N(0, 0.02) init attention is nearly uniform and the
 * loss near ln(vocab) whatever RoPE, the mask or the KV grouping do; at this scale each of them moves the
 * loss, so two frameworks agreeing on it agree on the model's math.
 */
export function sensitiveInputs(config: LlamaConfig, batch: number, seq: number): TrainInputs {
  const inputs = trainInputs(config, batch, seq);
  for (const spec of parameterSpecs(config)) {
    if (spec.shape.length < 2) continue;
    const p = inputs.params.get(spec.name) as Float32Array;
    for (let i = 0; i < p.length; i++) p[i] = (p[i] as number) * 25;
  }
  return inputs;
}
