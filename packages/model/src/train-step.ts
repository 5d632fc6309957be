// Public builder of the train-step graph (params…, tokens) → (loss, grad.<param>…): ONNX bytes plus the I/O
// contract. inference.ts builds the generation graph from the same decoder.
import { type LlamaConfig, parameterSpecs, validateLlamaConfig } from './config.ts';
import { gradients } from './autodiff/autodiff.ts';
import { GraphBuilder, GraphError } from './graph/builder.ts';
import { matmulFlops } from './graph/flops.ts';
import type { DType, FloatDType, Value } from './graph/ir.ts';
import { decoder, lmHeadLoss, type Shapes } from './llama.ts';
import { emitOnnx, liveNodes } from './onnx/emit.ts';

export interface TensorSpec {
  name: string;
  shape: number[];
  dtype: DType;
}

export interface GraphOptions {
  batchSize: number;
  /** Tokens per sequence that the model sees; train-step inputs carry seqLen + 1 ids per row. */
  seqLen: number;
  dtype: FloatDType;
}

export interface BuiltGraph {
  onnx: Uint8Array;
  /** Parameters (HF names, in `parameterSpecs` order) followed by `tokens`. */
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  /** Node count per op type, for placement audits and docs. */
  ops: Record<string, number>;
  /** Floating-point operations of its MatMul and Gemm nodes (graph/flops.ts), for achieved-throughput figures. */
  matmulFlops: number;
}

function spec(v: Value): TensorSpec {
  return { name: v.name, shape: [...v.shape], dtype: v.dtype };
}

export function check(config: LlamaConfig, o: GraphOptions): void {
  const errors = validateLlamaConfig(config);
  if (!Number.isInteger(o.batchSize) || o.batchSize < 1)
    errors.push(`batchSize: must be a positive integer (${o.batchSize})`);
  if (!Number.isInteger(o.seqLen) || o.seqLen < 1)
    errors.push(`seqLen: must be a positive integer (${o.seqLen})`);
  if (o.seqLen > config.max_position_embeddings)
    errors.push(`seqLen: ${o.seqLen} exceeds max_position_embeddings (${config.max_position_embeddings})`);
  if (o.dtype !== 'float32' && o.dtype !== 'float64')
    errors.push(`dtype: float32 or float64 (${String(o.dtype)})`);
  if (errors.length) throw new GraphError(`invalid model/graph options:\n  ${errors.join('\n  ')}`);
}

export function declareParams(
  b: GraphBuilder,
  config: LlamaConfig,
  dtype: FloatDType,
): { list: Value[]; get: (n: string) => Value } {
  const list = parameterSpecs(config).map((p) => b.input(p.name, dtype, p.shape));
  const byName = new Map(list.map((v) => [v.name, v]));
  const get = (name: string) => {
    const v = byName.get(name);
    if (!v) throw new GraphError(`model has no parameter '${name}'`);
    return v;
  };
  return { list, get };
}

export function finish(b: GraphBuilder, name: string, doc: string): BuiltGraph {
  const ops: Record<string, number> = {};
  const nodes = liveNodes(b);
  for (const n of nodes) ops[n.op] = (ops[n.op] ?? 0) + 1;
  return {
    onnx: emitOnnx(b, { name, doc }),
    inputs: b.inputs.map(spec),
    outputs: b.outputs.map(spec),
    ops,
    matmulFlops: matmulFlops(nodes),
  };
}

/**
 * The train-step graph as a builder, before emission (tests inspect its nodes). With `withGradients: false`
 * only `loss` is computed: the forward pass that finite-difference checks evaluate.
 */
export function trainStepGraph(
  config: LlamaConfig,
  o: GraphOptions & { withGradients?: boolean },
): GraphBuilder {
  check(config, o);
  const b = new GraphBuilder();
  const params = declareParams(b, config, o.dtype);
  const tokens = b.input('tokens', 'int32', [o.batchSize, o.seqLen + 1]);
  const s: Shapes = { batch: o.batchSize, seq: o.seqLen, dtype: o.dtype };
  // tokens[:, :-1] and tokens[:, 1:] as Gathers with constant int32 positions: the WebGPU EP (ORT 1.30) has no
  // int32 Slice kernel and would run a Slice of the ids on the CPU, while int32 Gather stays on the GPU.
  const flat = b.reshape(tokens, [o.batchSize * (o.seqLen + 1)], 'tokens_flat');
  const positions = (shift: number, shape: number[], label: string) =>
    b.constant(
      Array.from(
        { length: o.batchSize * o.seqLen },
        (_, i) => Math.floor(i / o.seqLen) * (o.seqLen + 1) + (i % o.seqLen) + shift,
      ),
      'int32',
      shape,
      label,
    );
  const inputs = b.gather(flat, positions(0, [o.batchSize, o.seqLen], 'input_positions'), 'input_ids');
  const targets = b.gather(flat, positions(1, [o.batchSize * o.seqLen], 'target_positions'), 'target_ids');
  const hidden = decoder(b, config, s, params.get, inputs);
  const loss = lmHeadLoss(b, config, params.get, hidden, targets);
  const grads = o.withGradients === false ? [] : gradients(b, loss, params.list);
  b.output(loss, 'loss');
  grads.forEach((g, i) => b.output(g, `grad.${params.list[i]?.name ?? ''}`));
  return b;
}

/**
 * `(params…, tokens int32 [batchSize, seqLen + 1]) → (loss, grad.<param>…)`: the mean next-token
 * cross-entropy of tokens[:, 1:] given tokens[:, :-1] and its gradient with respect to every parameter.
 */
export function buildTrainStep(
  config: LlamaConfig,
  o: GraphOptions & { withGradients?: boolean },
): BuiltGraph {
  return finish(
    trainStepGraph(config, o),
    'meshtrain_llama_train_step',
    `Llama train step B=${o.batchSize} T=${o.seqLen} ${o.dtype}`,
  );
}
