import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  PRESETS,
  Rng,
  encodeCheckpoint,
  initParameters,
  ln,
  parameterCount,
  type LlamaConfig,
} from '../src/index.ts';

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const fileHash = (config: LlamaConfig, seed: number) =>
  sha(encodeCheckpoint(config, initParameters(config, seed)).safetensors);

describe('deterministic init', () => {
  it('same seed → same bytes; different seed → different bytes', () => {
    const a = fileHash(PRESETS.micro, 1);
    expect(fileHash(PRESETS.micro, 1)).toBe(a);
    expect(fileHash(PRESETS.micro, 2)).not.toBe(a);
    expect(fileHash(PRESETS.micro, 2 ** 53 - 1)).not.toBe(a);
  });

  it('pins the first outputs of the generator (a change here changes every checkpoint)', () => {
    // xoshiro128** seeded through SplitMix64(seed ^ FNV-1a-64(name)). Values recorded once from this
    // implementation; they guard against accidental changes, and tests below check the distribution.
    const r = new Rng(0, '');
    const first = [r.nextUint32(), r.nextUint32(), r.nextUint32()];
    const again = new Rng(0, '');
    expect([again.nextUint32(), again.nextUint32(), again.nextUint32()]).toEqual(first);
    expect(new Rng(0, 'x').nextUint32()).not.toBe(first[0]);
    expect(first.every((x) => Number.isInteger(x) && x >= 0 && x < 2 ** 32)).toBe(true);
  });

  it('matches HF Llama init statistics: N(0, 0.02) matrices, unit RMSNorm gains', () => {
    const config = PRESETS.tiny;
    const params = initParameters(config, 123);
    let n = 0;
    for (const [name, data] of params) {
      n += data.length;
      if (name.endsWith('norm.weight')) {
        expect(data.every((v) => v === 1)).toBe(true);
        continue;
      }
      let s = 0;
      let s2 = 0;
      for (const v of data) {
        s += v;
        s2 += v * v;
      }
      const mean = s / data.length;
      const std = Math.sqrt(s2 / data.length - mean * mean);
      // Tolerances ~5 standard errors for the smallest tensor (16k values).
      expect(Math.abs(mean)).toBeLessThan(5 * (0.02 / Math.sqrt(data.length)));
      expect(Math.abs(std - 0.02)).toBeLessThan(5 * 0.02 * Math.sqrt(2 / data.length));
    }
    expect(n).toBe(parameterCount(config));
  });

  it('keys streams by tensor name: untying lm_head leaves every other tensor unchanged', () => {
    const tied = initParameters(PRESETS.tiny, 5);
    const untied = initParameters({ ...PRESETS.tiny, tie_word_embeddings: false }, 5);
    for (const [name, data] of tied) expect(untied.get(name)).toEqual(data);
    expect(untied.get('lm_head.weight')).not.toEqual(tied.get('model.embed_tokens.weight'));
  });

  it('normal samples have the right moments and tails', () => {
    const r = new Rng(99, 'moments');
    const N = 200_000;
    let s = 0;
    let s2 = 0;
    let beyond2 = 0;
    for (let i = 0; i < N; i++) {
      const z = r.nextNormal();
      s += z;
      s2 += z * z;
      if (Math.abs(z) > 2) beyond2++;
    }
    expect(Math.abs(s / N)).toBeLessThan(0.01);
    expect(Math.abs(s2 / N - 1)).toBeLessThan(0.02);
    expect(beyond2 / N).toBeCloseTo(0.0455, 2); // P(|Z| > 2)
  });

  it('nextBelow is unbiased and in range', () => {
    const r = new Rng(3, 'below');
    const counts = new Array<number>(6).fill(0);
    for (let i = 0; i < 60_000; i++) counts[r.nextBelow(6)]! += 1;
    for (const c of counts) expect(Math.abs(c - 10_000)).toBeLessThan(500);
  });

  it('ln agrees with Math.log to within a few ulp over the whole positive range', () => {
    fc.assert(
      fc.property(fc.double({ min: Number.MIN_VALUE, max: Number.MAX_VALUE, noNaN: true }), (x) => {
        const want = Math.log(x);
        expect(Math.abs(ln(x) - want)).toBeLessThanOrEqual(4 * Number.EPSILON * Math.max(1, Math.abs(want)));
      }),
      { numRuns: 2000 },
    );
  });
});
