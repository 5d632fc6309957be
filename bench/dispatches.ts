// bench:dispatches — kernel runs per train step and per transformer layer, from ORT's profiler
// (apps/node-trainer/src/ort/dispatches.ts). Per layer is the difference between the preset with 2 layers and
// with 1; per step is the preset itself. Counts do not depend on batch or sequence length, so a small batch
// keeps even 125m quick. Prints one JSON object.
//
//   npm run -s bench:dispatches -- [--device cpu|webgpu] [--presets micro,tiny,20m,125m]
import * as ort from 'onnxruntime-node';
import { type LlamaConfig, PRESETS, type PresetName, buildTrainStep, parameterSpecs } from '@meshtrain/model';
import { kernelRunsPerStep } from '../apps/node-trainer/src/ort/dispatches.ts';

const BATCH = 1;
const SEQ = 8;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function feedsFor(c: LlamaConfig): Record<string, ort.Tensor> {
  const out: Record<string, ort.Tensor> = {};
  let seed = 1;
  for (const p of parameterSpecs(c)) {
    const n = p.shape.reduce((a, d) => a * d, 1);
    // Deterministic small values: only the kernel count is read, never the numbers.
    out[p.name] = new ort.Tensor(
      'float32',
      Float32Array.from(
        { length: n },
        () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 - 0.5) * 0.1,
      ),
      [...p.shape],
    );
  }
  out.tokens = new ort.Tensor(
    'int32',
    Int32Array.from({ length: BATCH * (SEQ + 1) }, (_, i) => (i * 7) % c.vocab_size),
    [BATCH, SEQ + 1],
  );
  return out;
}

async function count(c: LlamaConfig, device: 'cpu' | 'webgpu') {
  const { onnx } = buildTrainStep(c, { batchSize: BATCH, seqLen: SEQ, dtype: 'float32' });
  return kernelRunsPerStep(onnx, feedsFor(c), { device });
}

const device = arg('device') === 'webgpu' ? 'webgpu' : 'cpu';
const presets = (arg('presets') ?? 'micro,tiny,20m,125m').split(',') as PresetName[];
const results: Record<string, unknown> = {};
for (const name of presets) {
  const c = PRESETS[name];
  if (!c) throw new Error(`unknown preset ${name}`);
  const one = await count({ ...c, num_hidden_layers: 1 }, device);
  const two = await count({ ...c, num_hidden_layers: 2 }, device);
  const full = c.num_hidden_layers === 2 ? two : await count(c, device);
  const perLayerByOp: Record<string, number> = {};
  for (const op of new Set([...Object.keys(one.byOp), ...Object.keys(two.byOp)])) {
    const d = (two.byOp[op] ?? 0) - (one.byOp[op] ?? 0);
    if (d !== 0) perLayerByOp[op] = d;
  }
  results[name] = {
    layers: c.num_hidden_layers,
    per_layer: two.total - one.total,
    per_step: full.total,
    outside_layers: one.total - (two.total - one.total),
    per_layer_by_op: perLayerByOp,
    per_step_by_op: full.byOp,
  };
  process.stderr.write(`${name}: ${two.total - one.total} per layer, ${full.total} per step\n`);
}
process.stdout.write(`${JSON.stringify({ device, batch: BATCH, seq: SEQ, presets: results })}\n`);
