// Measured footprints for `--gpu-memory`: train one probe micro-batch at a small row count and at twice that,
// read the peak memory of each, and draw the line (device.ts footprintFromProbes). Only where the memory can
// be read: the CPU EP's is this process's resident set (Linux: VmHWM after clear_refs); the resident WebGPU
// path's is the bytes of the GPU buffers it creates (gpu-allocations.ts). onnxruntime-node's CUDA provider
// reports no GPU memory in use, so CUDA keeps the estimate, and the log says so.
import { readFileSync, writeFileSync } from 'node:fs';
import { initParameters, type LlamaConfig } from '@meshtrain/model';
import {
  estimateFootprint,
  type Footprint,
  footprintFromProbes,
  memoryShape,
  probeRows,
  type TrainDevice,
} from './device.ts';
import { GpuAllocationMeter } from './gpu-allocations.ts';
import { openNodeGpu, residentParameters } from './gpu.ts';
import { OrtTrainingBackend } from './ort-backend.ts';

/** A high-water mark of some memory that can be restarted. */
export interface PeakMeter {
  /** What is measured, for the log. */
  readonly what: string;
  /** Starts a new window: the next `peak()` covers only what happens after this. */
  reset(): void;
  /** Peak bytes since the last reset. */
  peak(): number;
}

/**
 * This process's peak resident set on Linux: writing 5 to /proc/self/clear_refs resets VmHWM to the current
 * RSS (Linux ≥ 4.0). Null where that is unavailable.
 */
export function processRssMeter(): PeakMeter | null {
  const hwm = () => {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (!m) throw new Error('no VmHWM in /proc/self/status');
    return Number(m[1]) * 1024;
  };
  const reset = () => writeFileSync('/proc/self/clear_refs', '5');
  try {
    reset();
    hwm();
  } catch {
    return null;
  }
  return { what: 'process resident set (VmHWM)', reset, peak: hwm };
}

/** Trains (and then frees) one probe micro-batch of `rows` sequences on a fresh session. */
export type ProbeStep = (rows: number) => Promise<void>;

/**
 * The footprint from probes at `rows` and `2·rows`; null when the line through them is not usable (device.ts
 * footprintFromProbes), so the caller falls back to the estimate.
 */
export async function measureFootprint(
  meter: PeakMeter,
  step: ProbeStep,
  rows: number,
): Promise<Footprint | null> {
  const probe = async (r: number) => {
    meter.reset();
    await step(r);
    return { rows: r, peakBytes: meter.peak() };
  };
  // One unmeasured step first: the runtime's one-time allocations (thread pools, kernels' first use) would
  // otherwise land in the smaller probe only and flatten the line.
  await step(rows);
  const a = await probe(rows);
  const b = await probe(2 * rows);
  return footprintFromProbes(a, b, `measured: ${meter.what}, probe steps of ${a.rows} and ${b.rows} rows`);
}

/**
 * A probe step on onnxruntime-node: a fresh backend at `rows` rows trains one micro-batch of token 0 from
 * the seed's initial parameters and releases its session, so nothing of one probe survives into the next.
 */
export function ortProbeStep(o: {
  config: LlamaConfig;
  seqLen: number;
  device: TrainDevice;
  seed?: number;
}): ProbeStep {
  return async (rows) => {
    const backend = new OrtTrainingBackend({
      config: o.config,
      seqLen: o.seqLen,
      device: o.device,
      maxRows: rows,
    });
    try {
      await backend.loadParams(initParameters(o.config, o.seed ?? 0));
      await backend.trainStep(new Int32Array(rows * (o.seqLen + 1)), rows);
    } finally {
      await backend.dispose();
    }
  };
}

/**
 * A probe step on the resident WebGPU path (node-trainer's `--device webgpu`): a fresh Dawn device at `rows`
 * rows, attached to `meter` before anything is allocated on it, trains one graph-captured micro-batch of
 * token 0 from the seed's initial parameters held on the GPU, then releases the device.
 */
export function residentProbeStep(o: {
  config: LlamaConfig;
  seqLen: number;
  meter: GpuAllocationMeter;
  seed?: number;
}): ProbeStep {
  return async (rows) => {
    const gpu = await openNodeGpu({ config: o.config, seqLen: o.seqLen, maxRows: rows, chunk: 64 });
    try {
      o.meter.attach(gpu.device);
      await gpu.backend.loadParamTensors(residentParameters(gpu, initParameters(o.config, o.seed ?? 0)));
      const out = await gpu.backend.trainStepResident(new Int32Array(rows * (o.seqLen + 1)), rows);
      out.release();
    } finally {
      await gpu.dispose();
    }
  };
}

export interface FootprintRequest {
  /** The budget: probes whose estimated footprint would not fit it are not run. */
  bytes: number;
  config: LlamaConfig;
  seqLen: number;
  device: TrainDevice;
  /** Memory the caller will hold beside one micro-batch's step, which the probes do not hold. */
  stateBytes: number;
  say?: (line: string) => void;
}

/** The meter and probe step of a device whose memory can be read, or why there is none. */
function prober(r: FootprintRequest): { meter: PeakMeter; step: ProbeStep } | string {
  if (r.device === 'cpu') {
    const meter = processRssMeter();
    if (!meter) return 'this system reports no peak resident set';
    return { meter, step: ortProbeStep({ ...r, device: 'cpu' }) };
  }
  if (r.device === 'webgpu') {
    const meter = new GpuAllocationMeter();
    return { meter, step: residentProbeStep({ ...r, meter }) };
  }
  return `the ${r.device} device reports no memory use in Node`;
}

/**
 * The footprint a micro-batch size is picked from: measured by probe steps where the memory can be read (the
 * CPU EP on Linux, the resident WebGPU path) and the probes fit the budget by the estimate, else the
 * estimate, labelled with why.
 */
export async function trainingFootprint(r: FootprintRequest): Promise<Footprint> {
  const shape = memoryShape(r.config, r.seqLen);
  const estimate = estimateFootprint(shape);
  const withState = (f: Footprint): Footprint => ({ ...f, fixedBytes: f.fixedBytes + r.stateBytes });
  const p = prober(r);
  if (typeof p === 'string') return { ...estimate, source: `estimate (${p})` };
  const rows = probeRows(estimate);
  // The estimate is doubled for allocator slack (device.ts); its undoubled half is what a probe is expected
  // to take.
  if ((estimate.fixedBytes + 2 * rows * estimate.perRowBytes) / 2 > r.bytes)
    return { ...estimate, source: 'estimate (probe steps would not fit the budget)' };
  r.say?.(`measuring the memory of probe steps of ${rows} and ${2 * rows} sequences on ${r.device}…`);
  let measured: Footprint | null;
  try {
    measured = await measureFootprint(p.meter, p.step, rows);
  } catch (e) {
    return { ...estimate, source: `estimate (the probe steps failed: ${(e as Error).message})` };
  }
  return measured
    ? withState(measured)
    : { ...estimate, source: 'estimate (the probe steps did not grow with the rows)' };
}
