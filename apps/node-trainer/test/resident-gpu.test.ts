// node-trainer's resident GPU (`--device webgpu`): onnxruntime-web's WebGPU EP and DisTrO's WGSL on one Dawn
// device (SwiftShader here), through the backend module the browser tab trains with. The client built by
// createTrainer trains resident; a resident step moves only token ids up and the loss down, while the host
// path on the same backend moves every parameter and gradient (so the counters could fail) and returns the same
// gradients, for each row count; and graph-captured steps leave bit-identical parameters to uncaptured ones
// after 5 steps of training on the GPU; resident AdamW reads one norm back per step.
import { isResidentFor } from '@meshtrain/client';
import { LocalHub } from '@meshtrain/client/testing';
import { WebGpuTrainingBackend } from '@meshtrain/client/webgpu-training';
import {
  compressionChunkOf,
  DEFAULT_RUN_TOML,
  identityFromSeed,
  parseRunConfig,
  type RunConfig,
} from '@meshtrain/core';
import type { DistroTensor } from '@meshtrain/distro';
import { initParameters, parameterSpecs, PRESETS } from '@meshtrain/model';
import { afterAll, describe, expect, it } from 'vitest';
import { openNodeGpu, type NodeGpu } from '../src/backend/gpu.ts';
import { ResidentAdamW } from '../src/backend/gpu-adamw.ts';
import { createTrainer } from '../src/net/trainer.ts';

const SEQ = 16;
const ROWS = 2;
const config = PRESETS.micro;

function microRun(): RunConfig {
  const toml = DEFAULT_RUN_TOML.replace(/^preset = .*$/m, 'preset = "micro"')
    .replace(/^max_seq_len = .*$/m, `max_seq_len = ${SEQ}`)
    .replace(/^micro_batch_size = .*$/m, `micro_batch_size = ${ROWS}`);
  return parseRunConfig(toml).config;
}

const run = microRun();
const chunk = compressionChunkOf(run.model.LLM.optimizer) as number;

/** Token ids of step `i`: rows × (SEQ + 1), different every step. */
function tokensOf(i: number): Int32Array {
  return Int32Array.from({ length: ROWS * (SEQ + 1) }, (_, k) => (k * 7 + i * 13 + ((k * k) % 11)) % 256);
}

const opened: NodeGpu[] = [];
afterAll(async () => {
  for (const g of opened) await g.dispose();
});

async function open(graphCapture: boolean): Promise<NodeGpu> {
  const gpu = await openNodeGpu({ config, seqLen: SEQ, maxRows: ROWS, chunk, graphCapture });
  opened.push(gpu);
  return gpu;
}

/** The initial parameters as tensors of the GPU's DisTrO backend, in parameterSpecs order. */
function upload(gpu: NodeGpu): Map<string, DistroTensor> {
  const init = initParameters(config, run.meshtrain.seed);
  return new Map(
    parameterSpecs(config).map((p) => [p.name, gpu.distro.tensor(p.shape, init.get(p.name) as Float32Array)]),
  );
}

describe('node-trainer resident GPU training', () => {
  it('trains resident: per step only token ids up and the loss down; the host path moves everything', async () => {
    const gpu = await open(true);
    expect(gpu.backend).toBeInstanceOf(WebGpuTrainingBackend);
    const id = identityFromSeed(new Uint8Array(32).fill(7));
    const hub = new LocalHub(run, 'resident');
    const { client, backend, distro } = createTrainer({
      run,
      runId: 'resident',
      secretKey: id.secretKey,
      link: hub.connect(id.secretKey),
      data: { samples: async () => new Int32Array(0) },
      checkpoints: hub.checkpoints(),
      device: { device: 'webgpu', reason: 'test' },
      gpu,
    });
    client.stop();
    expect(backend).toBe(gpu.backend);
    expect(distro).toBe(gpu.distro);
    expect(isResidentFor(backend, distro)).toBe(true);

    const params = upload(gpu);
    await gpu.backend.loadParamTensors(params);
    const steps = 3;
    let residentGrads: Float32Array[] = [];
    for (let i = 0; i < steps; i++) {
      const out = await gpu.backend.trainStepResident(tokensOf(i), ROWS);
      expect(Number.isFinite(out.loss)).toBe(true);
      if (i === steps - 1)
        residentGrads = await Promise.all([...params.keys()].map((n) => gpu.distro.read(out.grads.get(n)!)));
      out.release();
    }
    const s = gpu.backend.stats;
    expect(s.residentSteps).toBe(steps);
    expect(s.capturedSteps).toBe(steps);
    expect(s.hostParamBytes).toBe(0);
    expect(s.hostGradientBytes).toBe(0);
    expect(s.uploadBytes).toBe(steps * tokensOf(0).byteLength);
    expect(s.downloadBytes).toBe(steps * 4);

    // The same step through host copies: every parameter goes up and every gradient comes down.
    const host = new Map<string, Float32Array>();
    for (const [n, t] of params) host.set(n, await gpu.distro.read(t));
    await gpu.backend.loadParams(host);
    const before = { ...s };
    const out = await gpu.backend.trainStep(tokensOf(steps - 1), ROWS);
    const paramBytes = [...host.values()].reduce((a, p) => a + p.byteLength, 0);
    expect(s.hostParamBytes - before.hostParamBytes).toBe(paramBytes);
    expect(s.hostGradientBytes - before.hostGradientBytes).toBe(paramBytes);
    expect(s.uploadBytes - before.uploadBytes).toBe(paramBytes + tokensOf(0).byteLength);
    // Same kernels on the same parameters and tokens: the host path's gradients are the resident ones.
    [...params.keys()].forEach((n, i) => expect(out.grads.get(n)).toEqual(residentGrads[i]));

    // A second row count is a second captured session, reading the same shared parameter buffers.
    const one = tokensOf(5).subarray(0, SEQ + 1);
    const single = await gpu.backend.trainStepResident(one, 1);
    const singleGrads = await Promise.all(
      [...params.keys()].map((n) => gpu.distro.read(single.grads.get(n)!)),
    );
    single.release();
    expect(s.capturedSteps).toBe(steps + 1);
    const hostSingle = await gpu.backend.trainStep(one, 1);
    [...params.keys()].forEach((n, i) => expect(hostSingle.grads.get(n)).toEqual(singleGrads[i]));
    await gpu.backend.dispose();
    expect(gpu.device.queue).toBeDefined();
  }, 600_000);

  it('graph-captured and uncaptured resident training leave bit-identical parameters after 5 steps', async () => {
    const trained: Float32Array[][] = [];
    for (const capture of [true, false]) {
      const gpu = await open(capture);
      expect(gpu.backend.graphCapture).toBe(capture);
      const params = upload(gpu);
      await gpu.backend.loadParamTensors(params);
      const gradBuffers = new Set<unknown>();
      for (let i = 0; i < 5; i++) {
        const out = await gpu.backend.trainStepResident(tokensOf(i), ROWS);
        gradBuffers.add(gpu.distro.bufferOf(out.grads.get('model.norm.weight')!).buffer);
        // Plain SGD on the GPU (p ← p − 0.05·g), so each step trains at the parameters the last one left.
        for (const [n, p] of params) gpu.distro.momentum(p, out.grads.get(n)!, 1, -0.05);
        out.release();
      }
      if (capture) {
        // A captured graph writes its outputs to the buffers of its first run on every replay.
        expect(gradBuffers.size).toBe(1);
        expect(gpu.backend.stats.capturedSteps).toBe(5);
      } else expect(gpu.backend.stats.capturedSteps).toBe(0);
      trained.push(await Promise.all([...params.values()].map((p) => gpu.distro.read(p))));
    }
    const [captured, uncaptured] = trained as [Float32Array[], Float32Array[]];
    const init = initParameters(config, run.meshtrain.seed);
    const first = parameterSpecs(config)[0]!.name;
    expect(captured[0]).not.toEqual(init.get(first));
    const bits = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length);
    captured.forEach((p, i) => expect(bits(p)).toEqual(bits(uncaptured[i]!)));
  }, 600_000);

  it('resident AdamW clips by global norm with one readback per step, whatever the number of tensors', async () => {
    const gpu = await open(true);
    const init = initParameters(config, run.meshtrain.seed);
    const opt = new ResidentAdamW(gpu, init, {
      beta1: 0.9,
      beta2: 0.95,
      eps: 1e-8,
      weightDecay: 0.1,
      gradClip: 1e-3, // below any real gradient norm here: every step clips
    });
    expect(init.size).toBeGreaterThan(4);
    const losses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const before = gpu.distro.stats.readbacks;
      losses.push(await opt.step(tokensOf(0), ROWS, 1e-2));
      expect(gpu.distro.stats.readbacks - before).toBe(1);
    }
    // The same batch four times: clipped steps still descend.
    expect(losses.at(-1)!).toBeLessThan(losses[0]!);
    opt.release();
  });

  it('resident AdamW trains a batch above maxRows as micro-batches with averaged gradients', async () => {
    const init = initParameters(config, run.meshtrain.seed);
    // eps 1 makes the update nearly proportional to the gradient (Adam is otherwise blind to its scale), and
    // no clipping: a sum instead of a mean, or one micro-batch's gradient instead of both, moves it visibly.
    const options = { beta1: 0.9, beta2: 0.95, eps: 1, weightDecay: 0, gradClip: 0 };
    const whole = await open(true);
    const micro = await openNodeGpu({ config, seqLen: SEQ, maxRows: 1, chunk, graphCapture: true });
    opened.push(micro);
    const a = new ResidentAdamW(whole, init, options);
    const b = new ResidentAdamW(micro, init, options);
    const lossesA: number[] = [];
    const lossesB: number[] = [];
    for (let i = 0; i < 3; i++) {
      lossesA.push(await a.step(tokensOf(i), ROWS, 1e-2));
      const before = micro.backend.stats.residentSteps;
      lossesB.push(await b.step(tokensOf(i), ROWS, 1e-2));
      expect(micro.backend.stats.residentSteps - before).toBe(ROWS);
    }
    // The mean of the micro-batches' losses is the batch's; after updates from averaged gradients the
    // parameters, and so the losses, stay within float32 rounding of the whole batch's.
    expect(lossesB[0]).toBeCloseTo(lossesA[0]!, 5);
    lossesB.forEach((l, i) => expect(Math.abs(l - lossesA[i]!) / lossesA[i]!).toBeLessThan(1e-4));
    const pa = await a.parameters();
    const pb = await b.parameters();
    let moved = 0;
    let apart = 0;
    for (const [n, x] of pa) {
      const y = pb.get(n) as Float32Array;
      const x0 = init.get(n) as Float32Array;
      for (let k = 0; k < x.length; k++) {
        moved = Math.max(moved, Math.abs((x[k] as number) - (x0[k] as number)));
        apart = Math.max(apart, Math.abs((x[k] as number) - (y[k] as number)));
      }
    }
    expect(moved).toBeGreaterThan(0);
    expect(apart).toBeLessThan(moved / 100);
    a.release();
    b.release();
  });
});
