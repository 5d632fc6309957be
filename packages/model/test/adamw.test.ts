import { describe, expect, it } from 'vitest';
import { AdamW, clipGradNorm, cosineLr } from '../src/index.ts';

describe('AdamW', () => {
  it('matches a hand-computed first and second step (PyTorch update order)', () => {
    const w = new Float32Array([1, -2]);
    const gain = new Float32Array([0.5]);
    const params = new Map([
      ['model.layers.0.mlp.up_proj.weight', w],
      ['model.norm.weight', gain],
    ]);
    const opt = new AdamW(params, { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 });
    expect(opt.decays('model.layers.0.mlp.up_proj.weight')).toBe(true);
    expect(opt.decays('model.norm.weight')).toBe(false);

    const lr = 0.01;
    const g1 = [0.1, -0.3];
    const gg1 = 0.2;
    opt.step(
      new Map([
        ['model.layers.0.mlp.up_proj.weight', new Float32Array(g1)],
        ['model.norm.weight', new Float32Array([gg1])],
      ]),
      lr,
    );
    // Step 1: m̂ = g and √v̂ = |g|, so the update is lr·g/(|g|+ε) on top of decoupled decay p·(1−lr·wd).
    const f32 = Math.fround;
    const g1f = g1.map(f32);
    const expected1 = [
      f32(1 * (1 - lr * 0.1) - (lr * g1f[0]!) / (Math.abs(g1f[0]!) + 1e-8)),
      f32(-2 * (1 - lr * 0.1) - (lr * g1f[1]!) / (Math.abs(g1f[1]!) + 1e-8)),
    ];
    expect([...w]).toEqual(expected1);
    expect(gain[0]).toBe(f32(0.5 - (lr * f32(gg1)) / (Math.abs(f32(gg1)) + 1e-8)));

    // Step 2 by the textbook formulas, in float64 with float32 moments.
    const g2 = [-0.05, 0.2];
    opt.step(
      new Map([
        ['model.layers.0.mlp.up_proj.weight', new Float32Array(g2)],
        ['model.norm.weight', new Float32Array([0])],
      ]),
      lr,
    );
    for (let i = 0; i < 2; i++) {
      const ga = g1f[i]!;
      const gb = f32(g2[i]!);
      const m = f32(0.9 * f32(0.1 * ga) + 0.1 * gb);
      const v = f32(0.95 * f32(0.05 * ga * ga) + 0.05 * gb * gb);
      const mHat = m / (1 - 0.9 ** 2);
      const vHat = v / (1 - 0.95 ** 2);
      const want = expected1[i]! * (1 - lr * 0.1) - (lr * mHat) / (Math.sqrt(vHat) + 1e-8);
      expect(w[i]).toBeCloseTo(want, 7);
    }
  });

  it('rejects missing or mis-sized gradients', () => {
    const opt = new AdamW(new Map([['a.weight', new Float32Array(2)]]));
    expect(() => opt.step(new Map(), 1e-3)).toThrow(/no gradient for a\.weight/);
    expect(() => opt.step(new Map([['a.weight', new Float32Array(3)]]), 1e-3)).toThrow(/3 values, not 2/);
  });
});

describe('clipGradNorm', () => {
  it('scales to the max norm only when above it, returning the norm before clipping', () => {
    const grads = new Map([
      ['a', new Float32Array([3])],
      ['b', new Float32Array([0, 4])],
    ]);
    expect(clipGradNorm(grads, 10)).toBe(5);
    expect(grads.get('a')![0]).toBe(3);
    expect(clipGradNorm(grads, 1)).toBe(5);
    expect(grads.get('a')![0]).toBeCloseTo(0.6, 6);
    expect(grads.get('b')![1]).toBeCloseTo(0.8, 6);
  });
});

describe('cosineLr', () => {
  const s = { peak: 1e-3, warmupSteps: 20, totalSteps: 300, floor: 0.1 };
  it('warms up linearly, peaks, then decays monotonically to the floor', () => {
    expect(cosineLr(0, s)).toBeCloseTo(1e-3 / 20, 12);
    expect(cosineLr(19, s)).toBeCloseTo(1e-3, 12);
    expect(cosineLr(20, s)).toBeCloseTo(1e-3, 12);
    expect(cosineLr(160, s)).toBeCloseTo(0.55e-3, 12); // halfway: floor + (peak − floor)/2
    expect(cosineLr(300, s)).toBeCloseTo(1e-4, 12);
    for (let t = 21; t < 300; t++) expect(cosineLr(t, s)).toBeLessThanOrEqual(cosineLr(t - 1, s));
  });
});
