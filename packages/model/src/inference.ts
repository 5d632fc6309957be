// The inference graph (params…, tokens) → logits of the last position, from the same decoder as the train step.
import type { LlamaConfig } from './config.ts';
import { GraphBuilder } from './graph/builder.ts';
import { decoder, lmHead, type Shapes } from './llama.ts';
import { type BuiltGraph, type GraphOptions, check, declareParams, finish } from './train-step.ts';

/** `(params…, tokens int32 [batchSize, seqLen]) → logits [batchSize, vocab]` of the last position (no KV cache). */
export function buildInference(config: LlamaConfig, o: GraphOptions): BuiltGraph {
  check(config, o);
  const b = new GraphBuilder();
  const params = declareParams(b, config, o.dtype);
  const tokens = b.input('tokens', 'int32', [o.batchSize, o.seqLen]);
  const s: Shapes = { batch: o.batchSize, seq: o.seqLen, dtype: o.dtype };
  const hidden = decoder(b, config, s, params.get, tokens);
  // Only the last position feeds the head: it is the only one generation needs.
  const perSeq = b.reshape(hidden, [o.batchSize, o.seqLen, config.hidden_size]);
  const last = b.reshape(
    b.slice(perSeq, 1, o.seqLen - 1, o.seqLen),
    [o.batchSize, config.hidden_size],
    'last_hidden',
  );
  b.output(lmHead(b, config, params.get, last), 'logits');
  return finish(b, 'meshtrain_llama_inference', `Llama inference B=${o.batchSize} T=${o.seqLen} ${o.dtype}`);
}
