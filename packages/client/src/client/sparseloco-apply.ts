// SparseLoCo's apply (docs/protocol.md "SparseLoCo rounds"): one round's accepted results, in batch-id order,
// through packages/distro's exact outer step, θ ← RN_f32(θ − outer_lr · aggregate), bit-identical on every
// device. The outer lr is the run's constant (the schedule drives the inner steps only), so a replay after a
// confirmed cheat re-applies a round exactly as it was first applied.
import type { DistroResult, SparseLoCoOptimizer } from '@meshtrain/core';
import {
  checkQuantResult,
  outerStep,
  tensorLayout,
  type DistroBackend,
  type DistroTensor,
  type QuantTensorResult,
} from '@meshtrain/distro';
import { quantFromWire } from '../convert.ts';
import { ResyncNeeded } from './errors.ts';

export function applySparseLoCo(
  be: DistroBackend,
  params: readonly DistroTensor[],
  results: readonly (readonly DistroResult[])[],
  config: SparseLoCoOptimizer,
): void {
  const quant = results.map((r) => r.map(quantFromWire));
  checkAll(be, params, quant, config);
  outerStep(be, params, quant, { lr: config.outer_lr, domain: config.domain });
}

/**
 * Every result against every tensor's layout and the run's code width before any parameter changes: the host
 * admitted only fitting results (core's checkResultShape), so a misfit here means this replica cannot apply
 * what the others apply, and must not apply part of it.
 */
function checkAll(
  be: DistroBackend,
  params: readonly DistroTensor[],
  results: readonly (readonly QuantTensorResult[])[],
  config: SparseLoCoOptimizer,
): void {
  try {
    const layouts = params.map((p) => tensorLayout(p.shape, be.chunk));
    results.forEach((r, i) => {
      if (r.length !== params.length) throw new Error(`${r.length} tensors for ${params.length} parameters`);
      r.forEach((t, j) => {
        if (t.bits !== config.quantization_bits)
          throw new Error(`${t.bits}-bit codes in a ${config.quantization_bits}-bit run`);
        checkQuantResult(t, layouts[j]!, `result ${i} tensor ${j}`);
      });
    });
  } catch (e) {
    throw new ResyncNeeded(`an accepted SparseLoCo result cannot be applied: ${(e as Error).message}`);
  }
}
