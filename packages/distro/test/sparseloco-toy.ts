// A toy SparseLoCo run shared by the CPU and WGSL tests: every peer pulls its parameters towards its own
// (noisy copy of a shared) target with a few inner AdamW steps, sends its quantised top-k, and every replica applies the outer step.
// The shared optimum is the mean of the targets, so the distance to it measures progress.
import {
  createAdamWState,
  innerAdamWStep,
  outerStep,
  resetLocal,
  sparseLoCoSend,
  type DistroBackend,
  type QuantTensorResult,
  type SparseDomain,
} from '../src/index.ts';
import { rng } from './rng.ts';

/** One peer per backend (backends may differ: CPU and WGSL peers in one run). */
export async function toyRounds(
  backends: DistroBackend[],
  domain: SparseDomain,
  rounds: number,
  opts = { lr: 0.02, beta: 0.9, topk: 32 },
): Promise<{ loss: number[]; replicas: Float32Array[] }> {
  const rand = rng(5);
  const randn = (k: number): Float32Array =>
    Float32Array.from({ length: k }, () => rand() + rand() + rand() - 1.5);
  const shape = [32, 48];
  const n = 32 * 48;
  const init = randn(n);
  // A shared target plus a little noise per peer, so each peer's own data points roughly the same way.
  const shared = randn(n);
  const targets = backends.map(() => randn(n).map((x, i) => shared[i]! + 0.1 * x));
  const optimum = Float64Array.from(
    { length: n },
    (_, i) => targets.reduce((s, t) => s + t[i]!, 0) / targets.length,
  );
  const peers = backends.map((be) => {
    const theta = [be.tensor(shape, init)];
    const local = [be.tensor(shape, init)];
    return {
      be,
      theta,
      local,
      ef: [be.tensor(shape)],
      grad: [be.tensor(shape)],
      adam: createAdamWState(be, local),
    };
  });
  const loss: number[] = [];
  const distance = (x: Float32Array): number => x.reduce((s, v, i) => s + (v - optimum[i]!) ** 2, 0) / n;
  loss.push(distance(init));
  for (let round = 0; round < rounds; round++) {
    const sent: QuantTensorResult[][] = [];
    for (const [i, p] of peers.entries()) {
      for (let h = 0; h < 4; h++) {
        const x = await p.be.read(p.local[0]!);
        p.be.write(
          p.grad[0]!,
          x.map((v, j) => v - targets[i]![j]!),
        );
        await innerAdamWStep(p.be, p.local, p.grad, p.adam, { lr: opts.lr, weightDecay: 0 });
      }
      sent.push(
        await sparseLoCoSend(p.be, p.theta, p.local, p.ef, {
          beta: opts.beta,
          topk: opts.topk,
          bits: 2,
          domain,
        }),
      );
    }
    for (const p of peers) {
      outerStep(p.be, p.theta, sent, { lr: 1, domain });
      resetLocal(p.be, p.local, p.theta);
      await p.be.finish();
    }
    loss.push(distance(await peers[0]!.be.read(peers[0]!.theta[0]!)));
  }
  return { loss, replicas: await Promise.all(peers.map((p) => p.be.read(p.theta[0]!))) };
}
