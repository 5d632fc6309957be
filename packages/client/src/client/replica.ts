// This client's replica of the run's model: the parameters, the DisTrO momentum ("delta"), a scratch copy for
// the lookahead, and the unquantised own result of the last step (its residual is subtracted one step late).
// A SparseLoCo replica has no momentum or scratch (its own state is client/sparseloco-state.ts). Which step
// the parameters belong to decides whether the client may take part in an epoch.
import { parameterHash, parameterOrder } from '@meshtrain/model';
import type { DistroBackend, DistroTensor, TensorResult } from '@meshtrain/distro';
import type { ParameterMap } from '../interfaces.ts';

export class Replica {
  names: string[] = [];
  params: DistroTensor[] = [];
  delta: DistroTensor[] = [];
  scratch: DistroTensor[] = [];
  /** The unquantised result this client sent last (what the next step's residual subtracts). */
  ownPrev: TensorResult[] | null = null;
  /** `progress.step` at which `params` are the run's parameters at an epoch start (null: none loaded). */
  paramsStep: number | null = null;
  /** parameterHash (hex) of the parameters at `paramsStep`. */
  paramsHash = '';
  /** Set when the client found itself diverged; cleared once parameters are installed again. */
  diverged = false;
  /**
   * Host copy of the parameters the current epoch started from (what a replay after a confirmed cheat
   * rebuilds from), or null when unknown.
   */
  epochStart: ParameterMap | null = null;
  /** Counts every change of `params` (install, apply, restore): SparseLoCo checks none happens mid-round. */
  version = 0;
  private readonly distro: DistroBackend;
  private readonly momentum: boolean;
  private readonly shapes = new Map<string, number[]>();

  /** `momentum`: keep DisTrO's delta and lookahead scratch (false for SparseLoCo: two model copies less). */
  constructor(distro: DistroBackend, options: { momentum?: boolean } = {}) {
    this.distro = distro;
    this.momentum = options.momentum ?? true;
  }

  /** Whether the parameters are those the epoch starting at `startStep` starts from. */
  holdsEpochStart(startStep: number): boolean {
    return this.paramsStep === startStep;
  }

  /** Shapes to give the tensors (flat otherwise). */
  setShapes(shapes: ReadonlyMap<string, readonly number[]>): void {
    for (const [n, s] of shapes) this.shapes.set(n, [...s]);
  }

  /** Replaces the parameters with `params` of `step`; momentum restarts at zero. */
  install(params: ParameterMap, step: number, hash: string): void {
    const d = this.distro;
    for (const t of [...this.params, ...this.delta, ...this.scratch]) d.release(t);
    this.names = parameterOrder(params.keys());
    this.params = [];
    this.delta = [];
    this.scratch = [];
    for (const n of this.names) {
      const p = params.get(n) as Float32Array;
      const shape = this.shapeOf(n, p.length);
      this.params.push(d.tensor(shape, Float32Array.from(p)));
      // Joiners get no optimizer state (docs/protocol.md "Joiners, checkpoints and cold start"): momentum
      // restarts at zero.
      if (!this.momentum) continue;
      this.delta.push(d.tensor(shape));
      this.scratch.push(d.tensor(shape));
    }
    this.ownPrev = null;
    this.version++;
    this.markEpochStart(step, hash, params);
    this.diverged = false;
  }

  /** The parameters as they are now (`params`, a host copy) are the start of the epoch at `step`, with this hash. */
  markEpochStart(step: number, hash: string, params: ParameterMap): void {
    this.paramsStep = step;
    this.paramsHash = hash;
    this.epochStart = params;
  }

  /** Writes the epoch's start parameters back into the tensors (false when they are not known). */
  restoreEpochStart(): boolean {
    const start = this.epochStart;
    if (!start) return false;
    for (let i = 0; i < this.names.length; i++)
      this.distro.write(this.params[i] as DistroTensor, start.get(this.names[i] as string) as Float32Array);
    this.version++;
    return true;
  }

  /** The parameters diverged from the run's: nothing may be trained or applied until `install`. */
  invalidate(): void {
    this.diverged = true;
    this.paramsStep = null;
    this.paramsHash = '';
    this.epochStart = null;
  }

  /** Current parameters (host copies), in name order. */
  async read(): Promise<ParameterMap> {
    const out: ParameterMap = new Map();
    for (let i = 0; i < this.names.length; i++)
      out.set(this.names[i] as string, await this.distro.read(this.params[i] as DistroTensor));
    return out;
  }

  async hash(): Promise<Uint8Array> {
    return parameterHash(await this.read());
  }

  /**
   * Lookahead (docs/protocol.md "Training step"): scratch ← params − prevLr·sign(delta), so the train step
   * reads a copy and nothing has to be undone afterwards (the in-place undo is not exact in floating point).
   */
  lookahead(prevLr: number): DistroTensor[] {
    if (!this.momentum) throw new Error('this replica keeps no DisTrO momentum (a SparseLoCo run)');
    for (let i = 0; i < this.names.length; i++)
      this.distro.signStep(
        this.scratch[i] as DistroTensor,
        this.params[i] as DistroTensor,
        this.delta[i] as DistroTensor,
        prevLr,
      );
    return this.scratch;
  }

  private shapeOf(name: string, length: number): number[] {
    const s = this.shapes.get(name);
    if (!s) return [length];
    let n = 1;
    for (const x of s) n *= x;
    if (n !== length) throw new Error(`parameter ${name}: ${length} values for shape [${s.join(', ')}]`);
    return s;
  }
}
