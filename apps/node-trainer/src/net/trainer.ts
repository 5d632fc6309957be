// Assembles a Client for node-trainer: the run's model shape and either the resident GPU (onnxruntime-web and
// DisTrO's WGSL on one Dawn device, backend/gpu.ts: `--device webgpu`) or onnxruntime-node on the chosen device
// with DisTrO's backend on the host (CPU reference). DisTrO's apply and SparseLoCo's outer step are
// bit-identical on both DisTrO backends, so peers on either agree.
import {
  Client,
  type CheckpointSource,
  type ClientEvent,
  type CoordinatorLink,
  type DataSource,
  type PeerNetwork,
  type TrainingBackend,
} from '@meshtrain/client';
import { compressionChunkOf, type RunConfig } from '@meshtrain/core';
import { createCpuBackend, type DistroBackend } from '@meshtrain/distro';
import { initParameters, modelConfigForRun, type LlamaConfig } from '@meshtrain/model';
import { OrtTrainingBackend } from '../backend/ort-backend.ts';
import type { DeviceChoice } from '../backend/device.ts';
import type { NodeGpu } from '../backend/gpu.ts';

/** What node-trainer trains and evaluates with: either backend, with evaluation and release. */
export type TrainerBackend = TrainingBackend &
  Required<Pick<TrainingBackend, 'evalLoss' | 'dispose'>> & { readonly shapes: Map<string, number[]> };

export interface TrainerOptions {
  run: RunConfig;
  runId: string;
  secretKey: Uint8Array;
  link: CoordinatorLink;
  data: DataSource;
  checkpoints: CheckpointSource;
  device: DeviceChoice;
  /** Rows per ORT run; defaults to the run's micro_batch_size. */
  maxRows?: number;
  peers?: PeerNetwork;
  onEvent?: (e: ClientEvent) => void;
  /** The resident GPU (`--device webgpu`): its backend trains on its DisTrO backend's device. */
  gpu?: Pick<NodeGpu, 'backend' | 'distro'>;
}

export function createTrainer(o: TrainerOptions): {
  client: Client;
  backend: TrainerBackend;
  distro: DistroBackend;
  model: LlamaConfig;
} {
  const model = modelConfigForRun(o.run);
  const chunk = compressionChunkOf(o.run.model.LLM.optimizer);
  if (chunk === null) throw new Error('node-trainer trains DisTrO and SparseLoCo runs only');
  if (o.gpu && o.gpu.distro.chunk !== chunk)
    throw new Error(`the GPU's DisTrO backend uses chunk ${o.gpu.distro.chunk}, the run ${chunk}`);
  const backend: TrainerBackend =
    o.gpu?.backend ??
    new OrtTrainingBackend({
      config: model,
      seqLen: o.run.model.LLM.max_seq_len,
      device: o.device.device,
      maxRows: o.maxRows ?? o.run.meshtrain.micro_batch_size,
      description: `onnxruntime-node ${o.device.device}${o.device.device === 'webgpu' && o.device.adapter ? ` (${o.device.adapter})` : ''}`,
    });
  const distro = o.gpu?.distro ?? createCpuBackend({ chunk });
  const client = new Client({
    run: o.run,
    runId: o.runId,
    secretKey: o.secretKey,
    link: o.link,
    backend,
    distro,
    data: o.data,
    initParams: () => initParameters(model, o.run.meshtrain.seed),
    checkpoints: o.checkpoints,
    ...(o.peers ? { peers: o.peers } : {}),
    ...(o.onEvent ? { onEvent: o.onEvent } : {}),
  });
  client.setShapes(backend.shapes);
  return { client, backend, distro, model };
}
