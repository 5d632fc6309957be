// TrainingBackend on onnxruntime-node: the train-step graph from @meshtrain/model, one session per row count
// (graphs have static shapes, and a round's batch may not divide evenly into micro-batches).
import type { ParameterMap, TrainingBackend, TrainStepOutput } from '@meshtrain/client';
import { buildTrainStep, parameterSpecs, type BuiltGraph, type LlamaConfig } from '@meshtrain/model';
import * as ort from 'onnxruntime-node';
import { createSession, type SessionOptions } from '../ort/session.ts';
import type { TrainDevice } from './device.ts';

export interface OrtBackendOptions {
  config: LlamaConfig;
  seqLen: number;
  device: TrainDevice;
  /** Micro-batch: rows per session run. */
  maxRows: number;
  description?: string;
  /** CPU EP thread settings (ort/session.ts). */
  cpu?: Pick<SessionOptions, 'intraOpThreads' | 'spinning'>;
}

interface Step {
  graph: BuiltGraph;
  session: ort.InferenceSession;
}

export class OrtTrainingBackend implements TrainingBackend {
  readonly description: string;
  readonly maxRows: number;
  readonly shapes: Map<string, number[]>;
  private readonly o: OrtBackendOptions;
  private readonly train = new Map<number, Promise<Step>>();
  private readonly evals = new Map<number, Promise<Step>>();
  private params: ParameterMap = new Map();

  constructor(o: OrtBackendOptions) {
    this.o = o;
    this.maxRows = o.maxRows;
    this.description = o.description ?? `onnxruntime-node ${o.device}`;
    this.shapes = new Map(parameterSpecs(o.config).map((p) => [p.name, [...p.shape]]));
  }

  private step(rows: number, withGradients: boolean): Promise<Step> {
    const cache = withGradients ? this.train : this.evals;
    let s = cache.get(rows);
    if (!s) {
      s = (async () => {
        const graph = buildTrainStep(this.o.config, {
          batchSize: rows,
          seqLen: this.o.seqLen,
          dtype: 'float32',
          ...(withGradients ? {} : { withGradients: false }),
        });
        const session =
          this.o.device === 'cuda'
            ? await ort.InferenceSession.create(graph.onnx, { executionProviders: ['cuda'] })
            : await createSession(graph.onnx, { device: this.o.device, dtype: 'float32', ...this.o.cpu });
        return { graph, session };
      })();
      cache.set(rows, s);
    }
    return s;
  }

  async loadParams(params: ParameterMap): Promise<void> {
    this.params = params;
  }

  private feeds(graph: BuiltGraph, tokens: Int32Array, params = this.params): Record<string, ort.Tensor> {
    const out: Record<string, ort.Tensor> = {};
    for (const input of graph.inputs) {
      if (input.name === 'tokens') out.tokens = new ort.Tensor('int32', tokens, input.shape);
      else {
        const data = params.get(input.name);
        if (!data) throw new Error(`train step wants parameter ${input.name}, which was not loaded`);
        out[input.name] = new ort.Tensor('float32', data, input.shape);
      }
    }
    return out;
  }

  async trainStep(tokens: Int32Array, rows: number): Promise<TrainStepOutput> {
    const { graph, session } = await this.step(rows, true);
    const out = await session.run(this.feeds(graph, tokens));
    const grads: ParameterMap = new Map();
    for (const name of this.params.keys()) {
      const g = out[`grad.${name}`];
      if (!g) throw new Error(`train step returned no gradient for ${name}`);
      // The binding copies every output into a fresh JS buffer that no session reuses: no second copy.
      grads.set(name, g.data as Float32Array);
    }
    return { loss: Number((out.loss as ort.Tensor).data[0]), grads };
  }

  async evalLoss(tokens: Int32Array, rows: number, params?: ParameterMap): Promise<number> {
    const { graph, session } = await this.step(rows, false);
    const out = await session.run(this.feeds(graph, tokens, params));
    return Number((out.loss as ort.Tensor).data[0]);
  }

  async dispose(): Promise<void> {
    for (const s of [...this.train.values(), ...this.evals.values()]) await (await s).session.release();
    this.train.clear();
    this.evals.clear();
  }
}
