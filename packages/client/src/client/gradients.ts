// A train step's gradients at given parameter tensors (DisTrO's lookahead copy, SparseLoCo's local
// parameters, or the shared ones for a verifier), through the host (parameters read back, gradients uploaded)
// or resident on the DisTrO backend's device (nothing the size of the model crosses to the host).
// Batches larger than the backend's maxRows run as micro-batches whose gradients are averaged by row count.
import type { DistroBackend, DistroTensor } from '@meshtrain/distro';
import type {
  ParameterMap,
  ResidentStepOutput,
  ResidentTrainingBackend,
  TrainingBackend,
} from '../interfaces.ts';
import { isResidentFor } from '../interfaces.ts';

/** A train step's mean loss and gradients (DisTrO tensors), and how to free them once compressed. */
export interface Gradients {
  loss: number;
  grads: DistroTensor[];
  release(): void;
}

/** The batch's rows in slices of at most `maxRows` (`n` rows each), as the backend runs them. */
export function* microBatches(
  tokens: Int32Array,
  rows: number,
  maxRows: number,
): Generator<{ part: Int32Array; n: number }> {
  const width = tokens.length / rows;
  for (let r0 = 0; r0 < rows; r0 += maxRows) {
    const n = Math.min(maxRows, rows - r0);
    yield { part: tokens.subarray(r0 * width, (r0 + n) * width), n };
  }
}

/**
 * The gradients at `params` (tensors of `d`, named `names` in the replica's order): resident on the device when
 * the backend shares `d`'s device, else through host copies.
 */
export function gradientsAt(
  d: DistroBackend,
  backend: TrainingBackend,
  names: readonly string[],
  params: readonly DistroTensor[],
  tokens: Int32Array,
  rows: number,
): Promise<Gradients> {
  return isResidentFor(backend, d)
    ? residentGradients(d, backend, names, params, tokens, rows)
    : hostGradients(d, backend, names, params, tokens, rows);
}

/** Gradients through host copies: the parameters are read back, the gradients uploaded. */
export async function hostGradients(
  d: DistroBackend,
  backend: TrainingBackend,
  names: readonly string[],
  params: readonly DistroTensor[],
  tokens: Int32Array,
  rows: number,
): Promise<Gradients> {
  const host: ParameterMap = new Map();
  for (let i = 0; i < names.length; i++)
    host.set(names[i] as string, await d.read(params[i] as DistroTensor));
  await backend.loadParams(host);
  // Micro-batches: gradients are means over their rows, so accumulate weighted by row count.
  let loss = 0;
  const sums = new Map<string, Float32Array>();
  for (const { part, n } of microBatches(tokens, rows, backend.maxRows)) {
    const out = await backend.trainStep(part, n);
    loss += (out.loss * n) / rows;
    for (const name of names) {
      const g = out.grads.get(name);
      if (!g) throw new Error(`backend returned no gradient for ${name}`);
      let acc = sums.get(name);
      if (!acc) sums.set(name, (acc = new Float32Array(g.length)));
      for (let j = 0; j < g.length; j++) acc[j]! += (g[j] as number) * (n / rows);
    }
  }
  const grads = names.map((n, i) => d.tensor((params[i] as DistroTensor).shape, sums.get(n)));
  return { loss, grads, release: () => grads.forEach((g) => d.release(g)) };
}

/**
 * Gradients without host copies: the backend reads the parameters from the DisTrO tensors and returns
 * gradients as DisTrO tensors on the same device. One micro-batch hands its gradients over as they are;
 * several are summed on the device (weighted by rows, as above).
 */
export async function residentGradients(
  d: DistroBackend,
  backend: ResidentTrainingBackend,
  names: readonly string[],
  params: readonly DistroTensor[],
  tokens: Int32Array,
  rows: number,
): Promise<Gradients> {
  await backend.loadParamTensors(new Map(names.map((n, i) => [n, params[i] as DistroTensor])));
  const pick = (out: ResidentStepOutput, name: string): DistroTensor => {
    const g = out.grads.get(name);
    if (!g) throw new Error(`backend returned no gradient for ${name}`);
    return g;
  };
  if (rows <= backend.maxRows) {
    const out = await backend.trainStepResident(tokens, rows);
    try {
      return { loss: out.loss, grads: names.map((n) => pick(out, n)), release: () => out.release() };
    } catch (e) {
      out.release();
      throw e;
    }
  }
  const sums = params.map((p) => d.tensor(p.shape));
  const release = () => sums.forEach((g) => d.release(g));
  let loss = 0;
  try {
    for (const { part, n } of microBatches(tokens, rows, backend.maxRows)) {
      const out = await backend.trainStepResident(part, n);
      try {
        loss += (out.loss * n) / rows;
        // momentum with decay 1 is acc + w·g: the accumulation, in the same kernel.
        names.forEach((name, i) => d.momentum(sums[i] as DistroTensor, pick(out, name), 1, n / rows));
        // The sums read the gradients in queue order before the backend's next step can reuse the buffers.
      } finally {
        out.release();
      }
    }
  } catch (e) {
    release();
    throw e;
  }
  return { loss, grads: sums, release };
}
