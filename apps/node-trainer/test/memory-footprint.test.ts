// --gpu-memory's arithmetic (footprint lines through two probes, rows for a budget, equal micro-batches) and
// the measuring around it: a real /proc peak meter, and measureFootprint's probe order on a scripted meter
// (a real train step's footprint is measured in memory-probe-rss.test.ts, a process of its own).
import { describe, expect, it } from 'vitest';
import { PRESETS } from '@meshtrain/model';
import {
  describeFootprint,
  estimateFootprint,
  footprintFromProbes,
  largestDivisorAtMost,
  memoryShape,
  probeRows,
  MEASURED_BUDGET_SHARE,
  rowsForBudget,
} from '../src/backend/device.ts';
import { measureFootprint, processRssMeter, type PeakMeter } from '../src/backend/memory-probe.ts';

describe('footprint arithmetic', () => {
  it('describes a footprint in GB, or MB below one', () => {
    const f = { fixedBytes: 2.81e9, perRowBytes: 6.1e8, source: 'measured: x' };
    expect(describeFootprint(f)).toBe('measured: x: 2.81 GB + 610.0 MB per sequence');
    expect(describeFootprint({ ...f, fixedBytes: 3.09e6 })).toBe(
      'measured: x: 3.1 MB + 610.0 MB per sequence',
    );
  });

  it('draws the line through two probes, in either order', () => {
    const f = footprintFromProbes({ rows: 2, peakBytes: 3000 }, { rows: 4, peakBytes: 5000 }, 'test');
    expect(f).toEqual({ fixedBytes: 1000, perRowBytes: 1000, source: 'test', measured: true });
    expect(footprintFromProbes({ rows: 4, peakBytes: 5000 }, { rows: 2, peakBytes: 3000 }, 'test')).toEqual(
      f,
    );
  });

  it('refuses probes that do not describe a footprint', () => {
    expect(footprintFromProbes({ rows: 2, peakBytes: 10 }, { rows: 2, peakBytes: 20 }, 'x')).toBeNull();
    expect(footprintFromProbes({ rows: 1, peakBytes: 900 }, { rows: 2, peakBytes: 800 }, 'x')).toBeNull();
    expect(footprintFromProbes({ rows: 1, peakBytes: 900 }, { rows: 2, peakBytes: 900 }, 'x')).toBeNull();
  });

  it('never gives a negative fixed part', () => {
    const f = footprintFromProbes({ rows: 1, peakBytes: 100 }, { rows: 2, peakBytes: 300 }, 'x');
    expect(f?.fixedBytes).toBe(0);
    expect(f?.perRowBytes).toBe(200);
  });

  it('fits rows to a budget between 1 and the cap', () => {
    const f = { fixedBytes: 1000, perRowBytes: 300, source: 'x' };
    expect(rowsForBudget(2000, f, 64)).toBe(3);
    expect(rowsForBudget(1000 + 300 * 100, f, 64)).toBe(64);
    expect(rowsForBudget(500, f, 64)).toBe(1);
  });

  it('fits a measured footprint to a share of the budget, which keeps the 125m baseline under 5 GB', () => {
    const f = { fixedBytes: 1000, perRowBytes: 300, source: 'x', measured: true };
    expect(rowsForBudget(1000 + 300 * 10, f, 64)).toBe(
      Math.floor((4000 * MEASURED_BUDGET_SHARE - 1000) / 300),
    );
    // bench/README.md "bench:memory": measured 2.82 GB + 0.59 GB per sequence, 4 rows peaked at 6.24 GB.
    const m125 = { fixedBytes: 2.82e9, perRowBytes: 0.59e9, source: 'x', measured: true };
    expect(largestDivisorAtMost(8, rowsForBudget(5e9, m125, 8))).toBe(2);
  });

  it('cuts a batch into equal micro-batches', () => {
    expect(largestDivisorAtMost(8, 5)).toBe(4);
    expect(largestDivisorAtMost(8, 8)).toBe(8);
    expect(largestDivisorAtMost(8, 100)).toBe(8);
    expect(largestDivisorAtMost(7, 6)).toBe(1);
    expect(largestDivisorAtMost(12, 5.9)).toBe(4);
    expect(largestDivisorAtMost(12, 0)).toBe(1);
  });

  it('estimates more per row for longer sequences and larger vocabularies', () => {
    const base = estimateFootprint(memoryShape(PRESETS['20m'], 256));
    expect(estimateFootprint(memoryShape(PRESETS['20m'], 512)).perRowBytes).toBeGreaterThan(
      2 * base.perRowBytes,
    );
    expect(
      estimateFootprint({ ...memoryShape(PRESETS['20m'], 256), vocab: 64000 }).perRowBytes,
    ).toBeGreaterThan(base.perRowBytes);
    expect(estimateFootprint(memoryShape(PRESETS['125m'], 256)).fixedBytes).toBeGreaterThan(base.fixedBytes);
    expect(base.source).toBe('estimate');
  });

  it('probes enough rows to stand out of the noise', () => {
    expect(probeRows({ perRowBytes: 2 ** 30 })).toBe(1);
    expect(probeRows({ perRowBytes: 2 ** 20 })).toBe(64);
    expect(probeRows({ perRowBytes: 2 ** 24 })).toBe(4);
  });
});

describe('measuring', () => {
  it("reads this process's peak resident set, restarted by reset()", () => {
    const meter = processRssMeter();
    if (process.platform !== 'linux') {
      expect(meter).toBeNull();
      return;
    }
    expect(meter).not.toBeNull();
    const m = meter as PeakMeter;
    m.reset();
    const before = m.peak();
    const big = new Uint8Array(256 * 2 ** 20).fill(1); // touched: resident
    const after = m.peak();
    expect(big[big.length - 1]).toBe(1);
    expect(after - before).toBeGreaterThan(200 * 2 ** 20);
  });

  it('warms up, then probes at rows and twice that, resetting the meter before each', async () => {
    const events: string[] = [];
    let level = 0;
    const meter: PeakMeter = {
      what: 'scripted',
      reset: () => events.push('reset'),
      peak: () => level,
    };
    const f = await measureFootprint(
      meter,
      async (rows) => {
        events.push(`step ${rows}`);
        level = 500 + 100 * rows;
      },
      3,
    );
    expect(events).toEqual(['step 3', 'reset', 'step 3', 'reset', 'step 6']);
    expect(f?.fixedBytes).toBe(500);
    expect(f?.perRowBytes).toBe(100);
    expect(f?.source).toMatch(/measured: scripted, probe steps of 3 and 6 rows/);
  });
});
