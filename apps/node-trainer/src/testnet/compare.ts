// `local-testnet --compare-honest`: the attacked run, then the same run without its adversaries — as many
// steps, the same seed and global batch (so as many tokens per step), its trusted verifiers too (probation
// paces an anchored run's start) — and both final held-out losses.
import { extraClients } from './launch.ts';
import { testnetBatch } from './run-toml.ts';
import type { TestnetResult } from './summary.ts';
import { runTestnet, type TestnetOptions } from './index.ts';

export interface HonestComparison {
  /** The honest trainers' last held-out loss in the attacked run and in the honest-only one. */
  loss_attacked: number | null;
  loss_honest: number | null;
  /** (attacked − honest) / honest; null when either loss is missing. */
  relative_difference: number | null;
  honest_completed: boolean;
  honest_steps_completed: number;
  honest_seconds: number;
}

export function compareLosses(attacked: TestnetResult, honest: TestnetResult): HonestComparison {
  const a = attacked.loss_last;
  const h = honest.loss_last;
  return {
    loss_attacked: a,
    loss_honest: h,
    relative_difference: a !== null && h !== null && h !== 0 ? (a - h) / h : null,
    honest_completed: honest.completed,
    honest_steps_completed: honest.steps_completed,
    honest_seconds: honest.seconds,
  };
}

/** Runs `o`, then its honest-only twin; the attacked run's summary with `compare_honest` added. */
export async function runWithHonestBaseline(
  o: TestnetOptions,
): Promise<TestnetResult & { compare_honest: HonestComparison }> {
  const attacked = await runTestnet(o);
  const globalBatch = testnetBatch({
    numClients: o.numClients,
    extraClients: extraClients(o.adversaries ?? []),
    ...(o.globalBatch === undefined ? {} : { globalBatch: o.globalBatch }),
  });
  o.log(`the same run without adversaries (global batch ${globalBatch})`);
  const honest = await runTestnet({ ...o, adversaries: [], globalBatch });
  return { ...attacked, compare_honest: compareLosses(attacked, honest) };
}
