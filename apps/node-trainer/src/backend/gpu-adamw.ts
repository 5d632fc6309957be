// AdamW with the whole step on the resident GPU (`baseline --device webgpu`, and the GPU benchmark's whole
// step): the train-step graph in onnxruntime-web, clipping by global norm and the update in DisTrO's WGSL
// (clipByGlobalNorm, adamw) on the same device. Per step only token ids go up and the loss and one norm's
// partial sums come down. The update is @meshtrain/model's AdamW (decay on matrices, not on RMSNorm gains) in
// float32 kernels: close to the host's, not bit-identical (a single peer's optimizer, nothing to agree on).
import type { DistroTensor } from '@meshtrain/distro';
import { adamwScalars, clipByGlobalNorm } from '@meshtrain/distro';
import { AdamW } from '@meshtrain/model';
import { residentParameters, type NodeGpu } from './gpu.ts';

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
  private readonly sum = new Map<string, DistroTensor>();
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
    this.params = residentParameters(gpu, init);
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

  /**
   * One AdamW step at learning rate `lr` on `rows` sequences; the loss. Above the backend's maxRows the rows
   * are trained as equal micro-batches of maxRows (which must divide `rows`), whose gradients are averaged on
   * the GPU before the update, like the host baseline's.
   */
  async step(tokens: Int32Array, rows: number, lr: number): Promise<number> {
    const { backend, distro: d } = this.gpu;
    const micro = Math.min(rows, backend.maxRows);
    if (rows % micro !== 0)
      throw new Error(`${rows} rows do not split into micro-batches of ${micro} (the backend's maxRows)`);
    await backend.loadParamTensors(this.params);
    if (micro === rows) {
      const out = await backend.trainStepResident(tokens, rows);
      try {
        await this.update(out.grads, lr);
      } finally {
        // Queue order: the update reads the gradients before the next step can overwrite their buffers.
        out.release();
      }
      return out.loss;
    }
    const parts = rows / micro;
    const perRow = tokens.length / rows;
    const sum = this.accumulator();
    let loss = 0;
    for (let i = 0; i < parts; i++) {
      const out = await backend.trainStepResident(
        tokens.subarray(i * micro * perRow, (i + 1) * micro * perRow),
        micro,
      );
      // sum = (i == 0 ? 0 : sum) + grad / parts: the mean of equal micro-batches' mean gradients. (Decay 0
      // multiplies the old sum by zero: a non-finite one would survive, but it ends the run at its loss first.)
      for (const n of this.names)
        d.momentum(sum.get(n) as DistroTensor, out.grads.get(n) as DistroTensor, i === 0 ? 0 : 1, 1 / parts);
      out.release();
      loss += out.loss / parts;
    }
    await this.update(sum, lr);
    return loss;
  }

  /** The gradient sum of micro-batched steps, made on first use. */
  private accumulator(): Map<string, DistroTensor> {
    if (this.sum.size === 0)
      for (const n of this.names) this.sum.set(n, this.gpu.distro.tensor(this.shapeOf(n)));
    return this.sum;
  }

  /** Clipping by global norm, then the AdamW update of every parameter from `grads`. */
  private async update(grads: ReadonlyMap<string, DistroTensor>, lr: number): Promise<void> {
    const d = this.gpu.distro;
    const g = this.names.map((n) => grads.get(n) as DistroTensor);
    if (this.o.gradClip > 0 && Number.isFinite(this.o.gradClip))
      await clipByGlobalNorm(d, g, this.o.gradClip);
    this.t += 1;
    const common = { lr, beta1: this.o.beta1, beta2: this.o.beta2, eps: this.o.eps };
    const decayed = adamwScalars({ ...common, weightDecay: this.o.weightDecay }, this.t);
    const plain = adamwScalars({ ...common, weightDecay: 0 }, this.t);
    this.names.forEach((n, i) =>
      d.adamw(
        this.params.get(n) as DistroTensor,
        g[i] as DistroTensor,
        this.m.get(n) as DistroTensor,
        this.v.get(n) as DistroTensor,
        this.decays.has(n) ? decayed : plain,
      ),
    );
  }

  /** The parameters as they are now, read back from the GPU. */
  async parameters(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    for (const n of this.names) out.set(n, await this.gpu.distro.read(this.params.get(n) as DistroTensor));
    return out;
  }

  release(): void {
    for (const t of [...this.params.values(), ...this.m.values(), ...this.v.values(), ...this.sum.values()])
      this.gpu.distro.release(t);
  }
}
