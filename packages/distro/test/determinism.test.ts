// The numerics contract (docs/architecture.md "Numerics contract"): after the same accepted results, every
// replica holds bit-identical parameters whatever the device. 200 rounds of random multi-peer results on the
// 20m preset's tensors; the SHA-256 of all parameters must match between the CPU reference and WGSL
// (SwiftShader in CI).
//
// Scaling, to fit CI (2 cores, software GPU at ~1 µs per parameter update): every round applies results to
// a subset of the 75 tensors: the two 8.2 M-parameter matrices (embed_tokens, lm_head) once each (rounds 0
// and 100), and in every round two of the 73 others: one in rotation, so all are covered at least twice, and
// one at random. That is ~54 M parameter updates instead of 200 × 20 M (65–130 s on a shared 2-core machine). Rounds use 1-4 peers, k ∈ {1,2,4,8},
// 1-bit or float values, random lr and weight decay. A divergence in any update would persist to the hash.
import { createHash } from 'node:crypto';
import { parameterSpecs, PRESETS } from '@meshtrain/model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  applyResults,
  createCpuBackend,
  createWebGpuBackend,
  tensorLayout,
  type DistroBackend,
  type DistroTensor,
  type TensorResult,
} from '../src/index.ts';
import { dawnDevice, type Dawn } from '../src/node/index.ts';
import { rng } from './rng.ts';

const ROUNDS = Number(process.env.MESHTRAIN_DETERMINISM_ROUNDS ?? 200);
const CHUNK = 64;

let dawn: Dawn | undefined;
beforeAll(async () => {
  dawn = await dawnDevice();
});
afterAll(() => dawn?.device.destroy());

/** One peer's random result for a tensor: k distinct indices per chunk, values of varied kinds. */
function randomResult(
  shape: readonly number[],
  k: number,
  quantized: boolean,
  rand: () => number,
): TensorResult {
  const l = tensorLayout(shape, CHUNK);
  const kk = Math.min(k, l.totalk);
  const indices = new Uint32Array(l.blocks * kk);
  const values = new Float32Array(l.blocks * kk);
  const scale = 10 ** (-6 + 6 * rand());
  for (let b = 0; b < l.blocks; b++) {
    const seen = new Set<number>();
    for (let j = 0; j < kk; j++) {
      let e = Math.floor(rand() * l.totalk);
      while (seen.has(e)) e = (e + 1) % l.totalk;
      seen.add(e);
      indices[b * kk + j] = e;
      const r = rand();
      // Mostly Gaussian-ish magnitudes; some exact zeros, −0 and repeated values to exercise the edges.
      values[b * kk + j] = quantized
        ? r < 0.5
          ? -1
          : 1
        : r < 0.02
          ? 0
          : r < 0.03
            ? -0
            : r < 0.06
              ? scale
              : (rand() - 0.5) * scale * (1 + 10 * rand() ** 4);
    }
  }
  return { xshape: l.xshape, totalk: l.totalk, k: kk, indices, values, quantized };
}

async function digest(be: DistroBackend, params: DistroTensor[]): Promise<string> {
  const h = createHash('sha256');
  for (const p of params) {
    const v = await be.read(p);
    h.update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  }
  return h.digest('hex');
}

describe.runIf(process.env.MESHTRAIN_SKIP_WEBGPU !== '1')('determinism across backends', () => {
  it(
    `${ROUNDS} rounds on the 20m shapes give identical parameter hashes on CPU and WGSL`,
    { timeout: 600_000 },
    async () => {
      if (!dawn)
        throw new Error(
          'no WebGPU adapter (install chromium for SwiftShader, or set MESHTRAIN_SKIP_WEBGPU=1)',
        );
      const specs = parameterSpecs(PRESETS['20m']);
      const cpu = createCpuBackend({ chunk: CHUNK });
      const gpu = createWebGpuBackend(dawn.device, { chunk: CHUNK });
      const init = rng(7);
      const cpuParams: DistroTensor[] = [];
      const gpuParams: DistroTensor[] = [];
      for (const s of specs) {
        const n = s.shape.reduce((a, b) => a * b, 1);
        const data = Float32Array.from({ length: n }, () => (init() - 0.5) * 0.04);
        cpuParams.push(cpu.tensor(s.shape, data));
        gpuParams.push(gpu.tensor(s.shape, data));
      }
      const before = await digest(cpu, cpuParams);
      const big = specs.flatMap((s, i) => (s.shape[0] === PRESETS['20m'].vocab_size ? [i] : []));
      const others = specs.flatMap((s, i) => (big.includes(i) ? [] : [i]));
      expect(big).toHaveLength(2);
      const rand = rng(8);
      const timings = { cpu: 0, gpu: 0, params: 0 };
      for (let round = 0; round < ROUNDS; round++) {
        const chosen = [others[round % others.length]!, others[Math.floor(rand() * others.length)]!];
        if (round === 0) chosen.push(big[0]!);
        if (round === 100 % ROUNDS) chosen.push(big[1]!);
        const tensors = [...new Set(chosen)].sort((a, b) => a - b);
        const peers = 1 + Math.floor(rand() * 4);
        const k = [1, 2, 4, 8][Math.floor(rand() * 4)]!;
        const quantized = rand() < 0.5;
        const results = Array.from({ length: peers }, () =>
          tensors.map((i) => randomResult(specs[i]!.shape, k, quantized, rand)),
        );
        const lr = 10 ** (-5 + 3 * rand());
        const weightDecay = rand() < 0.5 ? 0 : rand() * 0.2;
        let t = performance.now();
        applyResults(
          cpu,
          tensors.map((i) => cpuParams[i]!),
          results,
          { lr, weightDecay },
        );
        timings.cpu += performance.now() - t;
        t = performance.now();
        applyResults(
          gpu,
          tensors.map((i) => gpuParams[i]!),
          results,
          { lr, weightDecay },
        );
        await gpu.finish();
        timings.gpu += performance.now() - t;
        timings.params += tensors.reduce((n, i) => n + cpuParams[i]!.size, 0);
      }
      const [hc, hg] = [await digest(cpu, cpuParams), await digest(gpu, gpuParams)];
      console.log(
        `determinism: ${ROUNDS} rounds, ${(timings.params / 1e6).toFixed(1)} M parameter updates; apply CPU ${(timings.cpu / 1000).toFixed(1)} s, WGSL ${(timings.gpu / 1000).toFixed(1)} s (${dawn.description}); sha256 ${hc}`,
      );
      expect(hc).not.toBe(before);
      expect(hg).toBe(hc);
      gpu.destroy();
    },
  );
});
