import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  coldStartFactor,
  learningRate,
  type CosineLr,
  type LinearLr,
  type LrSchedule,
  type WarmupStableDecayLr,
} from '../src/schedule/index.ts';

const constant = (base_lr: number, warmup_steps: number, warmup_init_lr: number): LrSchedule => ({
  kind: 'Constant',
  base_lr,
  warmup_steps,
  warmup_init_lr,
});
const linear = (
  base_lr: number,
  warmup_steps: number,
  warmup_init_lr: number,
  total_steps: number,
  final_lr: number,
): LinearLr => ({
  kind: 'Linear',
  base_lr,
  warmup_steps,
  warmup_init_lr,
  total_steps,
  final_lr,
});
const cosine = (
  base_lr: number,
  warmup_steps: number,
  warmup_init_lr: number,
  total_steps: number,
  final_lr: number,
): CosineLr => ({
  kind: 'Cosine',
  base_lr,
  warmup_steps,
  warmup_init_lr,
  total_steps,
  final_lr,
});

const close = (actual: number, expected: number, eps = 1e-12) =>
  expect(Math.abs(actual - expected)).toBeLessThanOrEqual(eps);

// Psyche's own cases (shared/core/src/definitions.rs tests); expected values worked out by hand from
// docs/protocol.md "Learning-rate schedules".
describe('Psyche LR fixtures', () => {
  it('Constant(base 0.01, warmup 10, init 0.001)', () => {
    const s = constant(0.01, 10, 0.001);
    close(learningRate(s, 0), 0.001); // warmup starts at init
    close(learningRate(s, 5), 0.0055); // 0.001 + 0.009·5/10
    close(learningRate(s, 9), 0.0091); // 0.001 + 0.009·9/10
    for (const step of [10, 100, 1000]) close(learningRate(s, step), 0.01);
  });

  it('Linear(base 0.01, warmup 10, init 0.001, total 100, final 1e-4)', () => {
    const s = linear(0.01, 10, 0.001, 100, 0.0001);
    close(learningRate(s, 0), 0.001);
    close(learningRate(s, 5), 0.0055);
    close(learningRate(s, 10), 0.01);
    close(learningRate(s, 55), 0.00505); // 0.01 + (1e-4 − 0.01)·45/90
    close(learningRate(s, 100), 0.0001);
    close(learningRate(s, 200), 0.0001); // clamped past total
  });

  it('Cosine(base 0.01, warmup 10, init 0.001, total 110, final 0)', () => {
    const s = cosine(0.01, 10, 0.001, 110, 0);
    close(learningRate(s, 0), 0.001);
    close(learningRate(s, 5), 0.0055);
    close(learningRate(s, 10), 0.01);
    close(learningRate(s, 60), 0.005); // progress 1/2: 0.01·0.5·(1 + cos(π/2))
    close(learningRate(s, 110), 0);
  });

  it('WarmupStableDecay(base 0.01, warmup 10, init 0.001, stable 60, cosine 110 → 0.001, linear 20 → 0)', () => {
    const s: WarmupStableDecayLr = {
      kind: 'WarmupStableDecay',
      base_lr: 0.01,
      warmup_steps: 10,
      warmup_init_lr: 0.001,
      stable_steps: 60,
      cosine_decay_steps: 110,
      cosine_decay_final_lr: 0.001,
      linear_decay_steps: 20,
      linear_decay_final_lr: 0,
    };
    close(learningRate(s, 0), 0.001);
    close(learningRate(s, 5), 0.0055);
    for (const step of [10, 30, 69, 70]) close(learningRate(s, step), 0.01); // stable, then cosine at progress 0
    close(learningRate(s, 125), 0.0055); // cosine progress 55/110: 0.001 + 0.009·0.5
    close(learningRate(s, 179), 0.001, 1e-4); // cosine progress 109/110
    close(learningRate(s, 180), 0.001); // linear phase starts at the cosine floor
    close(learningRate(s, 190), 0.0005); // 0.001 − 0.001·10/20
    close(learningRate(s, 199), 0.00005); // 0.001 − 0.001·19/20
    close(learningRate(s, 200), 0);
    close(learningRate(s, 250), 0);
  });

  it('edge cases', () => {
    close(learningRate(constant(0.01, 0, 0.001), 0), 0.01); // no warmup
    close(learningRate(linear(0.01, 10, 0.01, 100, 0.001), 5), 0.01); // init == base
    close(learningRate(cosine(0.01, 10, 0.001, 100, 0.01), 50), 0.01); // base == final
    const empty: WarmupStableDecayLr = {
      kind: 'WarmupStableDecay',
      base_lr: 0.01,
      warmup_steps: 0,
      warmup_init_lr: 0.001,
      stable_steps: 0,
      cosine_decay_steps: 0,
      cosine_decay_final_lr: 0.001,
      linear_decay_steps: 0,
      linear_decay_final_lr: 0.001,
    };
    close(learningRate(empty, 0), 0.001); // every phase empty: straight to the linear floor
  });
});

describe('deliberate differences from Psyche', () => {
  it('Cosine holds final_lr after total_steps instead of climbing back', () => {
    const s = cosine(0.01, 10, 0.001, 110, 0);
    // Psyche: progress 2 at step 210 gives 0.01·0.5·(1 + cos 2π) = 0.01 again.
    for (const step of [111, 160, 210, 10_000]) expect(learningRate(s, step)).toBe(0);
  });

  it('Cosine with total_steps == warmup_steps does not divide by zero', () => {
    const s = cosine(0.01, 10, 0, 10, 0.001);
    close(learningRate(s, 9), 0.009); // still warming up
    expect(learningRate(s, 10)).toBe(0.001);
    expect(learningRate(s, 11)).toBe(0.001);
  });
});

const lr = fc.double({ min: 1e-6, max: 1, noNaN: true });
const steps = fc.integer({ min: 0, max: 2000 });

/** A decaying Linear/Cosine schedule: init ≤ base, final ≤ base, warmup ≤ total. */
const decaying = fc
  .record({
    kind: fc.constantFrom('Linear' as const, 'Cosine' as const),
    base: lr,
    initFrac: fc.double({ min: 0, max: 1, noNaN: true }),
    finalFrac: fc.double({ min: 0, max: 1, noNaN: true }),
    warmup: fc.integer({ min: 0, max: 200 }),
    decay: fc.integer({ min: 0, max: 1000 }),
  })
  .map((r): LinearLr | CosineLr => ({
    kind: r.kind,
    base_lr: r.base,
    warmup_init_lr: r.base * r.initFrac,
    warmup_steps: r.warmup,
    total_steps: r.warmup + r.decay,
    final_lr: r.base * r.finalFrac,
  }));

// Relative slack for comparing neighbouring steps: the formulas are monotone, float rounding is not quite.
const slack = (x: number) => Math.abs(x) * 1e-12;

describe('schedule properties', () => {
  it('warmup rises monotonically from warmup_init_lr to base_lr', () => {
    fc.assert(
      fc.property(decaying, (s) => {
        if (s.warmup_steps > 0) expect(learningRate(s, 0)).toBe(s.warmup_init_lr);
        for (let step = 1; step < s.warmup_steps; step++)
          expect(learningRate(s, step)).toBeGreaterThanOrEqual(learningRate(s, step - 1) - slack(s.base_lr));
        if (s.total_steps > s.warmup_steps)
          close(learningRate(s, s.warmup_steps), s.base_lr, slack(s.base_lr));
      }),
    );
  });

  it('after warmup, Linear and Cosine never increase and end exactly at final_lr', () => {
    fc.assert(
      fc.property(decaying, (s) => {
        for (let step = s.warmup_steps + 1; step <= s.total_steps + 20; step++)
          expect(learningRate(s, step)).toBeLessThanOrEqual(learningRate(s, step - 1) + slack(s.base_lr));
        expect(learningRate(s, s.total_steps)).toBe(s.final_lr);
      }),
    );
  });

  it('every rate lies between the smallest and largest configured rate', () => {
    fc.assert(
      fc.property(decaying, steps, (s, step) => {
        const x = learningRate(s, step);
        expect(Number.isFinite(x)).toBe(true);
        expect(x).toBeGreaterThanOrEqual(Math.min(s.warmup_init_lr, s.final_lr) - slack(s.base_lr));
        expect(x).toBeLessThanOrEqual(s.base_lr + slack(s.base_lr));
      }),
    );
  });

  it('Cosine holds final_lr at and after total_steps', () => {
    fc.assert(
      fc.property(decaying, fc.integer({ min: 0, max: 100_000 }), (s, extra) => {
        expect(learningRate({ ...s, kind: 'Cosine' }, s.total_steps + extra)).toBe(s.final_lr);
      }),
    );
  });

  it('WarmupStableDecay: base_lr through the stable phase, non-increasing after, then linear_decay_final_lr', () => {
    const wsd = fc
      .record({
        base: lr,
        cosFrac: fc.double({ min: 0, max: 1, noNaN: true }),
        linFrac: fc.double({ min: 0, max: 1, noNaN: true }),
        warmup: fc.integer({ min: 0, max: 50 }),
        stable: fc.integer({ min: 0, max: 200 }),
        cos: fc.integer({ min: 0, max: 200 }),
        lin: fc.integer({ min: 0, max: 200 }),
      })
      .map((r): WarmupStableDecayLr => ({
        kind: 'WarmupStableDecay',
        base_lr: r.base,
        warmup_init_lr: 0,
        warmup_steps: r.warmup,
        stable_steps: r.stable,
        cosine_decay_steps: r.cos,
        cosine_decay_final_lr: r.base * r.cosFrac,
        linear_decay_steps: r.lin,
        linear_decay_final_lr: r.base * r.cosFrac * r.linFrac,
      }));
    fc.assert(
      fc.property(wsd, (s) => {
        const stableEnd = s.warmup_steps + s.stable_steps;
        const end = stableEnd + s.cosine_decay_steps + s.linear_decay_steps;
        for (let step = s.warmup_steps; step < stableEnd; step++)
          expect(learningRate(s, step)).toBe(s.base_lr);
        for (let step = stableEnd + 1; step <= end + 5; step++)
          expect(learningRate(s, step)).toBeLessThanOrEqual(learningRate(s, step - 1) + slack(s.base_lr));
        // The linear phase starts exactly at the cosine floor.
        if (s.linear_decay_steps > 0)
          expect(learningRate(s, stableEnd + s.cosine_decay_steps)).toBe(s.cosine_decay_final_lr);
        expect(learningRate(s, end)).toBe(s.linear_decay_final_lr);
        expect(learningRate(s, end + 1000)).toBe(s.linear_decay_final_lr);
      }),
    );
  });
});

describe('coldStartFactor', () => {
  it('is 1 outside cold-start epochs and outside the window', () => {
    expect(coldStartFactor(7)).toBe(1);
    expect(coldStartFactor(4, [5, 15])).toBe(1);
    expect(coldStartFactor(16, [5, 15])).toBe(1);
  });

  it('ramps from 0 at the epoch start to 1 at the window end', () => {
    expect(coldStartFactor(5, [5, 15])).toBe(0);
    expect(coldStartFactor(10, [5, 15])).toBe(0.5);
    expect(coldStartFactor(15, [5, 15])).toBe(1);
  });

  it('an empty window (cold_start_warmup_steps = 0) leaves the rate alone instead of dividing by zero', () => {
    expect(coldStartFactor(5, [5, 5])).toBe(1);
  });

  it('is monotone in the step and stays within [0, 1]', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: 1, max: 500 }), (a, len) => {
        let prev = -Infinity;
        for (let step = a; step <= a + len; step++) {
          const f = coldStartFactor(step, [a, a + len]);
          expect(f).toBeGreaterThanOrEqual(Math.max(prev, 0));
          expect(f).toBeLessThanOrEqual(1);
          prev = f;
        }
      }),
      { numRuns: 50 },
    );
  });
});
