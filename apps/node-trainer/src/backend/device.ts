// `--device auto`: pick the fastest execution provider that is really a GPU, and say why.
//   1. CUDA, when onnxruntime-node was installed with its CUDA provider (ONNXRUNTIME_NODE_INSTALL=cuda12);
//   2. the WebGPU EP, only on a hardware adapter: SwiftShader / lavapipe / llvmpipe are CPU rasterisers that
//      run ORT's kernels far slower than the CPU EP itself, so they are refused;
//   3. the CPU EP.
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { parameterCount, type LlamaConfig } from '@meshtrain/model';
import { create } from 'webgpu';
import { configureWebgpu } from '../ort/session.ts';

export type DeviceRequest = 'auto' | 'cuda' | 'webgpu' | 'cpu';
export type TrainDevice = 'cuda' | 'webgpu' | 'cpu';

export interface DeviceChoice {
  device: TrainDevice;
  /** One sentence: why this device. */
  reason: string;
  /** Adapter in words, when a WebGPU adapter was probed. */
  adapter?: string;
}

export interface AdapterProbe {
  name: string;
  software: boolean;
}

/** Whether onnxruntime-node's CUDA provider library is installed next to its binding. */
export function cudaProviderInstalled(): boolean {
  try {
    const require = createRequire(import.meta.url);
    const root = dirname(require.resolve('onnxruntime-node/package.json'));
    const bin = join(root, 'bin');
    const stack = [bin];
    while (stack.length) {
      const dir = stack.pop() as string;
      if (!existsSync(dir)) continue;
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) stack.push(join(dir, e.name));
        else if (/onnxruntime_providers_cuda/.test(e.name)) return true;
      }
    }
  } catch {
    // No package root: no CUDA either.
  }
  return false;
}

const SOFTWARE_ADAPTER = /swiftshader|llvmpipe|lavapipe|software/i;

// Dawn's instance must outlive anything made from it (see ../distro/dawn.ts); probes are kept too.
const keep: unknown[] = [];

/** Asks Dawn for its default adapter and classifies it; null when there is none. */
export async function probeWebgpuAdapter(): Promise<AdapterProbe | null> {
  configureWebgpu();
  try {
    const gpu = create([]);
    keep.push(gpu);
    const adapter = await gpu.requestAdapter();
    if (!adapter) return null;
    keep.push(adapter);
    const info = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
    const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
    return {
      name: name || 'unknown adapter',
      software: SOFTWARE_ADAPTER.test(name) || info.isFallbackAdapter === true,
    };
  } catch {
    return null;
  }
}

export async function selectDevice(
  request: DeviceRequest,
  probes: { cuda?: () => boolean; webgpu?: () => Promise<AdapterProbe | null> } = {},
): Promise<DeviceChoice> {
  const cuda = probes.cuda ?? cudaProviderInstalled;
  const webgpu = probes.webgpu ?? probeWebgpuAdapter;
  if (request === 'cpu') return { device: 'cpu', reason: 'requested with --device cpu' };
  if (request === 'cuda') {
    if (!cuda())
      throw new Error(
        'the CUDA execution provider is not installed; reinstall with ONNXRUNTIME_NODE_INSTALL=cuda12 npm install on a machine with CUDA 12',
      );
    return { device: 'cuda', reason: 'requested with --device cuda' };
  }
  if (request === 'webgpu') {
    const a = await webgpu();
    if (!a) throw new Error('no WebGPU adapter: is a Vulkan driver installed (VK_ICD_FILENAMES)?');
    return {
      device: 'webgpu',
      reason: a.software
        ? `requested with --device webgpu (warning: ${a.name} is a software adapter, slower than --device cpu)`
        : 'requested with --device webgpu',
      adapter: a.name,
    };
  }
  if (cuda()) return { device: 'cuda', reason: "auto: onnxruntime-node's CUDA provider is installed" };
  const a = await webgpu();
  if (a && !a.software)
    return {
      device: 'webgpu',
      reason: `auto: no CUDA provider; WebGPU hardware adapter ${a.name}`,
      adapter: a.name,
    };
  return {
    device: 'cpu',
    reason: a
      ? `auto: no CUDA provider, and the only WebGPU adapter (${a.name}) is a software rasteriser, slower than the CPU EP`
      : 'auto: no CUDA provider and no WebGPU adapter',
    ...(a ? { adapter: a.name } : {}),
  };
}

/** The memory estimate's view of a model trained at `seqLen`. */
export function memoryShape(c: LlamaConfig, seqLen: number): MemoryShape {
  return {
    hidden: c.hidden_size,
    intermediate: c.intermediate_size,
    layers: c.num_hidden_layers,
    heads: c.num_attention_heads,
    vocab: c.vocab_size,
    seqLen,
    params: parameterCount(c),
  };
}

/** The shape numbers the memory estimate reads. */
export interface MemoryShape {
  hidden: number;
  intermediate: number;
  layers: number;
  heads: number;
  vocab: number;
  seqLen: number;
  params: number;
}

/**
 * What training one micro-batch costs: a part that does not depend on the rows (parameters, gradients,
 * optimizer state, the runtime itself) and a part per sequence row (activations).
 */
export interface Footprint {
  fixedBytes: number;
  perRowBytes: number;
  /** Where the numbers come from, for the log: a measurement (and of what) or the estimate. */
  source: string;
  /** Drawn through probe steps (footprintFromProbes) rather than estimated. */
  measured?: boolean;
}

/**
 * Share of a budget that a measured footprint is fitted to. A line through two small probe steps
 * underestimates larger micro-batches and leaves out what the rest of the process holds: at 125m × 512 it
 * predicted 5.18 GB for micro-batches of 4 where the whole baseline peaked at 6.24 GB (bench/README.md
 * "bench:memory"). The estimate needs no share: it is doubled already.
 */
export const MEASURED_BUDGET_SHARE = 0.8;

/**
 * The estimate, for devices that report no memory use. Per sequence row every layer keeps ~(12·hidden +
 * 4·intermediate + 2·heads·seq) floats per token for the backward pass, and the loss ~4 vocabulary-sized
 * floats per token; parameters, gradients and the lookahead copy take 3 × params × 4 bytes. Both are doubled
 * for the runtime's allocator slack.
 */
export function estimateFootprint(m: MemoryShape): Footprint {
  const perRow =
    4 * m.seqLen * (m.layers * (12 * m.hidden + 4 * m.intermediate + 2 * m.heads * m.seqLen) + 4 * m.vocab);
  return { fixedBytes: 2 * 12 * m.params, perRowBytes: 2 * perRow, source: 'estimate' };
}

/**
 * What a trainer keeps beside parameters and gradients, which a probe step does not hold: SparseLoCo's inner
 * AdamW moments, its error feedback and the outer snapshot, four float32 copies of the parameters.
 */
export function optimizerStateBytes(m: Pick<MemoryShape, 'params'>): number {
  return 4 * 4 * m.params;
}

/**
 * Rows of the smaller probe step: enough that the estimated activations (≥ 64 MiB) stand out of the noise of
 * a process's resident set, at most 64.
 */
export function probeRows(estimate: Pick<Footprint, 'perRowBytes'>): number {
  return Math.max(1, Math.min(64, Math.ceil(2 ** 26 / estimate.perRowBytes)));
}

/** The footprint in words, for logs. */
export function describeFootprint(f: Footprint): string {
  const size = (b: number) => (b >= 1e9 ? `${(b / 1e9).toFixed(2)} GB` : `${(b / 1e6).toFixed(1)} MB`);
  return `${f.source}: ${size(f.fixedBytes)} + ${size(f.perRowBytes)} per sequence`;
}

/** One probe: the peak bytes a train step of `rows` sequences reached. */
export interface ProbePeak {
  rows: number;
  peakBytes: number;
}

/**
 * The footprint line through two probes at different row counts, or null when the probes do not describe
 * one (equal rows, or a peak that does not grow with the rows: noise larger than the activations).
 */
export function footprintFromProbes(a: ProbePeak, b: ProbePeak, source: string): Footprint | null {
  if (a.rows === b.rows) return null;
  const [lo, hi] = a.rows < b.rows ? [a, b] : [b, a];
  const perRowBytes = (hi.peakBytes - lo.peakBytes) / (hi.rows - lo.rows);
  if (!(perRowBytes > 0)) return null;
  return {
    fixedBytes: Math.max(0, lo.peakBytes - perRowBytes * lo.rows),
    perRowBytes,
    source,
    measured: true,
  };
}

/** The most rows (1 ≤ rows ≤ cap) whose footprint fits `bytes` (a measured one, MEASURED_BUDGET_SHARE of it). */
export function rowsForBudget(bytes: number, f: Footprint, cap: number): number {
  const usable = f.measured ? bytes * MEASURED_BUDGET_SHARE : bytes;
  return Math.max(1, Math.min(cap, Math.floor((usable - f.fixedBytes) / f.perRowBytes)));
}

/** The largest divisor of `n` that is at most `k` (at least 1): equal micro-batches of a batch. */
export function largestDivisorAtMost(n: number, k: number): number {
  for (let d = Math.min(n, Math.floor(k)); d > 1; d--) if (n % d === 0) return d;
  return 1;
}

/** `--gpu-memory 6G` by the estimate alone: the largest micro-batch whose activations fit. */
export function rowsForMemory(bytes: number, m: MemoryShape, cap: number): number {
  return rowsForBudget(bytes, estimateFootprint(m), cap);
}

export function parseMemory(s: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?$/i.exec(s.trim());
  if (!m) throw new Error(`--gpu-memory: expected a size like 6G or 512M, got '${s}'`);
  const unit = { '': 1, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30, T: 2 ** 40 }[(m[2] ?? '').toUpperCase()] ?? 1;
  return Number(m[1]) * unit;
}
