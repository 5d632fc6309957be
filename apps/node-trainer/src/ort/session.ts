// ONNX Runtime (Node) sessions for meshtrain graphs: EP selection, the CPU-fallback guard on WebGPU, and the
// per-dtype optimisation level.
import { existsSync } from 'node:fs';
import * as ort from 'onnxruntime-node';

export type Device = 'cpu' | 'webgpu';
export type GraphDType = 'float32' | 'float64';

/**
 * Chromium's SwiftShader Vulkan driver: the adapter Dawn accepts on GPU-less machines
 * (docs/architecture.md "Runtime notes").
 */
export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/**
 * Points Dawn at a Vulkan driver when none is configured: must run before the first WebGPU session, since
 * the loader reads VK_ICD_FILENAMES once. Returns whether the adapter is the software one.
 */
export function configureWebgpu(): { icd: string | null; software: boolean } {
  if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD))
    process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  const icd = process.env.VK_ICD_FILENAMES ?? null;
  return { icd, software: icd?.includes('swiftshader') ?? false };
}

export interface SessionOptions {
  device: Device;
  dtype: GraphDType;
  /** ORT's verbose log (node placements) on stderr. */
  verbose?: boolean;
  /** Keep the CPU fallback allowed on WebGPU (only for reporting placements, never for training). */
  allowCpuFallback?: boolean;
  /** CPU EP: intra-op threads (default: ORT's, one per physical core). */
  intraOpThreads?: number;
  /**
   * CPU EP: whether idle intra-op threads spin (ORT's default). Spinning wins on otherwise idle cores; on a
   * machine shared with other work it burns the time the other work (and this process's own JS) needs.
   */
  spinning?: boolean;
  /**
   * CPU EP: keep ORT's memory arena and memory pattern (default false, docs/architecture.md "Runtime
   * notes"). The arena grows in powers of two, never gives memory back, and every session has its own, so a
   * train and an eval session hold both their peaks for the life of the process.
   */
  arena?: boolean;
}

export class SessionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SessionError';
  }
}

export async function createSession(onnx: Uint8Array, o: SessionOptions): Promise<ort.InferenceSession> {
  const log = o.verbose ? { logSeverityLevel: 0 as const, logVerbosityLevel: 0 } : {};
  if (o.device === 'webgpu') {
    if (o.dtype !== 'float32')
      throw new SessionError('the webgpu device runs float32 graphs only (WGSL has no f64)');
    configureWebgpu();
    try {
      return await ort.InferenceSession.create(onnx, {
        executionProviders: ['webgpu'],
        ...log,
        // Any node the WebGPU EP cannot run makes session creation fail instead of silently bouncing tensors
        // through host memory every step (docs/architecture.md "Runtime notes").
        extra: o.allowCpuFallback ? {} : { session: { disable_cpu_ep_fallback: '1' } },
      });
    } catch (err) {
      throw new SessionError(`could not create a WebGPU session: ${(err as Error).message}`);
    }
  }
  return ort.InferenceSession.create(onnx, {
    executionProviders: ['cpu'],
    ...log,
    // Without the arena every tensor is malloc'd and freed as the run goes (large blocks are mmap'd, so
    // freeing returns them to the system); without the memory pattern no run pre-allocates one block for
    // all its planned tensors, which with no arena would be faulted in afresh on every run.
    ...(o.arena ? {} : { enableCpuMemArena: false, enableMemPattern: false }),
    ...(o.intraOpThreads !== undefined ? { intraOpNumThreads: o.intraOpThreads } : {}),
    ...(o.spinning === false ? { extra: { session: { 'intra_op.allow_spinning': '0' } } } : {}),
    // ORT's extended fusions emit com.microsoft kernels that exist only for float (x·sigmoid(x) → QuickGelu),
    // so float64 graphs keep to the basic optimisations.
    graphOptimizationLevel: o.dtype === 'float64' ? 'basic' : 'all',
  });
}

/** A float tensor in the graph dtype from any numeric array (copies). */
export function floatTensor(
  dtype: GraphDType,
  data: ArrayLike<number>,
  shape: readonly number[],
): ort.Tensor {
  return new ort.Tensor(dtype, dtype === 'float64' ? Float64Array.from(data) : Float32Array.from(data), [
    ...shape,
  ]);
}
