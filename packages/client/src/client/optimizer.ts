// Which optimizer a client runs: the run's `[model.LLM.optimizer]` table, checked against the DisTrO backend
// it was given (both optimizers cut tensors into chunks of the backend's size), with SparseLoCo's local state.
import type { DistroOptimizer, RunConfig, SparseLoCoOptimizer } from '@meshtrain/core';
import type { DistroBackend } from '@meshtrain/distro';
import { SparseLoCoState } from './sparseloco-state.ts';

export type ClientOptimizer =
  | { kind: 'distro'; config: DistroOptimizer }
  | { kind: 'sparseloco'; config: SparseLoCoOptimizer; state: SparseLoCoState };

export function clientOptimizerOf(run: RunConfig, distro: DistroBackend): ClientOptimizer {
  const o = run.model.LLM.optimizer;
  const opt: ClientOptimizer | null =
    'Distro' in o
      ? { kind: 'distro', config: o.Distro }
      : 'SparseLoCo' in o
        ? { kind: 'sparseloco', config: o.SparseLoCo, state: new SparseLoCoState(distro) }
        : null;
  if (!opt)
    throw new Error(
      'this client trains DisTrO or SparseLoCo runs (optimizer.Distro or optimizer.SparseLoCo)',
    );
  if (distro.chunk !== opt.config.compression_chunk)
    throw new Error(
      `DisTrO backend chunk ${distro.chunk} ≠ run compression_chunk ${opt.config.compression_chunk}`,
    );
  return opt;
}

/** The DisTrO table of a DisTrO run (the train and apply steps that only DisTrO has). */
export function distroConfigOf(opt: ClientOptimizer): DistroOptimizer {
  if (opt.kind !== 'distro') throw new Error(`a ${opt.kind} run has no DisTrO settings`);
  return opt.config;
}
