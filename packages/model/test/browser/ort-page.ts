// Test page: runs an ONNX graph on onnxruntime-web's native WebGPU EP with parameters in our own GPU buffers and
// gradients returned as ORT-owned GPU buffers, then consumes those buffers with our own WGSL on the same device.
// Driven from packages/model/test/ort-web-webgpu.test.ts through e2e/lib's scenario protocol.
//
// 'onnxruntime-web/webgpu' (not the default import) selects the native C++ WebGPU EP; the default import is
// the older JSEP backend, which ignores a passed-in device and has silent wrong results
// (docs/architecture.md "Runtime notes").
import * as ort from 'onnxruntime-web/webgpu';
import { fetchBytes, registerScenarios, toBase64 } from '../../../../e2e/lib/page-runtime.ts';
import { requestComputeDevice } from '@meshtrain/distro';
import type {
  CreateSessionArgs,
  CreateSessionResult,
  GpuOutputReport,
  RunStepArgs,
  RunStepResult,
  StepInput,
} from './protocol.ts';

// The server mounts node_modules/onnxruntime-web/dist at /ort/. Single-threaded wasm: threads would need
// SharedArrayBuffer, i.e. COOP/COEP headers, and the work that matters runs on the GPU anyway.
ort.env.wasm.wasmPaths = '/ort/';
ort.env.wasm.numThreads = 1;

const OUR_DEVICE_LABEL = 'meshtrain';

const roundUp16 = (n: number): number => Math.ceil(n / 16) * 16;

interface OurDevice {
  device: GPUDevice;
  adapterInfo: GPUAdapterInfo;
  uncaptured: string[];
}

let ours: Promise<OurDevice> | undefined;

/**
 * The one GPUDevice this page uses, for ORT and for our WGSL alike. Limits are raised to the adapter's maxima
 * that matter for large parameter buffers and ORT's kernels, as ORT does when it creates a device itself
 * (docs/architecture.md "Runtime notes").
 */
function ourDevice(): Promise<OurDevice> {
  ours ??= (async () => {
    const adapter = await navigator.gpu?.requestAdapter();
    if (adapter === undefined || adapter === null)
      throw new Error('no WebGPU adapter (navigator.gpu.requestAdapter)');
    // The label shows up in Dawn's messages: the foreign-device control below relies on it to name the owner.
    const device = await requestComputeDevice(adapter, OUR_DEVICE_LABEL);
    const uncaptured: string[] = [];
    device.addEventListener('uncapturederror', (ev) => {
      uncaptured.push((ev as GPUUncapturedErrorEvent).error.message);
    });
    return { device, adapterInfo: adapter.info, uncaptured };
  })();
  return ours;
}

function sessionOptions(
  device: GPUDevice,
  disableCpuFallback: boolean,
  verbose: boolean,
  preferredOutputLocation?: Record<string, ort.Tensor.DataLocation>,
): ort.InferenceSession.SessionOptions {
  return {
    // Passing the device in the EP options is the only sharing mechanism ORT 1.30 honours (env.webgpu.device set
    // before creation is ignored: docs/architecture.md "Runtime notes", onnxruntime issue #26107).
    executionProviders: [{ name: 'webgpu', device }],
    // With fallback disabled, session creation fails if any node would be placed on the CPU EP.
    ...(disableCpuFallback ? { extra: { session: { disable_cpu_ep_fallback: '1' } } } : {}),
    ...(preferredOutputLocation === undefined ? {} : { preferredOutputLocation }),
    ...(verbose ? { logSeverityLevel: 0, logVerbosityLevel: 0 } : {}),
  };
}

async function makeFeed(device: GPUDevice, input: StepInput, owned: GPUBuffer[]): Promise<ort.Tensor> {
  const bytes = await fetchBytes(input.url);
  const count = input.dims.reduce((a, b) => a * b, 1);
  if (bytes.byteLength !== count * 4) {
    throw new Error(
      `${input.name}: ${bytes.byteLength} bytes for dims [${input.dims.join(',')}] (${input.dtype})`,
    );
  }
  const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  if (input.location === 'cpu') {
    return input.dtype === 'int32'
      ? new ort.Tensor('int32', new Int32Array(ab), input.dims)
      : new ort.Tensor('float32', new Float32Array(ab), input.dims);
  }
  // ORT's kernels bind storage buffers as vec4, so a buffer must be a multiple of 16 bytes even when the tensor
  // is not (a 12-byte buffer fails validation: docs/architecture.md "Runtime notes").
  const buffer = device.createBuffer({
    label: `param:${input.name}`,
    size: roundUp16(bytes.byteLength),
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
  });
  owned.push(buffer);
  device.queue.writeBuffer(buffer, 0, bytes);
  // fromGpuBuffer tensors don't own the buffer: we destroy it ourselves, never dispose() the tensor.
  return ort.Tensor.fromGpuBuffer(buffer, { dataType: input.dtype, dims: input.dims });
}

const DOUBLE_WGSL = /* wgsl */ `
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let i = id.x;
  if (i < arrayLength(&dst)) { dst[i] = 2.0 * src[i]; }
}`;

async function runStep(args: RunStepArgs): Promise<RunStepResult> {
  const { device, adapterInfo, uncaptured } = await ourDevice();
  const uncapturedBefore = uncaptured.length;
  const owned: GPUBuffer[] = [];
  const model = await fetchBytes(args.modelUrl);

  const locations: Record<string, ort.Tensor.DataLocation> = {};
  for (const n of args.gpuOutputs) locations[n] = 'gpu-buffer';
  for (const n of args.cpuOutputs) locations[n] = 'cpu';

  let t = performance.now();
  const session = await ort.InferenceSession.create(
    model,
    sessionOptions(device, true, args.verbose, locations),
  );
  const createSession = performance.now() - t;
  try {
    const feeds: Record<string, ort.Tensor> = {};
    for (const input of args.inputs) feeds[input.name] = await makeFeed(device, input, owned);
    const fetchNames = [...args.gpuOutputs, ...args.cpuOutputs];

    const runs: number[] = [];
    let results: ort.InferenceSession.ReturnType | undefined;
    for (let r = 0; r < args.runs; r++) {
      if (results !== undefined) for (const v of Object.values(results)) v.dispose();
      t = performance.now();
      results = await session.run(feeds, fetchNames);
      // run() resolves once the work is submitted; wait for the GPU so the timing covers execution.
      await device.queue.onSubmittedWorkDone();
      runs.push(performance.now() - t);
    }
    if (results === undefined) throw new Error('runs must be ≥ 1');

    t = performance.now();
    const pipeline = device.createComputePipeline({
      label: 'double',
      layout: 'auto',
      compute: { module: device.createShaderModule({ code: DOUBLE_WGSL }), entryPoint: 'main' },
    });
    const encoder = device.createCommandEncoder({ label: 'consume-ort-outputs' });
    interface Pending {
      name: string;
      tensor: ort.Tensor;
      read?: { raw: GPUBuffer; doubled: GPUBuffer; bytes: number };
    }
    const pending: Pending[] = [];
    device.pushErrorScope('validation');
    for (const name of args.gpuOutputs) {
      const tensor = results[name];
      if (tensor === undefined) throw new Error(`output ${name} missing from results`);
      // Reported as-is; the test asserts the location, so a CPU-located output fails there with its name.
      if (tensor.location !== 'gpu-buffer') {
        pending.push({ name, tensor });
        continue;
      }
      const src = tensor.gpuBuffer;
      const count = tensor.dims.reduce((a, b) => a * b, 1);
      const bytes = count * 4;
      const buffer = (label: string, usage: number): GPUBuffer => {
        const b = device.createBuffer({ label: `${label}:${name}`, size: roundUp16(bytes), usage });
        owned.push(b);
        return b;
      };
      const scratch = buffer('doubled', GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC);
      const raw = buffer('read-raw', GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      const doubled = buffer('read-doubled', GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      // Binding ORT's buffer in a bind group of OUR device is the ownership test: a buffer from another device
      // is a validation error here (see the foreign-device control below).
      const bindGroup = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: src, size: bytes } },
          { binding: 1, resource: { buffer: scratch, size: bytes } },
        ],
      });
      const pass = encoder.beginComputePass({ label: `double:${name}` });
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(Math.ceil(count / 64));
      pass.end();
      encoder.copyBufferToBuffer(src, 0, raw, 0, bytes);
      encoder.copyBufferToBuffer(scratch, 0, doubled, 0, bytes);
      pending.push({ name, tensor, read: { raw, doubled, bytes } });
    }
    device.queue.submit([encoder.finish()]);
    const scoped = await device.popErrorScope();

    const gpuOutputs: GpuOutputReport[] = [];
    for (const { name, tensor, read } of pending) {
      const onGpu = tensor.location === 'gpu-buffer';
      const report: GpuOutputReport = {
        name,
        dims: [...tensor.dims],
        location: tensor.location,
        isGpuBuffer: onGpu && tensor.gpuBuffer instanceof GPUBuffer,
        bufferSize: onGpu ? tensor.gpuBuffer.size : 0,
        raw: '',
        doubled: '',
      };
      if (read !== undefined) {
        const { raw, doubled, bytes } = read;
        await Promise.all([
          raw.mapAsync(GPUMapMode.READ, 0, bytes),
          doubled.mapAsync(GPUMapMode.READ, 0, bytes),
        ]);
        report.raw = toBase64(raw.getMappedRange(0, bytes));
        report.doubled = toBase64(doubled.getMappedRange(0, bytes));
        raw.unmap();
        doubled.unmap();
      }
      gpuOutputs.push(report);
    }
    const readback = performance.now() - t;

    const foreignDeviceError = await bindOnForeignDevice(pending.find((p) => p.read !== undefined)?.tensor);

    const cpuOutputs: RunStepResult['cpuOutputs'] = {};
    for (const name of args.cpuOutputs) {
      const tensor = results[name];
      if (tensor === undefined) throw new Error(`output ${name} missing from results`);
      cpuOutputs[name] = {
        dims: [...tensor.dims],
        type: tensor.type,
        data: Array.from(tensor.data as Float32Array),
      };
    }
    const loss = cpuOutputs.loss?.data[0];
    setStatus(
      `${args.modelUrl}: ${args.runs} run(s), last ${runs.at(-1)?.toFixed(0)} ms` +
        (loss === undefined ? '' : `, loss ${loss.toFixed(5)}`) +
        `, ${gpuOutputs.length} GPU outputs`,
    );
    // ORT owns the output buffers; release them now rather than at session teardown.
    for (const v of Object.values(results)) v.dispose();
    await device.queue.onSubmittedWorkDone();
    return {
      adapter: { vendor: adapterInfo.vendor, architecture: adapterInfo.architecture },
      cpuOutputs,
      gpuOutputs,
      scopedErrors: scoped === null ? [] : [scoped.message],
      uncapturedErrors: uncaptured.slice(uncapturedBefore),
      foreignDeviceError,
      timingsMs: { createSession, runs, readback },
    };
  } finally {
    await session.release();
    for (const b of owned) b.destroy();
  }
}

/** Tries to bind ORT's output buffer on a second device; returns the validation error (expected) or null. */
async function bindOnForeignDevice(tensor: ort.Tensor | undefined): Promise<string | null> {
  if (tensor === undefined || tensor.location !== 'gpu-buffer') return 'no gpu-buffer output to test';
  // Adapters are single-use in Chromium: a second device needs a fresh adapter.
  const adapter = await navigator.gpu.requestAdapter();
  if (adapter === null) return 'no second adapter';
  const other = await adapter.requestDevice({ label: 'foreign-control' });
  try {
    const layout = other.createBindGroupLayout({
      entries: [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } }],
    });
    other.pushErrorScope('validation');
    other.createBindGroup({ layout, entries: [{ binding: 0, resource: { buffer: tensor.gpuBuffer } }] });
    const err = await other.popErrorScope();
    return err === null ? null : err.message;
  } finally {
    other.destroy();
  }
}

async function createSession(args: CreateSessionArgs): Promise<CreateSessionResult> {
  const { device } = await ourDevice();
  const model = await fetchBytes(args.modelUrl);
  try {
    const session = await ort.InferenceSession.create(
      model,
      sessionOptions(device, args.disableCpuFallback, args.verbose),
    );
    await session.release();
    return { created: true, error: null };
  } catch (err) {
    return { created: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/** What a screenshot of the page shows. */
function setStatus(text: string): void {
  const status = document.getElementById('status');
  if (status !== null) status.textContent = text;
}

registerScenarios({ runStep, createSession });
setStatus('ready');
