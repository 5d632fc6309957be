// The GPU-shaped train step: kernel dispatches per transformer layer on the WebGPU EP (SwiftShader here) at
// most half of the graph before the rewrite, with the same loss and gradients. Counted with node-trainer's
// profiler-based counter (apps/node-trainer/src/ort/dispatches.ts), as bench:dispatches does.
import type * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { kernelRunsPerStep } from '../../../apps/node-trainer/src/ort/dispatches.ts';
import { type LlamaConfig, PRESETS, parameterSpecs } from '../src/config.ts';
import { buildTrainStep } from '../src/train-step.ts';
import { referenceLlama } from './reference-llama.ts';
import { feeds, randomParams, randomTokens, relL2, session, toF64 } from './ort-util.ts';

/**
 * Dispatches per layer of the micro train step on the WebGPU EP before the rewrite (commit 36f52eb: explicit
 * weight Transposes, separate q/k/v and gate/up MatMuls, RMSNorm/RoPE/SiLU from primitives), counted with the
 * same counter as below: the 2-layer step minus the 1-layer step (bench/README.md "bench:dispatches").
 */
const BEFORE_PER_LAYER = 157;

const BATCH = 1;
const SEQ = 8;

function micro(layers: number): LlamaConfig {
  return { ...PRESETS.micro, num_hidden_layers: layers };
}

async function dispatches(c: LlamaConfig): Promise<number> {
  const onnx = buildTrainStep(c, { batchSize: BATCH, seqLen: SEQ, dtype: 'float32' }).onnx;
  const f = feeds(c, randomParams(c, 3), randomTokens(c, BATCH, SEQ + 1, 4), 'float32');
  return (await kernelRunsPerStep(onnx, f, { device: 'webgpu' })).total;
}

describe('train-step dispatches on the WebGPU EP (SwiftShader here)', () => {
  it('per transformer layer: at most half of the graph before the rewrite', async () => {
    const one = await dispatches(micro(1));
    const two = await dispatches(micro(2));
    const perLayer = two - one;
    console.log(
      `micro: ${perLayer} dispatches per layer (before: ${BEFORE_PER_LAYER}), ${two} per 2-layer step`,
    );
    expect(perLayer).toBeGreaterThan(0);
    expect(perLayer).toBeLessThanOrEqual(BEFORE_PER_LAYER / 2);
  });

  it('loss matches the independent float64 reference and gradients the float64 graph', async () => {
    const c = PRESETS.micro;
    const params = randomParams(c, 21);
    const tokens = randomTokens(c, 2, SEQ + 1, 22);
    const ref = referenceLlama(c, (n) => params.get(n) ?? new Float64Array(0), tokens);
    const opts = { batchSize: 2, seqLen: SEQ };
    const run = async (device: 'webgpu' | 'cpu', dtype: 'float32' | 'float64') => {
      const s = await session(buildTrainStep(c, { ...opts, dtype }).onnx, device, dtype);
      const out: Record<string, ort.Tensor> = await s.run(feeds(c, params, tokens, dtype));
      await s.release();
      return out;
    };
    const gpu = await run('webgpu', 'float32');
    const f64 = await run('cpu', 'float64');
    const loss = toF64(gpu.loss)[0] ?? NaN;
    expect(Math.abs(loss - ref.loss) / ref.loss).toBeLessThan(1e-5);
    for (const p of parameterSpecs(c)) {
      const err = relL2(toF64(gpu[`grad.${p.name}`]), toF64(f64[`grad.${p.name}`]));
      expect(err, p.name).toBeLessThan(1e-4);
    }
  });
});
