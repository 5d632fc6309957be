// The colluders' fabricated results are what the relay admits: they fit core's ResultSpec for the run (every
// optimizer's value kind), so only verification can tell them from work; and they differ from one another.
import {
  checkResultShape,
  decodeSignedResult,
  runResultSpec,
  type Optimizer,
  type ResultSpec,
} from '@meshtrain/core';
import { describe, expect, it } from 'vitest';
import { fabricatedResult, rng, sealed } from '../src/testing.ts';

const PARAMS = [
  { name: 'embed', shape: [96, 32] },
  { name: 'norm', shape: [32] },
  { name: 'proj', shape: [2, 64, 48] },
];

const OPTIMIZERS: Record<string, Optimizer> = {
  'DisTrO 1-bit': {
    Distro: {
      clip_grad_norm: 1,
      compression_decay: 0.999,
      compression_chunk: 16,
      compression_topk: 4,
      quantize_1bit: true,
    },
  },
  'DisTrO f32': {
    Distro: {
      clip_grad_norm: 1,
      compression_decay: 0.999,
      compression_chunk: 16,
      compression_topk: 4,
      quantize_1bit: false,
    },
  },
  'SparseLoCo 2-bit': {
    SparseLoCo: {
      inner_steps: 2,
      betas: [0.9, 0.95],
      eps: 1e-8,
      weight_decay: 0,
      clip_grad_norm: 1,
      error_decay: 0.95,
      compression_topk: 4,
      compression_chunk: 16,
      quantization_bits: 2,
      domain: 'dct',
      outer_lr: 1,
    },
  },
} as Record<string, Optimizer>;

const head = { runId: 'r', step: 3, batch: { start: 8, end: 11 }, trainerNonce: 1 };

describe('fabricatedResult', () => {
  for (const [name, optimizer] of Object.entries(OPTIMIZERS))
    it(`fits the run's result shape (${name}, with and without verification)`, () => {
      for (const percent of [0, 25]) {
        const spec = runResultSpec(PARAMS, optimizer, percent) as ResultSpec;
        const r = fabricatedResult(spec, head, rng(5));
        expect(checkResultShape(r, spec)).toBeNull();
        expect(r.fingerprint?.length ?? 0).toBe(spec.fingerprintBytes);
        // Survives the wire as signed by a key.
        const { frame } = sealed(new Uint8Array(32).fill(7), r);
        expect(checkResultShape(decodeSignedResult(frame).result, spec)).toBeNull();
      }
    });

  it('draws new signs for every result', () => {
    const spec = runResultSpec(PARAMS, OPTIMIZERS['DisTrO 1-bit'] as Optimizer, 25) as ResultSpec;
    const random = rng(9);
    const a = fabricatedResult(spec, head, random);
    const b = fabricatedResult(spec, head, random);
    const bits = (x: typeof a) =>
      Buffer.from((x.tensors[0]!.values as { bits: Uint8Array }).bits).toString('hex');
    expect(bits(a)).not.toBe(bits(b));
  });
});
