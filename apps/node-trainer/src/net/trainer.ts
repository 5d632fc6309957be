// Assembles a Client for node-trainer: the run's model shape, the ONNX Runtime backend on the chosen device,
// DisTrO's backend on the host (CPU reference; DisTrO's apply and SparseLoCo's outer step are bit-identical
// to the WGSL ones, so peers on GPUs agree).
import {
  Client,
  type CheckpointSource,
  type ClientEvent,
  type CoordinatorLink,
  type DataSource,
  type PeerNetwork,
} from '@meshtrain/client';
import { compressionChunkOf, type RunConfig } from '@meshtrain/core';
import { createCpuBackend } from '@meshtrain/distro';
import { initParameters, modelConfigForRun, type LlamaConfig } from '@meshtrain/model';
import { OrtTrainingBackend } from '../backend/ort-backend.ts';
import type { DeviceChoice } from '../backend/device.ts';

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
}

export function createTrainer(o: TrainerOptions): {
  client: Client;
  backend: OrtTrainingBackend;
  model: LlamaConfig;
} {
  const model = modelConfigForRun(o.run);
  const chunk = compressionChunkOf(o.run.model.LLM.optimizer);
  if (chunk === null) throw new Error('node-trainer trains DisTrO and SparseLoCo runs only');
  const backend = new OrtTrainingBackend({
    config: model,
    seqLen: o.run.model.LLM.max_seq_len,
    device: o.device.device,
    maxRows: o.maxRows ?? o.run.meshtrain.micro_batch_size,
    description: `onnxruntime-node ${o.device.device}${o.device.device === 'webgpu' && o.device.adapter ? ` (${o.device.adapter})` : ''}`,
  });
  const client = new Client({
    run: o.run,
    runId: o.runId,
    secretKey: o.secretKey,
    link: o.link,
    backend,
    distro: createCpuBackend({ chunk }),
    data: o.data,
    initParams: () => initParameters(model, o.run.meshtrain.seed),
    checkpoints: o.checkpoints,
    ...(o.peers ? { peers: o.peers } : {}),
    ...(o.onEvent ? { onEvent: o.onEvent } : {}),
  });
  client.setShapes(backend.shapes);
  return { client, backend, model };
}
