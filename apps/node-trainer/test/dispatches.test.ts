// The kernel counter against ORT's real profiler: a graph of known shape runs exactly the kernels and GPU
// dispatches it should, and only the counted run's events are counted.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { GraphBuilder, emitOnnx } from '@meshtrain/model';
import { countLastRun, kernelRunsPerStep } from '../src/ort/dispatches.ts';

/** x → (x+x) → ·x → reshape → +x′: three elementwise kernels and one Reshape, none foldable. */
function chain(): Uint8Array {
  const b = new GraphBuilder();
  const x = b.input('x', 'float32', [4, 8]);
  const y = b.mul(b.add(x, x), x);
  const r = b.reshape(y, [8, 4]);
  b.output(b.add(r, b.reshape(x, [8, 4])), 'y');
  return emitOnnx(b, { name: 'chain' });
}

const feeds = () => ({
  x: new ort.Tensor(
    'float32',
    Float32Array.from({ length: 32 }, (_, i) => i / 7),
    [4, 8],
  ),
});

describe('countLastRun', () => {
  it('counts only events inside the last model_run, kernels and dispatches apart', () => {
    const events = [
      { cat: 'Session', name: 'model_run', ts: 0, dur: 100 },
      { cat: 'Node', name: 'a_kernel_time', ts: 10, args: { op_name: 'Add' } },
      { cat: 'Session', name: 'model_run', ts: 200, dur: 100 },
      { cat: 'Node', name: 'a_kernel_time', ts: 210, args: { op_name: 'Add' } },
      { cat: 'Node', name: 'a_fence_before', ts: 211, args: { op_name: 'Add' } },
      { cat: 'Node', name: 'r_kernel_time', ts: 220, args: { op_name: 'Reshape' } },
      { cat: 'Api', name: 'a&Add&Add', ts: 230 },
      { cat: 'Api', name: 's&ReduceSum&Transpose', ts: 240 },
      { cat: 'Api', name: 's&ReduceSum&ReduceSum', ts: 250 },
      { cat: 'Api', name: 'late&Add&Add', ts: 400 },
    ];
    const c = countLastRun(events);
    expect(c.kernels).toEqual({ total: 2, byOp: { Add: 1, Reshape: 1 } });
    expect(c.dispatches).toEqual({ total: 3, byOp: { Add: 1, ReduceSum: 2 } });
  });

  it('rejects a profile without a run', () => {
    expect(() => countLastRun([{ cat: 'Session', name: 'session_initialization', ts: 0 }])).toThrow(
      /model_run/,
    );
  });
});

describe('kernelRunsPerStep on ORT', () => {
  it('CPU EP: one kernel run per node of the step', async () => {
    const c = await kernelRunsPerStep(chain(), feeds(), { device: 'cpu' });
    expect(c.total).toBe(Object.values(c.byOp).reduce((a, n) => a + n, 0));
    expect(c.byOp.Add).toBe(2);
    expect(c.byOp.Mul).toBe(1);
  });

  it('WebGPU EP (SwiftShader here): one dispatch per elementwise kernel, none for Reshape', async () => {
    const c = await kernelRunsPerStep(chain(), feeds(), { device: 'webgpu' });
    expect(c).toEqual({ total: 3, byOp: { Add: 2, Mul: 1 } });
  });
});
