// Single-process AdamW for bench:quality: node-trainer baseline's loop (runBaseline: the ONNX train step, its
// AdamW, clipping and cosine schedule, its held-out evaluation). Fed the global batches a network run trains,
// both methods see the same samples in the same order; with `shuffled` it is `node-trainer baseline` as is
// (its own seeded shuffle of the training split), for comparison with that command's figures.
import type { LlamaConfig, Parameters, SampleOrder } from '@meshtrain/model';
import {
  runBaseline,
  TRAIN_DEFAULTS,
  type BaselineOptions,
  type BaselineResult,
} from '../../apps/node-trainer/src/commands/baseline.ts';
import type { Progress } from '../../apps/node-trainer/src/progress/index.ts';

export type AdamWOrder =
  /**
   * Run sample ids of each step's global batch, read through `order`: the same SampleOrder the peers' data
   * source applies (corpus: id mod n; seeded: the pass's permutation), so AdamW sees exactly their samples.
   */
  | { kind: 'batches'; batches: readonly (readonly number[])[]; order: SampleOrder }
  /** node-trainer baseline's order: a permutation of the training split seeded by `seed` (also the init's). */
  | { kind: 'shuffled'; steps: number; batchSize: number };

export interface AdamWRunOptions {
  preset: string;
  config: LlamaConfig;
  dataDir: string;
  order: AdamWOrder;
  seqLen: number;
  lr: number;
  warmupSteps: number;
  /** Init seed (and the shuffle's). */
  seed: number;
  evalEvery: number;
  /** Held-out batches (of the global batch's size) per evaluation. */
  evalBatches: number;
  cpu: BaselineOptions['cpu'];
  progress?: Progress;
}

export function adamwSettings(
  lr: number,
  warmupSteps: number,
  steps: number,
): Record<string, number | string> {
  return {
    optimizer: 'AdamW',
    lr_schedule: `cosine, peak ${lr}, ${warmupSteps} warmup steps, floor ${TRAIN_DEFAULTS.lrFloor} × peak at step ${steps}`,
    beta1: TRAIN_DEFAULTS.beta1,
    beta2: TRAIN_DEFAULTS.beta2,
    eps: TRAIN_DEFAULTS.eps,
    weight_decay: TRAIN_DEFAULTS.weightDecay,
    grad_clip: 1,
  };
}

/** The training-split samples of each step AdamW trains, for runBaseline's `batchOrder`. */
export function batchOrderOf(order: Extract<AdamWOrder, { kind: 'batches' }>): (step: number) => number[] {
  return (step) => {
    const ids = order.batches[step];
    if (!ids) throw new RangeError(`no batch for step ${step} (${order.batches.length} steps)`);
    return ids.map((id) => order.order.at(id));
  };
}

export async function runAdamW(o: AdamWRunOptions): Promise<{ result: BaselineResult; params: Parameters }> {
  const order = o.order;
  const steps = order.kind === 'batches' ? order.batches.length : order.steps;
  const batchSize = order.kind === 'batches' ? (order.batches[0]?.length ?? 0) : order.batchSize;
  if (steps === 0 || batchSize === 0) throw new Error('AdamW needs at least one batch');
  return runBaseline(
    {
      ...TRAIN_DEFAULTS,
      lr: o.lr,
      warmupSteps: o.warmupSteps,
      preset: o.preset,
      config: o.config,
      device: 'cpu',
      steps,
      batchSize,
      seqLen: o.seqLen,
      gradClip: 1.0,
      seed: o.seed,
      evalEvery: o.evalEvery,
      evalBatches: o.evalBatches,
      cpu: o.cpu,
      ...(order.kind === 'batches' ? { batchOrder: batchOrderOf(order) } : {}),
    },
    o.dataDir,
    () => {},
    o.progress,
  );
}
