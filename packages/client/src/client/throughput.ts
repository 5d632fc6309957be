// The figures a witness reports besides its loss (WitnessMetadata): tokens per second of this client's own
// train steps, and the bytes per second it moved. Both are measured, never estimated; a figure that cannot be
// measured yet is 0, and every figure is finite and non-negative (the wire carries it as f32).
import { BANDWIDTH_MAX_SAMPLES, BANDWIDTH_WINDOW_MS } from './defaults.ts';

/** `x` if it is a finite non-negative number, else 0. */
function rate(x: number): number {
  return Number.isFinite(x) && x > 0 ? x : 0;
}

export class ThroughputMeter {
  private lastTokensPerSec = 0;
  /** (time ms, cumulative bytes) samples, oldest first; the first is at or before the window's start. */
  private readonly samples: { t: number; bytes: number }[] = [];
  private readonly windowMs: number;
  private readonly maxSamples: number;

  /** `start`: the time counting began (bytes 0 then). */
  constructor(start: number, windowMs = BANDWIDTH_WINDOW_MS, maxSamples = BANDWIDTH_MAX_SAMPLES) {
    this.windowMs = windowMs;
    this.maxSamples = Math.max(2, maxSamples);
    this.samples.push({ t: start, bytes: 0 });
  }

  /** A train step: `tokens` trained on in `ms` milliseconds of wall time. */
  recordTrainStep(tokens: number, ms: number): void {
    this.lastTokensPerSec = ms > 0 ? rate((tokens * 1000) / ms) : 0;
  }

  /** Tokens per second of the last train step (0 before the first). */
  get tokensPerSec(): number {
    return this.lastTokensPerSec;
  }

  /**
   * Bytes per second over about the last window: `totalBytes` is the cumulative count at `now`. Records the
   * sample, then compares it with the oldest one kept (the newest at or before the window's start).
   */
  bandwidth(now: number, totalBytes: number): number {
    const s = this.samples;
    s.push({ t: now, bytes: totalBytes });
    while (s.length > 2 && (s[1] as { t: number }).t <= now - this.windowMs) s.shift();
    while (s.length > this.maxSamples) s.shift();
    const first = s[0] as { t: number; bytes: number };
    const seconds = (now - first.t) / 1000;
    return seconds > 0 ? rate((totalBytes - first.bytes) / seconds) : 0;
  }
}
