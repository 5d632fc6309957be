// A run small enough for WebGPU on SwiftShader (≈0.35 GFLOP/s): the `micro` preset (~100k parameters), 32
// tokens per sequence, 2 sequences per client per step, generous round timers.
import { shortRunToml } from '../../../apps/node-trainer/src/testnet/run-toml.ts';

export function microRunToml(o: {
  runId: string;
  steps: number;
  /** Clients the first epoch waits for (init_min_clients); each trains 2 sequences per round. */
  clients: number;
  /** Seconds per epoch: epoch ends are where clients report parameter hashes and upload checkpoints. */
  epochTime?: number;
  /** SparseLoCo with this many inner steps per round (as the default run); absent: DisTrO. */
  innerSteps?: number;
}): string {
  const batch = 2 * o.clients;
  // Warmup (model load: session creation on SwiftShader takes seconds) and a round's training must fit in an epoch.
  const slow = o.epochTime === undefined ? 60 : Math.min(60, Math.floor(o.epochTime / 2));
  return shortRunToml({
    runId: o.runId,
    warmupTime: slow,
    epochTime: o.epochTime ?? 100000,
    maxRoundTrainTime: slow,
    initMinClients: o.clients,
    batch,
    steps: o.steps,
    seqLen: 32,
    lrWarmupSteps: 2,
    preset: 'micro',
    seed: 7,
    microBatchSize: 2,
    ...(o.innerSteps !== undefined ? { innerSteps: o.innerSteps } : {}),
  });
}
