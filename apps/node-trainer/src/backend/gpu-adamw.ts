// AdamW with the whole step on the resident GPU (`baseline --device webgpu`, and the GPU benchmark's whole
// step): the train-step graph in onnxruntime-web, clipping by global norm and the update in DisTrO's WGSL
// (clipByGlobalNorm, adamw) on the same device. Per step only token ids go up and the loss and one norm's
// partial sums come down. The update is @meshtrain/model's AdamW (decay on matrices, not on RMSNorm gains) in
// float32 kernels: close to the host's, not bit-identical (a single peer's optimizer, nothing to agree on).
import type { DistroTensor } from '@meshtrain/distro';
import { adamwScalars, clipByGlobalNorm } from '@meshtrain/distro';
import { AdamW } from '@meshtrain/model';
import type { NodeGpu } from './gpu.ts';

export interface ResidentAdamWOptions {
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** Global-norm clip (torch's clip_grad_norm_); 0 or Infinity: none. */
  gradClip: number;
}

export class ResidentAdamW {
  private readonly gpu: Pick<NodeGpu, 'backend' | 'distro'>;
  private readonly o: ResidentAdamWOptions;
  private readonly names: string[];
  private readonly params: Map<string, DistroTensor>;
  private readonly m = new Map<string, DistroTensor>();
  private readonly v = new Map<string, DistroTensor>();
  private readonly decays: Set<string>;
  private t = 0;

  constructor(
    gpu: Pick<NodeGpu, 'backend' | 'distro'>,
    init: Map<string, Float32Array>,
    o: ResidentAdamWOptions,
  ) {
    this.gpu = gpu;
    this.o = o;
    this.names = [...init.keys()];
    // Which tensors get weight decay: the host AdamW's rule, asked of it over one-value stand-ins.
    const rule = new AdamW(new Map(this.names.map((n) => [n, new Float32Array(1)])));
    this.decays = new Set(this.names.filter((n) => rule.decays(n)));
    const d = gpu.distro;
    this.params = new Map(this.names.map((n) => [n, d.tensor(this.shapeOf(n), init.get(n))]));
    for (const n of this.names) {
      this.m.set(n, d.tensor(this.shapeOf(n)));
      this.v.set(n, d.tensor(this.shapeOf(n)));
    }
  }

  private shapeOf(name: string): number[] {
    const s = this.gpu.backend.shapes.get(name);
    if (!s) throw new Error(`the model has no parameter ${name}`);
    return s;
  }

  /** One AdamW step at learning rate `lr` on `rows` sequences (at most the backend's maxRows); the loss. */
  async step(tokens: Int32Array, rows: number, lr: number): Promise<number> {
    const { backend, distro: d } = this.gpu;
    await backend.loadParamTensors(this.params);
    const out = await backend.trainStepResident(tokens, rows);
    try {
      if (this.o.gradClip > 0 && Number.isFinite(this.o.gradClip))
        await clipByGlobalNorm(
          d,
          this.names.map((n) => out.grads.get(n) as DistroTensor),
          this.o.gradClip,
        );
      this.t += 1;
      const common = { lr, beta1: this.o.beta1, beta2: this.o.beta2, eps: this.o.eps };
      const decayed = adamwScalars({ ...common, weightDecay: this.o.weightDecay }, this.t);
      const plain = adamwScalars({ ...common, weightDecay: 0 }, this.t);
      for (const n of this.names)
        d.adamw(
          this.params.get(n) as DistroTensor,
          out.grads.get(n) as DistroTensor,
          this.m.get(n) as DistroTensor,
          this.v.get(n) as DistroTensor,
          this.decays.has(n) ? decayed : plain,
        );
    } finally {
      // Queue order: the update reads the gradients before the next step can overwrite their buffers.
      out.release();
    }
    return out.loss;
  }

  /** The parameters as they are now, read back from the GPU. */
  async parameters(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const n of this.names) out.set(n, await this.gpu.distro.read(this.params.get(n) as DistroTensor));
    return out;
  }

  release(): void {
    for (const t of [...this.params.values(), ...this.m.values(), ...this.v.values()])
      this.gpu.distro.release(t);
  }
}
