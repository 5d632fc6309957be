// SparseLoCo results through core's wire codec (valueKind 2): what one peer sends per round for the tiny
// preset at the measured setting (chunk 64, top-64 of every 4 096-entry block, 2 bits), the bytes per
// parameter against fp32 gradients, and a lossless round trip of real quantised results.
import {
  decodeTrainingResult,
  encodedDistroResultSize,
  encodeTrainingResult,
  indexWidth,
  type DistroResult,
  type TrainingResult,
} from '@meshtrain/core';
import { parameterSpecs, PRESETS } from '@meshtrain/model';
import { describe, expect, it } from 'vitest';
import {
  createCpuBackend,
  dequantizeResult,
  quantizeResult,
  tensorLayout,
  type QuantTensorResult,
} from '../src/index.ts';
import { rng } from './rng.ts';

/** The field-for-field mapping a client uses (indices narrowed as Psyche does, values as valueKind 2). */
function toWire(q: QuantTensorResult): DistroResult {
  const w = indexWidth(q.totalk);
  const indices =
    w === 1
      ? Uint8Array.from(q.indices)
      : w === 2
        ? Uint16Array.from(q.indices)
        : Uint32Array.from(q.indices);
  return {
    xshape: [...q.xshape],
    totalk: q.totalk,
    indices,
    values: { kind: 'quant', bits: q.bits, scales: q.scales, codes: q.codes },
  };
}

function fromWire(d: DistroResult): QuantTensorResult {
  if (d.values.kind !== 'quant') throw new Error('quantised values expected');
  const chunks = d.xshape.reduce((a, b) => a * b, 1) / d.totalk;
  return {
    xshape: d.xshape,
    totalk: d.totalk,
    k: d.indices.length / chunks,
    indices: Uint32Array.from(d.indices),
    bits: d.values.bits,
    scales: d.values.scales,
    codes: d.values.codes,
  };
}

const frame = (tensors: DistroResult[]): TrainingResult => ({
  runId: 'sparseloco',
  step: 1000,
  batch: { start: 123_456, end: 123_471 },
  trainerNonce: 1000,
  tensors,
});

describe('SparseLoCo on the wire', () => {
  it('tiny preset, top-64 per 4 096-block at 2 bits: 152 B per block, ~103× below fp32 per round', async () => {
    const rand = rng(3);
    const be = createCpuBackend({ chunk: 64 });
    const specs = parameterSpecs(PRESETS.tiny);
    const sent: QuantTensorResult[] = [];
    for (const s of specs) {
      const n = s.shape.reduce((a, b) => a * b, 1);
      const ef = be.tensor(
        s.shape,
        Float32Array.from({ length: n }, () => rand() - 0.5),
      );
      sent.push(quantizeResult(await be.selectTopk(ef, 64, 'raw'), 2));
    }
    const bytes = encodeTrainingResult(frame(sent.map(toWire))).length;
    const empty = encodeTrainingResult(frame([])).length;
    const params = specs.reduce((n, s) => n + s.shape.reduce((a, b) => a * b, 1), 0);
    expect(params).toBe(1_082_496);
    // Every tensor's bytes are exactly what encodedDistroResultSize predicts.
    expect(bytes - empty).toBe(
      sent.reduce((n, q) => n + encodedDistroResultSize(q.xshape, q.k, 'quant', q.bits), 0),
    );
    // A 64×64 block: 64 u16 indices (128 B) + 64 2-bit codes (16 B) + 2 f32 scales (8 B).
    // [512, 128]: 16 blocks, plus 10 B of header (rank, 4 dims, totalk as 2-byte varint, k, kind, bits).
    const l = tensorLayout([512, 128], 64);
    expect(encodedDistroResultSize(l.xshape, 64, 'quant', 2)).toBe(16 * 152 + 10);
    const perParam = bytes / params;
    const ratio = (4 * params) / bytes;
    console.log(
      `sparseloco wire: tiny, top-64/4096, 2-bit: ${bytes} B per round (${perParam.toFixed(4)} B/param), ${ratio.toFixed(1)}× below fp32 per round, ${(ratio * 10).toFixed(0)}× per step with H = 10`,
    );
    expect(perParam).toBeGreaterThan(152 / 4096);
    expect(perParam).toBeLessThan(0.04); // norms (1-D, u8 indices, every entry sent) and headers add ~5%
    expect(ratio).toBeGreaterThan(100);
  });

  it('round-trips real quantised results losslessly (every bit width, both domains)', async () => {
    const rand = rng(4);
    const be = createCpuBackend({ chunk: 16 });
    const shapes = [[48, 40], [300], [2, 16, 24]];
    for (let bits = 1; bits <= 8; bits++)
      for (const domain of ['raw', 'dct'] as const) {
        const sent = await Promise.all(
          shapes.map(async (shape) => {
            const n = shape.reduce((a, b) => a * b, 1);
            const t = be.tensor(
              shape,
              Float32Array.from({ length: n }, () => (rand() - 0.5) * 1e-3),
            );
            return quantizeResult(await be.selectTopk(t, 1 + Math.floor(rand() * 20), domain), bits);
          }),
        );
        const back = decodeTrainingResult(encodeTrainingResult(frame(sent.map(toWire)))).tensors.map(
          fromWire,
        );
        back.forEach((q, i) => {
          expect(q).toEqual({ ...sent[i]!, xshape: [...sent[i]!.xshape] });
          expect(dequantizeResult(q).values).toEqual(dequantizeResult(sent[i]!).values);
        });
      }
  });
});
