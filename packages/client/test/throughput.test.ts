// What witnesses report besides their loss: tokens/s of the last train step and bytes/s over a sliding window,
// both from an injected clock; and that the relay link's refusals carry the code core's refusalCode reads.
import { CoordinatorError, refusalCode } from '@meshtrain/core';
import { describe, expect, it } from 'vitest';
import { BANDWIDTH_WINDOW_MS } from '../src/client/defaults.ts';
import { ThroughputMeter } from '../src/client/throughput.ts';
import { PARAM_HASH_MISMATCH, RelayRefusal } from '../src/index.ts';

describe('ThroughputMeter', () => {
  it('tokens/s is the last train step’s tokens over its wall time', () => {
    const m = new ThroughputMeter(0);
    expect(m.tokensPerSec).toBe(0);
    m.recordTrainStep(4096, 2000);
    expect(m.tokensPerSec).toBe(2048);
    m.recordTrainStep(100, 50);
    expect(m.tokensPerSec).toBe(2000);
    // A step too fast for the clock to see has no measurable rate: 0, never Infinity or NaN.
    m.recordTrainStep(100, 0);
    expect(m.tokensPerSec).toBe(0);
  });

  it('bandwidth is bytes per second since the start, then over the sliding window', () => {
    const m = new ThroughputMeter(1_000, 10_000);
    expect(m.bandwidth(1_000, 0)).toBe(0);
    expect(m.bandwidth(3_000, 4_000)).toBe(2_000); // 4000 B in 2 s since the start
    expect(m.bandwidth(11_000, 20_000)).toBe(2_000); // 20000 B in 10 s
    // At 21 s the window starts at 11 s: only what moved since the sample at 11 s counts.
    expect(m.bandwidth(21_000, 20_000)).toBe(0);
    expect(m.bandwidth(26_000, 30_000)).toBe(10_000 / 15);
  });

  it('uses the documented window by default and stays finite and non-negative', () => {
    const m = new ThroughputMeter(0);
    m.bandwidth(BANDWIDTH_WINDOW_MS, 1_000);
    // One window later, the sample at BANDWIDTH_WINDOW_MS is the oldest kept: 1000 B over one window.
    expect(m.bandwidth(2 * BANDWIDTH_WINDOW_MS, 2_000)).toBe(1_000 / (BANDWIDTH_WINDOW_MS / 1000));
    // A counter that went backwards or a clock that stood still never yields a negative or infinite rate.
    expect(m.bandwidth(2 * BANDWIDTH_WINDOW_MS + 1000, 0)).toBe(0);
    const still = new ThroughputMeter(5);
    expect(still.bandwidth(5, 1e9)).toBe(0);
  });

  it('keeps a bounded number of samples however often it is asked', () => {
    const m = new ThroughputMeter(0, 1e12, 8);
    for (let t = 1; t <= 1000; t++) m.bandwidth(t * 1000, t * 100);
    // With at most 8 samples the oldest is 7 reports back: 700 B over 7 s.
    expect(m.bandwidth(1001 * 1000, 100_100)).toBeCloseTo(100, 9);
  });
});

describe('refusals', () => {
  it('the relay link and the in-process hub refuse with codes; a message is never read', () => {
    expect(refusalCode(new RelayRefusal(PARAM_HASH_MISMATCH, 'your hash differs'))).toBe(PARAM_HASH_MISMATCH);
    expect(refusalCode(new CoordinatorError('NotAWitness', 'no'))).toBe('NotAWitness');
    expect(refusalCode(new Error('param_hash_mismatch: in the message only'))).toBeUndefined();
  });
});
