// The kernel counter against ORT's real profiler: a graph of known shape runs exactly the kernels and GPU
// dispatches it should, only the counted run's events are counted, and its dispatches' GPU time is summed.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { GraphBuilder, emitOnnx } from '@meshtrain/model';
import { countLastRun, kernelRunsPerStep, lastRunByOrder, profileStep } from '../src/ort/dispatches.ts';

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
      { cat: 'Api', name: 'a&Add&Add', ts: 230, dur: 5 },
      { cat: 'Api', name: 's&ReduceSum&Transpose', ts: 240, dur: 7 },
      { cat: 'Api', name: 's&ReduceSum&ReduceSum', ts: 250, dur: 2 },
      { cat: 'Api', name: 'late&Add&Add', ts: 400, dur: 100 },
    ];
    const c = countLastRun(events);
    expect(c.kernels).toEqual({ total: 2, byOp: { Add: 1, Reshape: 1 } });
    expect(c.dispatches).toEqual({ total: 3, byOp: { Add: 1, ReduceSum: 2 } });
    expect(c.gpu).toEqual({ totalUs: 14, byOpUs: { Add: 5, ReduceSum: 9 } });
  });

  it("tells the last run's dispatches by their order when GPU timestamps miss the host's spans", () => {
    const api = (ts: number, name: string, dur = 1) => ({ cat: 'Api', name, ts, dur });
    const events = [
      { cat: 'Session', name: 'model_run', ts: 0, dur: 100 },
      { cat: 'Session', name: 'model_run', ts: 200, dur: 100 },
      api(5_000, 'a&Add&Add'),
      api(5_010, 'm&MatMul&MatMul', 3),
      api(5_020, 'a&Add&Add', 4),
      api(5_030, 'm&MatMul&MatMul', 6),
    ];
    const c = countLastRun(events);
    expect(c.dispatches).toEqual({ total: 2, byOp: { Add: 1, MatMul: 1 } });
    expect(c.gpu).toEqual({ totalUs: 10, byOpUs: { Add: 4, MatMul: 6 } });
    expect(() => lastRunByOrder(events.slice(2, 5), 2)).toThrow(/equal runs/);
    expect(() => lastRunByOrder([api(1, 'a&Add&Add'), api(2, 'm&MatMul&MatMul')], 2)).toThrow(/equal runs/);
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

  it('WebGPU EP (SwiftShader here): one dispatch per elementwise kernel, none for Reshape, each GPU-timed', async () => {
    const p = await profileStep(chain(), feeds(), { device: 'webgpu' });
    expect(p.runs).toEqual({ total: 3, byOp: { Add: 2, Mul: 1 } });
    expect(Object.keys(p.gpu?.byOpUs ?? {}).sort()).toEqual(['Add', 'Mul']);
    expect(p.gpu?.byOpUs.Add).toBeGreaterThan(0);
    expect(p.gpu?.byOpUs.Mul).toBeGreaterThan(0);
    expect((p.gpu?.byOpUs.Add ?? 0) + (p.gpu?.byOpUs.Mul ?? 0)).toBe(p.gpu?.totalUs);
  });
});
