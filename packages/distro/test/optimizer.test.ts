import { describe, expect, it } from 'vitest';
import { createCpuBackend, distroStep, lookahead } from '../src/index.ts';
import { rng } from './rng.ts';

describe('distroStep (docs/protocol.md "Training step", Psyche quirks fixed)', () => {
  it('clips, subtracts the own residual one step late, updates momentum and compresses', async () => {
    const be = createCpuBackend({ chunk: 8 });
    const rand = rng(5);
    const shape = [16, 16];
    const g1 = Float32Array.from({ length: 256 }, () => rand() - 0.5);
    const g2 = Float32Array.from({ length: 256 }, () => rand() - 0.5);
    const delta = [be.tensor(shape)]; // zero, not uninitialised
    const step1 = await distroStep(be, delta, [be.tensor(shape, g1)], undefined, {
      lr: 0.1,
      decay: 0.9,
      topk: 4,
      quantize1bit: true,
      clipGradNorm: 1,
    });
    const norm1 = Math.hypot(...g1);
    expect(step1.gradNorm).toBeCloseTo(norm1, 4);
    const clip = 1 / (norm1 + 1e-6);
    const d1 = await be.read(delta[0]!);
    d1.forEach((v, i) => expect(v).toBeCloseTo(0.1 * clip * g1[i]!, 6));
    for (const v of step1.send[0]!.values) expect(Math.abs(v)).toBe(1);
    expect(step1.own[0]!.quantized).toBe(false);
    // Step 2: delta ← 0.9·(delta − decode(own1)) + lr·g2 (norm of g2 under 100: no clipping).
    const ref = createCpuBackend({ chunk: 8 });
    const expected = ref.tensor(shape, d1);
    ref.subtractResidual(expected, step1.own[0]!);
    ref.momentum(expected, ref.tensor(shape, g2), 0.9, 0.1);
    await distroStep(be, delta, [be.tensor(shape, g2)], step1.own, {
      lr: 0.1,
      decay: 0.9,
      topk: 4,
      quantize1bit: false,
      clipGradNorm: 100,
    });
    expect([...(await be.read(delta[0]!))]).toEqual([...(await ref.read(expected))]);
  });
  it('lookahead writes a scratch copy and leaves the parameters untouched', async () => {
    const be = createCpuBackend({ chunk: 4 });
    const p = be.tensor([4], Float32Array.of(1, 2, 3, 4));
    const d = be.tensor([4], Float32Array.of(-1, 0, 2, -0.5));
    const s = be.tensor([4]);
    lookahead(be, [s], [p], [d], 0.5);
    expect([...(await be.read(s))]).toEqual([1.5, 2, 2.5, 4.5]);
    expect([...(await be.read(p))]).toEqual([1, 2, 3, 4]);
  });
});
