// `--gpu-memory` on the resident WebGPU path: the GPU buffers a step holds, counted where they are created
// (gpu-allocations.ts), on a real Dawn device (SwiftShader here) with onnxruntime-web allocating through it;
// probe steps at two row counts give a measured footprint line that the micro-batch is picked from.
import { dawnDevice } from '@meshtrain/distro/node';
import { PRESETS } from '@meshtrain/model';
import { describe, expect, it } from 'vitest';
import { estimateFootprint, memoryShape, rowsForBudget } from '../src/backend/device.ts';
import { AllocationLedger, GpuAllocationMeter } from '../src/backend/gpu-allocations.ts';
import { trainingFootprint } from '../src/backend/memory-probe.ts';

const MiB = 2 ** 20;

describe('allocation ledger', () => {
  it('keeps live bytes and a peak that reset and restart move', () => {
    const l = new AllocationLedger();
    l.created(100);
    l.created(50);
    l.destroyed(100);
    expect([l.live, l.peak]).toEqual([50, 150]);
    l.resetPeak();
    expect(l.peak).toBe(50);
    l.created(10);
    expect(l.peak).toBe(60);
    l.restart();
    expect([l.live, l.peak]).toEqual([0, 0]);
  });
});

describe('GPU allocation meter', () => {
  it("counts a real device's buffers at createBuffer and destroy, each destroy once", async () => {
    const dawn = await dawnDevice();
    expect(dawn).toBeDefined();
    const device = (dawn as NonNullable<typeof dawn>).device;
    const meter = new GpuAllocationMeter();
    const before = device.createBuffer({ size: 4 * MiB, usage: GPUBufferUsage.STORAGE });
    meter.attach(device);
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
    const a = device.createBuffer({ size: MiB, usage });
    const b = device.createBuffer({ size: 2 * MiB, usage });
    expect(meter.live()).toBe(3 * MiB);
    a.destroy();
    a.destroy();
    before.destroy();
    expect(meter.live()).toBe(2 * MiB);
    expect(meter.peak()).toBe(3 * MiB);
    meter.reset();
    expect(meter.peak()).toBe(2 * MiB);
    // The wrapped buffer is still the device's: it takes writes and reports its size.
    device.queue.writeBuffer(b, 0, new Float32Array([1, 2, 3, 4]));
    expect(b.size).toBe(2 * MiB);
    b.destroy();
    expect(meter.live()).toBe(0);
    device.destroy();
  });

  it('measures resident probe steps growing with their rows, and --gpu-memory picks from them', async () => {
    const config = PRESETS.micro;
    const seqLen = 32;
    const shape = memoryShape(config, seqLen);
    const state = 16 * shape.params;
    const t = await trainingFootprint({
      bytes: 2 ** 30,
      config,
      seqLen,
      device: 'webgpu',
      stateBytes: state,
    });
    expect(t.measured).toBe(true);
    const probes = /GPU buffers.*probe steps of (\d+) and (\d+) rows/.exec(t.source);
    expect(probes).not.toBeNull();
    const rows = Number((probes as RegExpExecArray)[1]);
    // A row keeps at least its logits; at the probe's rows the step holds at least the parameters and their
    // gradients, beside the trainer's optimizer state.
    expect(t.perRowBytes).toBeGreaterThan(seqLen * config.vocab_size * 4);
    expect(t.perRowBytes).toBeLessThan(estimateFootprint(shape).perRowBytes * 4);
    expect(t.fixedBytes + rows * t.perRowBytes).toBeGreaterThan(state + 2 * 4 * shape.params);
    // A budget of the footprint at 3.5 rows (over the measured share) picks 3.
    const budget = (t.fixedBytes + 3.5 * t.perRowBytes) / 0.8;
    expect(rowsForBudget(budget, t, 64)).toBe(3);
  }, 300_000);
});
