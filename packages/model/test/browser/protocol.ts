// Types shared by the Node test and the page (ort-page.ts). JSON only: binary data travels as base64 or URLs.

export type InputDtype = 'float32' | 'int32';

export interface StepInput {
  name: string;
  dims: number[];
  dtype: InputDtype;
  /** URL on the page's server with the tensor's little-endian bytes. */
  url: string;
  /** 'gpu-buffer': we upload into our own GPUBuffer and feed Tensor.fromGpuBuffer; 'cpu': a plain tensor. */
  location: 'cpu' | 'gpu-buffer';
}

export interface RunStepArgs {
  modelUrl: string;
  inputs: StepInput[];
  /** Outputs requested as GPU buffers; each is read by our own WGSL pass and read back for comparison. */
  gpuOutputs: string[];
  /** Outputs returned in CPU memory (e.g. the scalar loss). */
  cpuOutputs: string[];
  /** How many times to run the step with the same feeds (later runs show warm-step time). */
  runs: number;
  /** ORT verbose logging (prints node placements to the console). */
  verbose: boolean;
}

export interface GpuOutputReport {
  name: string;
  dims: number[];
  /** tensor.location as reported by ORT. */
  location: string;
  /** tensor.gpuBuffer instanceof GPUBuffer. */
  isGpuBuffer: boolean;
  /** Byte size of ORT's buffer (may exceed the tensor: ORT buckets allocations). */
  bufferSize: number;
  /** Raw values copied out of ORT's buffer (base64 float32). */
  raw: string;
  /** Values written by our WGSL pass (2 × raw) on our device (base64 float32). */
  doubled: string;
}

export interface RunStepResult {
  adapter: { vendor: string; architecture: string };
  cpuOutputs: Record<string, { dims: number[]; type: string; data: number[] }>;
  gpuOutputs: GpuOutputReport[];
  /** Validation errors from the error scope around our WGSL pass (must be empty). */
  scopedErrors: string[];
  /** GPUDevice 'uncapturederror' events during the scenario (must be empty). */
  uncapturedErrors: string[];
  /**
   * Control: binding one of ORT's output buffers on a second device (labelled "foreign-control"). Dawn's error
   * names the buffer's owner, which must be our device (labelled "meshtrain"); it also shows that a foreign buffer
   * would have failed the bind on our device above.
   */
  foreignDeviceError: string | null;
  timingsMs: { createSession: number; runs: number[]; readback: number };
}

export interface CreateSessionArgs {
  modelUrl: string;
  disableCpuFallback: boolean;
  /** ORT verbose logging (prints node placements to the console). */
  verbose: boolean;
}

export interface CreateSessionResult {
  created: boolean;
  error: string | null;
}
