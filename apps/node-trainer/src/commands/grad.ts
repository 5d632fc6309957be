// node-trainer grad: one train-step evaluation — loss and the gradient of every parameter — for a checkpoint
// and a batch of token rows, on onnxruntime-node's CPU or WebGPU EP. The tool to check a backend's
// gradients against another (e.g. float32 WebGPU vs float64 CPU, or against PyTorch on the same weights).
import { readFile } from 'node:fs/promises';
import {
  CheckpointError,
  type LlamaConfig,
  type Parameters,
  buildTrainStep,
  encodeSafetensors,
  parameterSpecs,
} from '@meshtrain/model';
import * as ort from 'onnxruntime-node';
import { CliError, type Command } from '../command.ts';
import { writeFileAtomic } from '@meshtrain/model/node';
import { readCheckpoint } from '../fsio/checkpoint.ts';
import { parseFlags } from '../options/index.ts';
import { type GraphDType, SessionError, createSession, floatTensor } from '../ort/session.ts';

/** Validates BATCH.json: {"tokens": [[…T+1 ids…], …]}, equal-length rows of ids in [0, vocab). */
export function parseBatch(text: string, config: LlamaConfig): number[][] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CliError(`--batch: not JSON (${(err as Error).message})`);
  }
  const tokens = (json as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(tokens) || tokens.length === 0 || !tokens.every(Array.isArray))
    throw new CliError('--batch: expected {"tokens": [[id, …], …]} with at least one row');
  const rows = tokens as unknown[][];
  const len = rows[0]?.length ?? 0;
  if (len < 2) throw new CliError('--batch: rows need at least 2 ids (inputs are row[:-1], targets row[1:])');
  if (len - 1 > config.max_position_embeddings)
    throw new CliError(
      `--batch: rows of ${len} ids exceed max_position_embeddings + 1 (${config.max_position_embeddings + 1})`,
    );
  rows.forEach((row, r) => {
    if (row.length !== len) throw new CliError(`--batch: row ${r} has ${row.length} ids, row 0 has ${len}`);
    row.forEach((id, i) => {
      if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= config.vocab_size)
        throw new CliError(
          `--batch: tokens[${r}][${i}] = ${String(id)} is not an id in [0, ${config.vocab_size})`,
        );
    });
  });
  return rows as number[][];
}

export interface GradResult {
  loss: number;
  grads: Map<string, Float32Array | Float64Array>;
}

/** Runs the train step once; parameters are promoted to `dtype` (exact for float32 checkpoints). */
export async function computeGradients(
  config: LlamaConfig,
  params: Parameters,
  tokens: number[][],
  o: { device: 'cpu' | 'webgpu'; dtype: GraphDType },
): Promise<GradResult> {
  const batchSize = tokens.length;
  const seqLen = (tokens[0]?.length ?? 1) - 1;
  const graph = buildTrainStep(config, { batchSize, seqLen, dtype: o.dtype });
  const session = await createSession(graph.onnx, o);
  try {
    const feeds: Record<string, ort.Tensor> = {};
    for (const p of parameterSpecs(config)) {
      const data = params.get(p.name);
      if (!data) throw new CliError(`checkpoint lacks ${p.name}`);
      feeds[p.name] = floatTensor(o.dtype, data, p.shape);
    }
    feeds.tokens = new ort.Tensor('int32', Int32Array.from(tokens.flat()), [batchSize, seqLen + 1]);
    const out = await session.run(feeds);
    const loss = Number(out.loss?.data[0]);
    const grads = new Map<string, Float32Array | Float64Array>();
    for (const p of parameterSpecs(config))
      grads.set(p.name, out[`grad.${p.name}`]?.data as Float32Array | Float64Array);
    return { loss, grads };
  } finally {
    await session.release();
  }
}

const command: Command = {
  summary: 'loss and per-parameter gradients of one batch (train-step graph on onnxruntime-node)',
  usage:
    '--model DIR --batch BATCH.json --out GRADS.safetensors [--device cpu|webgpu] [--dtype float32|float64]\n\n' +
    '  --model DIR     checkpoint directory: config.json + model.safetensors (HF Llama names)\n' +
    '  --batch FILE    JSON {"tokens": [[…T+1 ids…], …]}: predicts row[1:] from row[:-1]\n' +
    '  --out FILE      safetensors with one gradient per parameter, under the parameter name\n' +
    '  --device D      cpu (default) or webgpu (no CPU fallback allowed; float32 only)\n' +
    '  --dtype T       float32 (default) or float64 (CPU; gradients are stored as F32 in the file)\n\n' +
    'Prints {"loss": <number>} on stdout.',
  async run(argv) {
    const { values } = parseFlags(argv, {
      model: { type: 'string' },
      batch: { type: 'string' },
      out: { type: 'string' },
      device: { type: 'string' },
      dtype: { type: 'string' },
    });
    if (!values.model) throw new CliError('--model DIR is required');
    if (!values.batch) throw new CliError('--batch BATCH.json is required');
    if (!values.out) throw new CliError('--out GRADS.safetensors is required');
    const device = values.device ?? 'cpu';
    if (device !== 'cpu' && device !== 'webgpu')
      throw new CliError(`--device: cpu or webgpu, got '${device}'`);
    const dtype = values.dtype ?? 'float32';
    if (dtype !== 'float32' && dtype !== 'float64')
      throw new CliError(`--dtype: float32 or float64, got '${dtype}'`);
    if (device === 'webgpu' && dtype === 'float64')
      throw new CliError('--dtype float64 needs --device cpu (WebGPU has no f64)');

    let checkpoint;
    try {
      checkpoint = await readCheckpoint(values.model);
    } catch (err) {
      if (err instanceof CheckpointError) throw new CliError(`--model: ${err.message}`);
      throw err;
    }
    const batchText = await readFile(values.batch, 'utf8').catch((err: Error) => {
      throw new CliError(`--batch: ${err.message}`);
    });
    const tokens = parseBatch(batchText, checkpoint.config);

    let result: GradResult;
    try {
      result = await computeGradients(checkpoint.config, checkpoint.params, tokens, { device, dtype });
    } catch (err) {
      if (err instanceof SessionError) throw new CliError(err.message, 1);
      throw err;
    }
    const tensors = new Map(
      parameterSpecs(checkpoint.config).map((p) => [
        p.name,
        { shape: p.shape, data: Float32Array.from(result.grads.get(p.name) ?? []) },
      ]),
    );
    const meta = {
      format: 'pt',
      meshtrain_loss: String(result.loss),
      meshtrain_device: device,
      meshtrain_dtype: dtype,
    };
    await writeFileAtomic(values.out, encodeSafetensors(tensors, meta));
    console.log(JSON.stringify({ loss: result.loss }));
    return 0;
  },
};

export default command;
