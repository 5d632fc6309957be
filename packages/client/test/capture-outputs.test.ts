// captureSafeOutputs: every graph output an aliasing op produced is recomputed by an elementwise kernel, and
// the patched train step returns bit-identical outputs (onnxruntime-web's wasm CPU kernels, micro preset).
import * as ort from 'onnxruntime-web/webgpu';
import { buildTrainStep, initParameters, PRESETS } from '@meshtrain/model';
import { describe, expect, it } from 'vitest';
import { captureSafeOutputs } from '../src/backends/capture-outputs.ts';

ort.env.wasm.numThreads = 1;

describe('captureSafeOutputs', () => {
  it('recomputes aliased outputs and leaves every output bit-identical', async () => {
    const graph = buildTrainStep(PRESETS.micro, { batchSize: 2, seqLen: 8, dtype: 'float32' });
    const { onnx, patched } = captureSafeOutputs(graph.onnx);
    const outputs = graph.outputs.map((o) => o.name);
    for (const name of patched) expect(outputs).toContain(name);
    // A second pass finds nothing left to patch: those outputs now come from a kernel.
    expect(captureSafeOutputs(onnx).patched).toEqual([]);

    const params = initParameters(PRESETS.micro, 3);
    const feeds = (): Record<string, ort.Tensor> =>
      Object.fromEntries(
        graph.inputs.map((i) => [
          i.name,
          i.name === 'tokens'
            ? new ort.Tensor(
                'int32',
                Int32Array.from({ length: 18 }, (_, k) => (k * 11) % 256),
                i.shape,
              )
            : new ort.Tensor('float32', params.get(i.name) as Float32Array, i.shape),
        ]),
      );
    const run = async (bytes: Uint8Array) => {
      const s = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
      const out = await s.run(feeds());
      await s.release();
      return out;
    };
    const [a, b] = [await run(graph.onnx), await run(onnx)];
    for (const name of outputs) {
      const x = a[name]!.data as Float32Array;
      const y = b[name]!.data as Float32Array;
      expect(new Uint32Array(y.buffer, y.byteOffset, y.length)).toEqual(
        new Uint32Array(x.buffer, x.byteOffset, x.length),
      );
    }
  }, 120_000);
});
