// One node-trainer ONNX backend (OrtTrainingBackend: the train-step graph, one session per row count) shared
// by every peer of an in-process run on one device (onnxruntime-node's CPU EP, or its WebGPU EP). Each peer
// gets a TrainingBackend of its own that keeps its own parameters; calls run one at a time through a queue,
// so one peer's train step never reads another's parameters, the graphs are built once instead of once per
// peer, and the driver can tell when all compute has finished (`busy`).
import type { ParameterMap, TrainingBackend, TrainStepOutput } from '@meshtrain/client';
import type { LlamaConfig } from '@meshtrain/model';
import {
  OrtTrainingBackend,
  type OrtBackendOptions,
} from '../../apps/node-trainer/src/backend/ort-backend.ts';

export class SharedOrt {
  readonly backend: OrtTrainingBackend;
  private tail: Promise<unknown> = Promise.resolve();
  private pending = 0;
  /** Seconds spent inside ONNX Runtime calls (train steps and evaluations). */
  seconds = 0;

  constructor(
    config: LlamaConfig,
    seqLen: number,
    maxRows: number,
    cpu: OrtBackendOptions['cpu'] = {},
    device: 'cpu' | 'webgpu' = 'cpu',
  ) {
    this.backend = new OrtTrainingBackend({
      config,
      seqLen,
      device,
      maxRows,
      cpu,
      description: `onnxruntime-node ${device} (shared by the in-process peers)`,
    });
  }

  /** The queue's tail while calls are queued or running, else null. */
  busy(): Promise<void> | null {
    return this.pending > 0 ? this.tail.then(() => {}) : null;
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    this.pending++;
    const run = this.tail.then(async () => {
      const t0 = performance.now();
      try {
        return await work();
      } finally {
        this.seconds += (performance.now() - t0) / 1000;
      }
    });
    this.tail = run.then(
      () => this.pending--,
      () => this.pending--,
    );
    return run;
  }

  /** A peer's view: its own loaded parameters, the shared sessions. */
  forPeer(): TrainingBackend {
    let params: ParameterMap = new Map();
    const shared = this.backend;
    return {
      description: shared.description,
      maxRows: shared.maxRows,
      loadParams: async (p) => {
        params = p;
      },
      trainStep: (tokens, rows): Promise<TrainStepOutput> =>
        this.exclusive(async () => {
          await shared.loadParams(params);
          return shared.trainStep(tokens, rows);
        }),
      evalLoss: (tokens, rows, p) => this.exclusive(() => shared.evalLoss(tokens, rows, p ?? params)),
    };
  }

  /** Mean loss of `params` over the held-out batches (each batch weighs its rows). */
  async heldOutLoss(
    params: ParameterMap,
    batches: readonly { tokens: Int32Array; rows: number }[],
  ): Promise<number> {
    let sum = 0;
    let rows = 0;
    for (const b of batches) {
      sum += (await this.exclusive(() => this.backend.evalLoss(b.tokens, b.rows, params))) * b.rows;
      rows += b.rows;
    }
    return sum / rows;
  }

  dispose(): Promise<void> {
    return this.backend.dispose();
  }
}
