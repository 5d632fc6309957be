// A SparseLoCo peer's private state (docs/protocol.md "SparseLoCo rounds"): the local parameters θ_local the
// inner steps move, the error-feedback buffer and AdamW's moments. None of it is ever sent or compared; it
// lives on the DisTrO backend's device beside the replica's parameters and persists across rounds and
// epochs, like DisTrO's momentum. New parameters (a checkpoint installed) start it afresh at zero, as a
// joiner gets no optimizer state; so does a cold-start epoch.
import type { SparseLoCoOptimizer } from '@meshtrain/core';
import {
  createAdamWState,
  releaseAdamWState,
  type AdamWState,
  type DistroBackend,
  type DistroTensor,
  type InnerStepOptions,
} from '@meshtrain/distro';

/** The run's inner AdamW settings at learning rate `lr`: what a trainer and its verifiers step with alike. */
export function innerStepOptions(config: SparseLoCoOptimizer, lr: number): InnerStepOptions {
  return {
    lr,
    beta1: config.betas[0],
    beta2: config.betas[1],
    eps: config.eps,
    weightDecay: config.weight_decay,
    clipGradNorm: config.clip_grad_norm,
  };
}

export interface SparseLoCoTensors {
  readonly local: readonly DistroTensor[];
  readonly ef: readonly DistroTensor[];
  readonly adam: AdamWState;
}

export class SparseLoCoState {
  private readonly be: DistroBackend;
  private tensors: SparseLoCoTensors | null = null;
  /** The replica parameter list the tensors were made for (a new list after every install). */
  private boundTo: readonly DistroTensor[] | null = null;

  constructor(be: DistroBackend) {
    this.be = be;
  }

  /** The state for the replica's parameters `params`: zeros the first time, and after each new install. */
  for(params: readonly DistroTensor[]): SparseLoCoTensors {
    if (this.boundTo !== params || !this.tensors) {
      this.release();
      const local = params.map((p) => this.be.tensor(p.shape));
      this.tensors = {
        local,
        ef: params.map((p) => this.be.tensor(p.shape)),
        adam: createAdamWState(this.be, local),
      };
      this.boundTo = params;
    }
    return this.tensors;
  }

  /** Forgets everything (cold start): the next round starts from zero error feedback and fresh moments. */
  reset(): void {
    this.release();
  }

  release(): void {
    const t = this.tensors;
    if (!t) return;
    for (const x of [...t.local, ...t.ef]) this.be.release(x);
    releaseAdamWState(this.be, t.adam);
    this.tensors = null;
    this.boundTo = null;
  }
}
