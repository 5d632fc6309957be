// The heavy half of storing a checkpoint, run in a worker thread (off-thread.ts) so the relay's event loop
// keeps serving coordinator frames and /healthz meanwhile: seeding a run's initial weights, or decoding an
// upload whose signature already verified. Both end in the canonical encoding the store writes and the
// parameter hash. Messages: CheckpointJob in, JobReply out (one job per worker).
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parentPort, workerData } from 'node:worker_threads';
import {
  CheckpointError,
  SafetensorsError,
  decodeCheckpoint,
  decodeSafetensors,
  encodeCheckpoint,
  hfConfigJson,
  initParameters,
  parameterHashHex,
} from '@meshtrain/model';
import type { LlamaConfig, Parameters } from '@meshtrain/model';

export type CheckpointJob =
  | { kind: 'init'; config: LlamaConfig; seed: number }
  /** `file` holds an uploaded model.safetensors for `config`; its tensors must all be F32. */
  | { kind: 'decode'; config: LlamaConfig; file: string };

export interface EncodedJob {
  paramHash: string;
  safetensors: Uint8Array;
  configJson: string;
  sha256: { safetensors: string; config: string };
}

export type JobReply =
  | { ok: true; result: EncodedJob }
  | { ok: false; code: 'bad_checkpoint'; reason: string; message: string }
  | { ok: false; code: 'internal'; message: string };

const sha256 = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');

async function paramsOf(job: CheckpointJob): Promise<Parameters> {
  if (job.kind === 'init') return initParameters(job.config, job.seed);
  const bytes = new Uint8Array(await readFile(job.file));
  // The parameter hash is over f32 values; a BF16 upload would hash differently from every replica.
  for (const [name, t] of decodeSafetensors(bytes).tensors)
    if (t.dtype !== 'F32')
      throw new CheckpointError('dtype', `${name}: dtype ${t.dtype}; uploads must be F32`);
  return decodeCheckpoint(hfConfigJson(job.config), bytes).params;
}

async function run(job: CheckpointJob): Promise<JobReply> {
  try {
    const params = await paramsOf(job);
    const { safetensors, configJson } = encodeCheckpoint(job.config, params);
    return {
      ok: true,
      result: {
        paramHash: parameterHashHex(params),
        safetensors,
        configJson,
        sha256: { safetensors: sha256(safetensors), config: sha256(configJson) },
      },
    };
  } catch (err) {
    if (err instanceof SafetensorsError || err instanceof CheckpointError)
      return { ok: false, code: 'bad_checkpoint', reason: err.code, message: err.message };
    return { ok: false, code: 'internal', message: (err as Error).stack ?? String(err) };
  }
}

if (parentPort && (workerData as Partial<CheckpointJob> | undefined)?.kind !== undefined) {
  const port = parentPort;
  const reply = await run(workerData as CheckpointJob);
  port.postMessage(reply, reply.ok ? [reply.result.safetensors.buffer as ArrayBuffer] : []);
}
