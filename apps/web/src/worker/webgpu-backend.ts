// TrainingBackend on onnxruntime-web's native WebGPU EP ('onnxruntime-web/webgpu', never the default JSEP
// import), on one GPUDevice this worker creates and hands to every session (the only sharing ORT 1.30
// honours). One session per row count: graphs have static shapes. Parameters are fed from host copies and
// gradients read back, because the client's DisTrO runs on its CPU reference today (bit-identical apply
// across devices); keeping them in GPU buffers is the next step (see apps/web/README.md).
import * as ort from 'onnxruntime-web/webgpu';
import type { ParameterMap, TrainingBackend, TrainStepOutput } from '@meshtrain/client';
import { buildInference, buildTrainStep, parameterSpecs } from '@meshtrain/model';
import { requestComputeDevice } from '@meshtrain/distro';
import type { BuiltGraph, LlamaConfig } from '@meshtrain/model';

ort.env.wasm.numThreads = 1;

export interface WebGpuBackendOptions {
  config: LlamaConfig;
  seqLen: number;
  device: GPUDevice;
  maxRows: number;
  description: string;
  /** Awaited before every train step: where the volunteer's throttle (share of time) takes effect. */
  gate?: () => Promise<void>;
  /** Told how long each train step took (ms), so the throttle can rest in proportion. */
  onStepTime?: (ms: number) => void;
}

interface Step {
  graph: BuiltGraph;
  session: ort.InferenceSession;
}

/** Creates the one GPUDevice of this worker with the adapter's maxima for the limits ORT's kernels need. */
export function createTrainingDevice(adapter: GPUAdapter): Promise<GPUDevice> {
  return requestComputeDevice(adapter, 'meshtrain-trainer');
}

export class WebGpuTrainingBackend implements TrainingBackend {
  readonly description: string;
  readonly maxRows: number;
  readonly shapes: Map<string, number[]>;
  private readonly o: WebGpuBackendOptions;
  private readonly sessions = new Map<string, Promise<Step>>();
  private params: ParameterMap = new Map();
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
    this.shapes = new Map(parameterSpecs(o.config).map((p) => [p.name, [...p.shape]]));
  }

  private session(kind: 'train' | 'eval' | 'infer', rows: number, seqLen = this.o.seqLen): Promise<Step> {
    const key = `${kind}:${rows}:${seqLen}`;
    let s = this.sessions.get(key);
    if (!s) {
      s = (async () => {
        const opts = { batchSize: rows, seqLen, dtype: 'float32' as const };
        const graph =
          kind === 'infer'
            ? buildInference(this.o.config, opts)
            : buildTrainStep(this.o.config, kind === 'eval' ? { ...opts, withGradients: false } : opts);
        const session = await this.exclusive(() =>
          ort.InferenceSession.create(graph.onnx, {
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

  private feeds(graph: BuiltGraph, tokens: Int32Array, params: ParameterMap): Record<string, ort.Tensor> {
    const out: Record<string, ort.Tensor> = {};
    for (const input of graph.inputs) {
      if (input.name === 'tokens') out.tokens = new ort.Tensor('int32', tokens, input.shape);
      else {
        const data = params.get(input.name);
        if (!data) throw new Error(`the graph wants parameter ${input.name}, which was not loaded`);
        out[input.name] = new ort.Tensor('float32', data, input.shape);
      }
    }
    return out;
  }

  async trainStep(tokens: Int32Array, rows: number): Promise<TrainStepOutput> {
    await this.o.gate?.();
    const t0 = performance.now();
    const { graph, session } = await this.session('train', rows);
    const out = await this.exclusive(() => session.run(this.feeds(graph, tokens, this.params)));
    const grads: ParameterMap = new Map();
    for (const name of this.params.keys()) {
      const g = out[`grad.${name}`];
      if (!g) throw new Error(`the train step returned no gradient for ${name}`);
      grads.set(name, Float32Array.from(g.data as Float32Array));
    }
    const loss = Number((out.loss as ort.Tensor).data[0]);
    for (const t of Object.values(out)) t.dispose();
    this.o.onStepTime?.(performance.now() - t0);
    return { loss, grads };
  }

  async evalLoss(tokens: Int32Array, rows: number): Promise<number> {
    const { graph, session } = await this.session('eval', rows);
    const out = await this.exclusive(() => session.run(this.feeds(graph, tokens, this.params)));
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
      const res = await this.exclusive(() => session.run(this.feeds(graph, tokens, params)));
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
