// float32 loss and gradients on every onnxruntime-node backend against the float64 graph on the CPU EP
// (≤ 1e-4 relative L2 per tensor), and the proof that no node of the train step leaves the WebGPU EP:
// (1) sessions are created with disable_cpu_ep_fallback, so a CPU node fails creation; (2) ORT's verbose
// "Node placements" log is parsed and every node must be on WebGpuExecutionProvider.
import { describe, expect, it } from 'vitest';
import { placementOf } from '../../../apps/node-trainer/src/ort/placement.ts';
import { type LlamaConfig, PRESETS, parameterSpecs } from '../src/config.ts';
import { buildInference } from '../src/inference.ts';
import { buildTrainStep } from '../src/train-step.ts';
import {
  type Device,
  feeds,
  randomParams,
  randomTokens,
  relL2,
  session,
  toF64,
  webgpuAvailable,
} from './ort-util.ts';

const hasWebgpu = webgpuAvailable();

async function compareToF64(config: LlamaConfig, device: Device, batch: number, seq: number) {
  const params = randomParams(config, 31);
  const tokens = randomTokens(config, batch, seq + 1, 32);
  const opts = { batchSize: batch, seqLen: seq };
  const ref = await session(buildTrainStep(config, { ...opts, dtype: 'float64' }).onnx, 'cpu', 'float64');
  const want = await ref.run(feeds(config, params, tokens, 'float64'));
  const s = await session(buildTrainStep(config, { ...opts, dtype: 'float32' }).onnx, device);
  const got = await s.run(feeds(config, params, tokens, 'float32'));
  const errors: Record<string, number> = { loss: relL2(toF64(got.loss), toF64(want.loss)) };
  for (const p of parameterSpecs(config))
    errors[p.name] = relL2(toF64(got[`grad.${p.name}`]), toF64(want[`grad.${p.name}`]));
  await ref.release();
  await s.release();
  return errors;
}

function expectAllBelow(errors: Record<string, number>, tol: number, label: string) {
  const worst = Object.entries(errors).sort((a, b) => b[1] - a[1])[0];
  console.log(
    `${label}: worst rel L2 ${worst?.[1].toExponential(2)} (${worst?.[0]}), loss ${errors.loss?.toExponential(2)}`,
  );
  for (const [name, e] of Object.entries(errors)) expect(e, name).toBeLessThan(tol);
}

describe('float32 on the CPU EP vs float64', () => {
  it('micro', async () =>
    expectAllBelow(await compareToF64(PRESETS.micro, 'cpu', 2, 16), 1e-4, 'cpu f32 micro'));
  it('tiny', async () =>
    expectAllBelow(await compareToF64(PRESETS.tiny, 'cpu', 2, 32), 1e-4, 'cpu f32 tiny'));
});

describe.skipIf(!hasWebgpu)('onnxruntime-node WebGPU EP (SwiftShader here)', () => {
  it('micro train step: f32 loss and every gradient vs float64, with the CPU fallback disabled', async () => {
    expectAllBelow(await compareToF64(PRESETS.micro, 'webgpu', 1, 8), 1e-4, 'webgpu f32 micro');
  });

  it('every node of the train and inference graphs is placed on WebGpuExecutionProvider (verbose log)', async () => {
    const train = buildTrainStep(PRESETS.micro, { batchSize: 1, seqLen: 8, dtype: 'float32' });
    const placed = await placementOf(train.onnx, 'webgpu');
    expect(Object.keys(placed.providers)).toEqual(['WebGpuExecutionProvider']);
    // ORT's graph optimisations fuse a few nodes and add a few, so the count is near ours.
    const ours = Object.values(train.ops).reduce((a, b) => a + b, 0);
    const count = placed.providers.WebGpuExecutionProvider?.count ?? 0;
    expect(count).toBeGreaterThan(ours * 0.8);
    expect(count).toBeLessThan(ours * 1.1);
    const inf = await placementOf(
      buildInference(PRESETS.micro, { batchSize: 1, seqLen: 8, dtype: 'float32' }).onnx,
      'webgpu',
    );
    expect(Object.keys(inf.providers)).toEqual(['WebGpuExecutionProvider']);
  });

  it('the placement check catches a CPU node (int32 Slice of token ids, found while building this)', async () => {
    const { GraphBuilder } = await import('../src/graph/builder.ts');
    const { emitOnnx } = await import('../src/onnx/emit.ts');
    const b = new GraphBuilder();
    // The builder refuses an int32 Slice, so build it on float32 and retype the values before emitting.
    const ids = b.input('ids', 'float32', [2, 5]);
    const sliced = b.slice(ids, 1, 0, 4);
    Object.assign(ids, { dtype: 'int32' });
    Object.assign(sliced, { dtype: 'int32' });
    b.output(b.gather(b.input('e', 'float32', [10, 3]), sliced), 'rows');
    const onnx = emitOnnx(b, { name: 'cpu-node' });
    const placed = await placementOf(onnx, 'webgpu');
    expect(placed.providers.CPUExecutionProvider?.nodes.join()).toMatch(/Slice/);
    await expect(session(onnx, 'webgpu')).rejects.toThrow(/CPU/);
  });
});
