// TrainingBackend on onnxruntime-web's native WebGPU EP ('onnxruntime-web/webgpu', never the default JSEP
// import), on one GPUDevice this worker creates and hands to every session (the only sharing ORT 1.30
// honours). One session per row count: graphs have static shapes.
//
// Training is resident: DisTrO's WGSL backend runs on the same GPUDevice, so the client hands over the
// parameters to train at (DisTrO's lookahead, SparseLoCo's local parameters) as DisTrO tensors (fed to ORT
// with Tensor.fromGpuBuffer) and gets the gradients back
// as ORT's own output buffers wrapped as DisTrO tensors. Per step only the token ids go up and the loss and the
// compressed result come down. Host-copy entry points remain for evaluation and "try the model".
import * as ort from 'onnxruntime-web/webgpu';
import type {
  ParameterMap,
  ResidentStepOutput,
  ResidentTrainingBackend,
  TrainStepOutput,
} from '@meshtrain/client';
import type { DistroTensor, WebGpuDistroBackend } from '@meshtrain/distro';
import { buildInference, buildTrainStep, parameterSpecs } from '@meshtrain/model';
import { requestComputeDevice } from '@meshtrain/distro';
import type { BuiltGraph, LlamaConfig } from '@meshtrain/model';

ort.env.wasm.numThreads = 1;

export interface WebGpuBackendOptions {
  config: LlamaConfig;
  seqLen: number;
  device: GPUDevice;
  /** DisTrO's WGSL backend on `device`: the tensors resident train steps read and return. */
  distro: WebGpuDistroBackend;
  maxRows: number;
  description: string;
  /** Awaited before every train step: where the volunteer's throttle (share of time) takes effect. */
  gate?: () => Promise<void>;
  /**
   * Told how long each train step took (ms) and how many sequences it trained on: the throttle rests in
   * proportion, and the page shows the tab's tokens per second.
   */
  onStep?: (ms: number, rows: number) => void;
}

interface Step {
  graph: BuiltGraph;
  session: ort.InferenceSession;
}

/** Creates the one GPUDevice of this worker with the adapter's maxima for the limits ORT's kernels need. */
export function createTrainingDevice(adapter: GPUAdapter): Promise<GPUDevice> {
  return requestComputeDevice(adapter, 'meshtrain-trainer');
}

export class WebGpuTrainingBackend implements ResidentTrainingBackend {
  readonly description: string;
  readonly maxRows: number;
  readonly shapes: Map<string, number[]>;
  readonly residentDistro: WebGpuDistroBackend;
  /** Parameter and gradient bytes that crossed between host and GPU in train steps (0 when resident). */
  readonly stats = { hostParamBytes: 0, hostGradientBytes: 0, residentSteps: 0 };
  private readonly o: WebGpuBackendOptions;
  private readonly sessions = new Map<string, Promise<Step>>();
  private params: ParameterMap = new Map();
  private paramTensors: ReadonlyMap<string, DistroTensor> = new Map();
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

  constructor(o: WebGpuBackendOptions) {
    this.o = o;
    this.maxRows = o.maxRows;
    this.description = o.description;
    this.residentDistro = o.distro;
    if (o.distro.device !== o.device) throw new Error('the DisTrO backend must run on the training device');
    this.shapes = new Map(parameterSpecs(o.config).map((p) => [p.name, [...p.shape]]));
  }

  private session(
    kind: 'train' | 'train-resident' | 'eval' | 'infer',
    rows: number,
    seqLen = this.o.seqLen,
  ): Promise<Step> {
    const key = `${kind}:${rows}:${seqLen}`;
    let s = this.sessions.get(key);
    if (!s) {
      s = (async () => {
        const opts = { batchSize: rows, seqLen, dtype: 'float32' as const };
        const graph =
          kind === 'infer'
            ? buildInference(this.o.config, opts)
            : buildTrainStep(this.o.config, kind === 'eval' ? { ...opts, withGradients: false } : opts);
        // Resident steps keep every gradient in ORT's GPU buffer; only the loss is downloaded.
        const preferredOutputLocation: Record<string, ort.Tensor.DataLocation> = {};
        if (kind === 'train-resident')
          for (const out of graph.outputs)
            preferredOutputLocation[out.name] = out.name.startsWith('grad.') ? 'gpu-buffer' : 'cpu';
        const session = await this.exclusive(() =>
          ort.InferenceSession.create(graph.onnx, {
            ...(kind === 'train-resident' ? { preferredOutputLocation } : {}),
            executionProviders: [
              { name: 'webgpu', device: this.o.device } as ort.InferenceSession.ExecutionProviderConfig,
            ],
            // Fail loudly instead of running part of the graph on the CPU (slow, and wrong results seen).
            extra: { session: { disable_cpu_ep_fallback: '1' } },
          }),
        );
        return { graph, session };
      })();
      s.catch(() => this.sessions.delete(key));
      this.sessions.set(key, s);
    }
    return s;
  }

  async loadParams(params: ParameterMap): Promise<void> {
    this.params = params;
  }

  /** The graph's inputs: the token ids, and each parameter as `param` makes it (undefined: not loaded). */
  private feeds(
    graph: BuiltGraph,
    tokens: Int32Array,
    param: (name: string, dims: number[]) => ort.Tensor | undefined,
  ): Record<string, ort.Tensor> {
    const out: Record<string, ort.Tensor> = {};
    for (const input of graph.inputs) {
      if (input.name === 'tokens') out.tokens = new ort.Tensor('int32', tokens, input.shape);
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
    return this.feeds(graph, tokens, (name, dims) => {
      const data = params.get(name);
      return data ? new ort.Tensor('float32', data, dims) : undefined;
    });
  }

  async loadParamTensors(params: ReadonlyMap<string, DistroTensor>): Promise<void> {
    this.paramTensors = params;
  }

  async trainStepResident(tokens: Int32Array, rows: number): Promise<ResidentStepOutput> {
    await this.o.gate?.();
    const t0 = performance.now();
    const { graph, session } = await this.session('train-resident', rows);
    const temporary: GPUBuffer[] = [];
    let out: ort.InferenceSession.ReturnType;
    try {
      const feeds = this.feeds(graph, tokens, (name, dims) => {
        const t = this.paramTensors.get(name);
        if (!t) return undefined;
        const { buffer, temporary: temp } = this.o.distro.bufferOf(t);
        if (temp) temporary.push(buffer);
        // fromGpuBuffer tensors do not own the buffer: the DisTrO backend does, so these are never disposed.
        return ort.Tensor.fromGpuBuffer(buffer, { dataType: 'float32', dims });
      });
      out = await this.exclusive(() => session.run(feeds));
    } finally {
      // Submitted work keeps what it reads alive; destroy() only frees the buffers once it completes.
      for (const b of temporary) b.destroy();
    }
    const grads = new Map<string, DistroTensor>();
    const release = () => {
      for (const t of Object.values(out)) t.dispose();
    };
    try {
      for (const [name, t] of this.paramTensors) {
        const g = out[`grad.${name}`];
        if (!g || g.location !== 'gpu-buffer')
          throw new Error(
            `the train step returned no GPU gradient for ${name} (${g?.location ?? 'missing'})`,
          );
        grads.set(name, this.o.distro.wrap(g.gpuBuffer as GPUBuffer, t.shape));
      }
    } catch (e) {
      release();
      throw e;
    }
    const loss = Number((out.loss as ort.Tensor).data[0]);
    this.stats.residentSteps++;
    this.o.onStep?.(performance.now() - t0, rows);
    return { loss, grads, release };
  }

  async trainStep(tokens: Int32Array, rows: number): Promise<TrainStepOutput> {
    await this.o.gate?.();
    const t0 = performance.now();
    const { graph, session } = await this.session('train', rows);
    const out = await this.exclusive(() => session.run(this.hostFeeds(graph, tokens, this.params)));
    const grads: ParameterMap = new Map();
    for (const name of this.params.keys()) {
      const g = out[`grad.${name}`];
      if (!g) throw new Error(`the train step returned no gradient for ${name}`);
      grads.set(name, Float32Array.from(g.data as Float32Array));
      this.stats.hostGradientBytes += g.size * 4;
    }
    for (const p of this.params.values()) this.stats.hostParamBytes += p.byteLength;
    const loss = Number((out.loss as ort.Tensor).data[0]);
    for (const t of Object.values(out)) t.dispose();
    this.o.onStep?.(performance.now() - t0, rows);
    return { loss, grads };
  }

  async evalLoss(tokens: Int32Array, rows: number): Promise<number> {
    const { graph, session } = await this.session('eval', rows);
    const out = await this.exclusive(() => session.run(this.hostFeeds(graph, tokens, this.params)));
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

  async dispose(): Promise<void> {
    for (const s of this.sessions.values()) {
      const { session } = await s;
      await this.exclusive(() => session.release());
    }
    this.sessions.clear();
  }
}
