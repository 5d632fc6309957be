// The resident GPU training backend of both shells (the browser tab's worker and node-trainer on Dawn):
// onnxruntime-web's native WebGPU EP ('onnxruntime-web/webgpu', never the default JSEP import) on one GPUDevice
// the shell creates and hands to every session (the only sharing ORT 1.30 honours), beside DisTrO's WGSL backend
// on that same device. One session per row count: graphs have static shapes.
//
// Training is resident: the client hands over the parameters to train at (DisTrO's lookahead, SparseLoCo's
// local parameters) as DisTrO tensors and gets the gradients back as ORT's own output buffers wrapped as DisTrO
// tensors. Per step only the token ids go up and the loss comes down (and, once per round, the compressed
// result, which the DisTrO backend reads). Host-copy entry points remain for evaluation and "try the model".
//
// Graph capture (ORT's `enableGraphCapture`): the first run records the step's kernels and later runs replay
// them, which binds the input and output buffers of that first run for good. So a captured session reads its
// token ids and parameters from buffers this backend owns (the parameters are copied into them on the GPU
// before each step) and returns every output, the loss included, in GPU buffers that the next run overwrites.
import * as ort from 'onnxruntime-web/webgpu';
import type { DistroTensor, WebGpuDistroBackend } from '@meshtrain/distro';
import { requestComputeDevice } from '@meshtrain/distro';
import { buildInference, buildTrainStep, parameterSpecs } from '@meshtrain/model';
import type { BuiltGraph, LlamaConfig } from '@meshtrain/model';
import { captureSafeOutputs } from './capture-outputs.ts';
import type {
  ParameterMap,
  ResidentStepOutput,
  ResidentTrainingBackend,
  TrainStepOutput,
} from '../interfaces.ts';

ort.env.wasm.numThreads = 1;

// GPUBufferUsage / GPUMapMode bits, spelled out so this module loads where the WebGPU globals are not installed.
const STORAGE = 0x80;
const COPY_DST = 0x08;
const MAP_READ = 0x01;

export interface WebGpuTrainingOptions {
  config: LlamaConfig;
  seqLen: number;
  device: GPUDevice;
  /** DisTrO's WGSL backend on `device`: the tensors resident train steps read and return. */
  distro: WebGpuDistroBackend;
  maxRows: number;
  description: string;
  /**
   * Record each resident step's kernels once and replay them (ORT's graph capture). Default true; when the
   * session cannot be created with it, the backend says so through `log` and runs uncaptured.
   */
  graphCapture?: boolean;
  /** One line per notable event (graph capture unavailable). */
  log?: (line: string) => void;
  /** Awaited before every train step: where the volunteer's throttle (share of time) takes effect. */
  gate?: () => Promise<void>;
  /**
   * Told how long each train step took (ms) and how many sequences it trained on: the throttle rests in
   * proportion, and the page shows the tab's tokens per second.
   */
  onStep?: (ms: number, rows: number) => void;
  /** Run by `dispose` after the sessions are released (a shell that lends the device hands its release here). */
  onDispose?: () => void | Promise<void>;
}

/** Bytes between host and GPU, and work done, as the backend's train steps performed them. */
export interface WebGpuTrainingStats {
  /** Parameter bytes that went from the host to ORT in train steps (0 when resident). */
  hostParamBytes: number;
  /** Gradient bytes that ORT returned to the host in train steps (0 when resident). */
  hostGradientBytes: number;
  /** Every byte train steps sent from the host to the GPU (token ids, and host parameters on the host path). */
  uploadBytes: number;
  /** Every byte train steps read back from the GPU (the loss, and gradients on the host path). */
  downloadBytes: number;
  /** Bytes copied GPU→GPU into a captured session's fixed input buffers. */
  deviceCopyBytes: number;
  residentSteps: number;
  /** Resident steps that ran a captured session. */
  capturedSteps: number;
}

/** Total and graph-only time of resident steps: what a benchmark sets against the optimizer's share. */
export interface StepTiming {
  /** Sum over resident steps of the whole `trainStepResident` call (ms), loss read back. */
  stepMs: number;
  steps: number;
}

interface Session {
  graph: BuiltGraph;
  session: ort.InferenceSession;
  captured: boolean;
}

/**
 * A resident session's fixed input buffers: what a captured graph reads on every replay. The parameter
 * buffers (captured sessions only) are shared by every row count's session: each run copies the parameters in
 * before it starts, and runs never overlap.
 */
interface ResidentInputs {
  tokens: GPUBuffer;
  params: ReadonlyMap<string, GPUBuffer>;
  staging: GPUBuffer;
}

/** Creates the one GPUDevice of a trainer with the adapter's maxima for the limits ORT's kernels need. */
export function createTrainingDevice(adapter: GPUAdapter): Promise<GPUDevice> {
  return requestComputeDevice(adapter, 'meshtrain-trainer');
}

const pad16 = (bytes: number): number => Math.max(16, Math.ceil(bytes / 16) * 16);

export class WebGpuTrainingBackend implements ResidentTrainingBackend {
  readonly description: string;
  readonly maxRows: number;
  readonly shapes: Map<string, number[]>;
  readonly residentDistro: WebGpuDistroBackend;
  readonly stats: WebGpuTrainingStats = {
    hostParamBytes: 0,
    hostGradientBytes: 0,
    uploadBytes: 0,
    downloadBytes: 0,
    deviceCopyBytes: 0,
    residentSteps: 0,
    capturedSteps: 0,
  };
  readonly timing: StepTiming = { stepMs: 0, steps: 0 };
  private readonly o: WebGpuTrainingOptions;
  private readonly device: GPUDevice;
  private readonly sessions = new Map<string, Promise<Session>>();
  private readonly inputs = new Map<string, ResidentInputs>();
  private readonly fixedParams = new Map<string, GPUBuffer>();
  private params: ParameterMap = new Map();
  private paramTensors: ReadonlyMap<string, DistroTensor> = new Map();
  private captureRefused = false;
  private disposed = false;
  /**
   * ORT's wasm (asyncify build) is not re-entrant: two session calls in flight at once (a train step and a
   * "try the model" generation) corrupt its suspended stack. Every session create/run goes through this queue.
   */
  private queue: Promise<unknown> = Promise.resolve();

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  constructor(o: WebGpuTrainingOptions) {
    this.o = o;
    this.device = o.device;
    this.maxRows = o.maxRows;
    this.description = o.description;
    this.residentDistro = o.distro;
    if (o.distro.device !== o.device) throw new Error('the DisTrO backend must run on the training device');
    this.shapes = new Map(parameterSpecs(o.config).map((p) => [p.name, [...p.shape]]));
  }

  /** Whether resident steps run captured sessions (false after a refusal, or when not asked for). */
  get graphCapture(): boolean {
    return (this.o.graphCapture ?? true) && !this.captureRefused;
  }

  private create(
    graph: BuiltGraph,
    options: ort.InferenceSession.SessionOptions,
  ): Promise<ort.InferenceSession> {
    return this.exclusive(() =>
      ort.InferenceSession.create(graph.onnx, {
        ...options,
        executionProviders: [
          { name: 'webgpu', device: this.device } as ort.InferenceSession.ExecutionProviderConfig,
        ],
        // Fail loudly instead of running part of the graph on the CPU (slow, and wrong results seen).
        extra: { session: { disable_cpu_ep_fallback: '1' } },
      }),
    );
  }

  private session(kind: 'train' | 'train-resident' | 'eval' | 'infer', rows: number, seqLen = this.o.seqLen) {
    const key = `${kind}:${rows}:${seqLen}`;
    let s = this.sessions.get(key);
    if (!s) {
      s = (async (): Promise<Session> => {
        const opts = { batchSize: rows, seqLen, dtype: 'float32' as const };
        const graph =
          kind === 'infer'
            ? buildInference(this.o.config, opts)
            : buildTrainStep(this.o.config, kind === 'eval' ? { ...opts, withGradients: false } : opts);
        if (kind !== 'train-resident')
          return { graph, session: await this.create(graph, {}), captured: false };
        // Resident steps keep every output in a GPU buffer; the loss is read back by a small copy.
        const preferredOutputLocation: Record<string, ort.Tensor.DataLocation> = {};
        for (const out of graph.outputs) preferredOutputLocation[out.name] = 'gpu-buffer';
        if (this.graphCapture) {
          try {
            const safe = { ...graph, onnx: captureSafeOutputs(graph.onnx).onnx };
            const session = await this.create(safe, { preferredOutputLocation, enableGraphCapture: true });
            return { graph, session, captured: true };
          } catch (e) {
            this.captureRefused = true;
            this.o.log?.(
              `graph capture unavailable (${(e as Error).message.split('\n')[0]}); resident steps run uncaptured`,
            );
          }
        }
        return { graph, session: await this.create(graph, { preferredOutputLocation }), captured: false };
      })();
      s.catch(() => this.sessions.delete(key));
      this.sessions.set(key, s);
    }
    return s;
  }

  private buffer(bytes: number, usage: number): GPUBuffer {
    return this.device.createBuffer({ size: pad16(bytes), usage });
  }

  /** The fixed token, parameter (captured sessions only) and loss staging buffers of a resident session. */
  private residentInputs(key: string, graph: BuiltGraph, captured: boolean): ResidentInputs {
    let inputs = this.inputs.get(key);
    if (!inputs) {
      let tokens: GPUBuffer | undefined;
      for (const input of graph.inputs) {
        const bytes = input.shape.reduce((a, b) => a * b, 1) * 4;
        if (input.name === 'tokens') tokens = this.buffer(bytes, STORAGE | COPY_DST);
        else if (captured && !this.fixedParams.has(input.name))
          this.fixedParams.set(input.name, this.buffer(bytes, STORAGE | COPY_DST));
      }
      if (!tokens) throw new Error('the train-step graph has no tokens input');
      const params = captured ? this.fixedParams : new Map<string, GPUBuffer>();
      inputs = { tokens, params, staging: this.buffer(4, MAP_READ | COPY_DST) };
      this.inputs.set(key, inputs);
    }
    return inputs;
  }

  async loadParams(params: ParameterMap): Promise<void> {
    this.params = params;
  }

  async loadParamTensors(params: ReadonlyMap<string, DistroTensor>): Promise<void> {
    this.paramTensors = params;
  }

  /** The graph's inputs: the token ids, and each parameter as `param` makes it (undefined: not loaded). */
  private feeds(
    graph: BuiltGraph,
    tokens: (dims: number[]) => ort.Tensor,
    param: (name: string, dims: number[]) => ort.Tensor | undefined,
  ): Record<string, ort.Tensor> {
    const out: Record<string, ort.Tensor> = {};
    for (const input of graph.inputs) {
      if (input.name === 'tokens') out.tokens = tokens(input.shape);
      else {
        const t = param(input.name, input.shape);
        if (!t) throw new Error(`the graph wants parameter ${input.name}, which was not loaded`);
        out[input.name] = t;
      }
    }
    return out;
  }

  /** Feeds from host copies of the parameters. */
  private hostFeeds(graph: BuiltGraph, tokens: Int32Array, params: ParameterMap): Record<string, ort.Tensor> {
    return this.feeds(
      graph,
      (dims) => new ort.Tensor('int32', tokens, dims),
      (name, dims) => {
        const data = params.get(name);
        return data ? new ort.Tensor('float32', data, dims) : undefined;
      },
    );
  }

  /** Counts what ORT moves between host and GPU for a train step: host-located feeds go up, host outputs down. */
  private countTraffic(feeds: Record<string, ort.Tensor>, out: ort.InferenceSession.ReturnType): void {
    for (const [name, t] of Object.entries(feeds)) {
      if (t.location !== 'cpu') continue;
      const bytes = (t.data as ArrayBufferView).byteLength;
      this.stats.uploadBytes += bytes;
      if (name !== 'tokens') this.stats.hostParamBytes += bytes;
    }
    for (const [name, t] of Object.entries(out)) {
      if (t.location !== 'cpu') continue;
      const bytes = (t.data as ArrayBufferView).byteLength;
      this.stats.downloadBytes += bytes;
      if (name.startsWith('grad.')) this.stats.hostGradientBytes += bytes;
    }
  }

  /** Copies the loaded parameter tensors into a captured session's fixed buffers (on the GPU). */
  private copyParams(graph: BuiltGraph, inputs: ResidentInputs): void {
    const enc = this.device.createCommandEncoder();
    const temporary: GPUBuffer[] = [];
    for (const input of graph.inputs) {
      if (input.name === 'tokens') continue;
      const t = this.paramTensors.get(input.name);
      const dst = inputs.params.get(input.name);
      if (!t || !dst) throw new Error(`the graph wants parameter ${input.name}, which was not loaded`);
      const { buffer, temporary: temp } = this.o.distro.bufferOf(t);
      if (temp) temporary.push(buffer);
      enc.copyBufferToBuffer(buffer, 0, dst, 0, t.size * 4);
      this.stats.deviceCopyBytes += t.size * 4;
    }
    this.device.queue.submit([enc.finish()]);
    // Submitted work keeps what it reads alive; destroy() only frees the buffers once it completes.
    for (const b of temporary) b.destroy();
  }

  /** Queues the copy of the loss (a GPU output) into the mappable staging buffer. */
  private copyLoss(loss: ort.Tensor, staging: GPUBuffer): void {
    const enc = this.device.createCommandEncoder();
    enc.copyBufferToBuffer(loss.gpuBuffer as GPUBuffer, 0, staging, 0, 4);
    this.device.queue.submit([enc.finish()]);
  }

  /** The loss that `copyLoss` queued. */
  private async readLoss(staging: GPUBuffer): Promise<number> {
    await staging.mapAsync(MAP_READ);
    const value = new Float32Array(staging.getMappedRange(0, 4))[0] as number;
    staging.unmap();
    this.stats.downloadBytes += 4;
    return value;
  }

  async trainStepResident(tokens: Int32Array, rows: number): Promise<ResidentStepOutput> {
    await this.o.gate?.();
    const t0 = performance.now();
    const key = `train-resident:${rows}:${this.o.seqLen}`;
    const { graph, session, captured } = await this.session('train-resident', rows);
    const inputs = this.residentInputs(key, graph, captured);
    let out!: ort.InferenceSession.ReturnType;
    const temporary: GPUBuffer[] = [];
    const work = async () => {
      // Inside the queue: a captured session's fixed buffers belong to the step that runs now.
      this.device.queue.writeBuffer(inputs.tokens, 0, tokens.buffer, tokens.byteOffset, tokens.byteLength);
      this.stats.uploadBytes += tokens.byteLength;
      if (captured) this.copyParams(graph, inputs);
      const feeds = this.feeds(
        graph,
        (dims) => ort.Tensor.fromGpuBuffer(inputs.tokens, { dataType: 'int32', dims }),
        (name, dims) => {
          const fixed = inputs.params.get(name);
          if (fixed) return ort.Tensor.fromGpuBuffer(fixed, { dataType: 'float32', dims });
          const t = this.paramTensors.get(name);
          if (!t) return undefined;
          const { buffer, temporary: temp } = this.o.distro.bufferOf(t);
          if (temp) temporary.push(buffer);
          // fromGpuBuffer tensors do not own the buffer: the DisTrO backend does, so these are never disposed.
          return ort.Tensor.fromGpuBuffer(buffer, { dataType: 'float32', dims });
        },
      );
      try {
        out = await session.run(feeds);
      } finally {
        for (const b of temporary) b.destroy();
      }
      this.countTraffic(feeds, out);
      // Queued before the next run can overwrite a captured session's loss buffer.
      this.copyLoss(out.loss as ort.Tensor, inputs.staging);
    };
    await this.exclusive(work);
    const grads = new Map<string, DistroTensor>();
    const release = () => {
      for (const t of Object.values(out)) t.dispose();
    };
    let loss: number;
    try {
      for (const [name, t] of this.paramTensors) {
        const g = out[`grad.${name}`];
        if (!g || g.location !== 'gpu-buffer')
          throw new Error(
            `the train step returned no GPU gradient for ${name} (${g?.location ?? 'missing'})`,
          );
        grads.set(name, this.o.distro.wrap(g.gpuBuffer as GPUBuffer, t.shape));
      }
      loss = await this.readLoss(inputs.staging);
    } catch (e) {
      release();
      throw e;
    }
    this.stats.residentSteps++;
    if (captured) this.stats.capturedSteps++;
    const ms = performance.now() - t0;
    this.timing.stepMs += ms;
    this.timing.steps++;
    this.o.onStep?.(ms, rows);
    return { loss, grads, release };
  }

  /**
   * Runs resident train steps alone (`reps` times on the loaded parameter tensors: no optimizer, no
   * compression) and returns the mean milliseconds per step, each waited for on the GPU: what a benchmark sets
   * against the whole resident step.
   */
  async timeTrainGraph(tokens: Int32Array, rows: number, reps: number): Promise<number> {
    let total = 0;
    for (let i = 0; i < reps; i++) {
      const t0 = performance.now();
      const out = await this.trainStepResident(tokens, rows);
      await this.device.queue.onSubmittedWorkDone();
      total += performance.now() - t0;
      out.release();
    }
    return total / reps;
  }

  async trainStep(tokens: Int32Array, rows: number): Promise<TrainStepOutput> {
    await this.o.gate?.();
    const t0 = performance.now();
    const { graph, session } = await this.session('train', rows);
    const feeds = this.hostFeeds(graph, tokens, this.params);
    const out = await this.exclusive(() => session.run(feeds));
    this.countTraffic(feeds, out);
    const grads: ParameterMap = new Map();
    for (const name of this.params.keys()) {
      const g = out[`grad.${name}`];
      if (!g) throw new Error(`the train step returned no gradient for ${name}`);
      grads.set(name, Float32Array.from(g.data as Float32Array));
    }
    const loss = Number((out.loss as ort.Tensor).data[0]);
    for (const t of Object.values(out)) t.dispose();
    this.o.onStep?.(performance.now() - t0, rows);
    return { loss, grads };
  }

  async evalLoss(tokens: Int32Array, rows: number, params?: ParameterMap): Promise<number> {
    const { graph, session } = await this.session('eval', rows);
    const out = await this.exclusive(() => session.run(this.hostFeeds(graph, tokens, params ?? this.params)));
    const loss = Number((out.loss as ort.Tensor).data[0]);
    for (const t of Object.values(out)) t.dispose();
    return loss;
  }

  /**
   * Greedy generation from `params` with a fixed window of `window` tokens (left-padded with `padId`): one
   * inference session, so each new token costs one forward pass of the window.
   */
  async generate(
    params: ParameterMap,
    prompt: readonly number[],
    maxTokens: number,
    window: number,
    padId: number,
  ): Promise<number[]> {
    const { graph, session } = await this.session('infer', 1, window);
    const ctx = [...prompt];
    const out: number[] = [];
    for (let i = 0; i < maxTokens; i++) {
      const tail = ctx.slice(-window);
      const tokens = new Int32Array(window).fill(padId);
      tokens.set(tail, window - tail.length);
      const res = await this.exclusive(() => session.run(this.hostFeeds(graph, tokens, params)));
      const logits = (res.logits as ort.Tensor).data as Float32Array;
      let best = 0;
      for (let v = 1; v < logits.length; v++) if ((logits[v] as number) > (logits[best] as number)) best = v;
      for (const t of Object.values(res)) t.dispose();
      ctx.push(best);
      out.push(best);
    }
    return out;
  }

  /** Releases every session and fixed buffer, then runs `onDispose`; later calls do nothing. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    for (const s of this.sessions.values()) {
      const step = await s.catch(() => null);
      if (step) await this.exclusive(() => step.session.release());
    }
    this.sessions.clear();
    for (const inputs of this.inputs.values()) for (const b of [inputs.tokens, inputs.staging]) b.destroy();
    this.inputs.clear();
    for (const b of this.fixedParams.values()) b.destroy();
    this.fixedParams.clear();
    await this.o.onDispose?.();
  }
}
