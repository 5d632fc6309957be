// What `node-trainer train` gathers before it joins: the run's config from the relay, the identity, the device,
// the micro-batch that fits the memory budget, and the data (with the held-out samples for evaluations).
import { fetchRunConfig, RelayApiError, relayDataSource, type DataSource } from '@meshtrain/client';
import { compressionChunkOf, type DataLocation, type RunConfig } from '@meshtrain/core';
import type { LlamaConfig } from '@meshtrain/model';
import { CliError } from '../command.ts';
import {
  describeFootprint,
  memoryShape,
  optimizerStateBytes,
  parseMemory,
  rowsForBudget,
  selectDevice,
  type DeviceChoice,
} from '../backend/device.ts';
import { openNodeGpu, type NodeGpu } from '../backend/gpu.ts';
import { trainingFootprint } from '../backend/memory-probe.ts';
import { IdentityError, loadOrCreateIdentity, type LoadedIdentity } from '../identity/index.ts';
import { localDataSource } from '../net/local-data.ts';
import type { Output, TrainOptions } from './options.ts';

export async function fetchRun(relay: string, runId: string): Promise<{ run: RunConfig; p2p: string[] }> {
  try {
    const { detail, config } = await fetchRunConfig(relay, runId);
    return { run: config, p2p: detail.p2p_multiaddrs };
  } catch (e) {
    if (!(e instanceof RelayApiError)) throw e;
    if (e.code === 'unknown_run')
      throw new CliError(`the relay has no run '${runId}' (GET ${relay}/api/runs lists them)`);
    throw new CliError(e.message);
  }
}

export async function loadIdentity(path: string): Promise<LoadedIdentity> {
  try {
    return await loadOrCreateIdentity(path);
  } catch (e) {
    if (e instanceof IdentityError) throw new CliError(e.message);
    throw e;
  }
}

export async function pickDevice(o: TrainOptions, io: Output): Promise<DeviceChoice> {
  let device: DeviceChoice;
  try {
    device = await selectDevice(o.device);
  } catch (e) {
    throw new CliError((e as Error).message);
  }
  io.say(`device: ${device.device} — ${device.reason}`);
  io.out({ type: 'device', device: device.device, reason: device.reason });
  return device;
}

/**
 * The resident GPU when the device is WebGPU: parameters, gradients and optimizer state stay on one Dawn
 * device (onnxruntime-web and DisTrO's WGSL); null for the CPU and CUDA EPs, which train through host copies.
 */
export async function openTrainingGpu(
  device: DeviceChoice,
  run: RunConfig,
  model: LlamaConfig,
  maxRows: number,
  io: Output,
): Promise<NodeGpu | null> {
  if (device.device !== 'webgpu') return null;
  const chunk = compressionChunkOf(run.model.LLM.optimizer);
  if (chunk === null) throw new CliError('node-trainer trains DisTrO and SparseLoCo runs only');
  const gpu = await openNodeGpu({
    config: model,
    seqLen: run.model.LLM.max_seq_len,
    maxRows,
    chunk,
    log: (line) => io.say(`webgpu: ${line}`),
  });
  io.say(`webgpu: resident training on ${gpu.adapter} (onnxruntime-web and DisTrO's WGSL on one device)`);
  return gpu;
}

/**
 * Rows per ORT run: the run's micro_batch_size, or what `--gpu-memory` leaves room for, from a measured
 * footprint where the device reports its memory (the CPU EP: this process's RSS) and the estimate elsewhere
 * (backend/memory-probe.ts).
 */
export async function microBatchRows(
  o: TrainOptions,
  run: RunConfig,
  model: LlamaConfig,
  device: DeviceChoice,
  io: Output,
): Promise<number> {
  if (!o.gpuMemory) return run.meshtrain.micro_batch_size;
  let bytes: number;
  try {
    bytes = parseMemory(o.gpuMemory);
  } catch (e) {
    throw new CliError((e as Error).message);
  }
  const seqLen = run.model.LLM.max_seq_len;
  const cap = Math.max(1, run.config.global_batch_size_end);
  const footprint = await trainingFootprint({
    bytes,
    config: model,
    seqLen,
    device: device.device,
    // What the client keeps beside parameters and gradients, which the probe steps do not hold.
    stateBytes: optimizerStateBytes(memoryShape(model, seqLen)),
    say: io.say,
  });
  const rows = rowsForBudget(bytes, footprint, cap);
  io.say(
    `--gpu-memory ${o.gpuMemory}: micro-batch ${rows} sequences (gradient accumulation above that); ${describeFootprint(footprint)}`,
  );
  return rows;
}

/** Held-out samples (rows of seqLen + 1 tokens) evaluated at every model load and epoch end. */
export interface EvalTokens {
  tokens: Int32Array;
  rows: number;
}

/** The training data (a local shard or the relay's HTTP data) and the held-out samples, if any. */
export async function openData(
  o: TrainOptions,
  seqLen: number,
  io: Output,
  /** The run's data location: a local shard reads it in the run's order, as the relay would serve it. */
  location: DataLocation,
): Promise<{ data: DataSource; evalTokens: EvalTokens | null }> {
  if (o.dataShard) {
    const local = await localDataSource(o.dataShard, seqLen, location);
    const n = Math.min(o.evalSamples, local.dataset.val.index.sampleCount);
    const evalTokens =
      n > 0 ? { tokens: local.dataset.val.batch(Array.from({ length: n }, (_, i) => i)), rows: n } : null;
    return { data: local, evalTokens };
  }
  const data = relayDataSource(o.relay, o.runId);
  if (o.evalSamples <= 0) return { data, evalTokens: null };
  // The held-out split through the same source and decoder as the training data.
  const val = relayDataSource(o.relay, o.runId, { split: 'val' });
  const n = Math.min(o.evalSamples, await val.samplesInSplit().catch(() => 0));
  if (n <= 0) {
    io.say('no held-out split on the relay: evaluations disabled');
    return { data, evalTokens: null };
  }
  return { data, evalTokens: { tokens: await val.samples(0, n - 1), rows: n } };
}
