// The relay's HTTP routes a client reads (PROTOCOL.md "HTTP API"): data samples and checkpoints.
// Isomorphic (global fetch).
import { bytesToHex, hexToBytes, sha256, signCheckpointUpload } from '@meshtrain/core';
import { decodeCheckpoint, encodeCheckpoint, type LlamaConfig } from '@meshtrain/model';
import { foldedDataSource } from './data-fold.ts';
import type { Checkpoint, CheckpointSource, DataSource } from './interfaces.ts';

const base = (relayUrl: string, runId: string) =>
  `${relayUrl.replace(/\/+$/, '')}/api/runs/${encodeURIComponent(runId)}`;

async function ok(res: Response, what: string): Promise<Response> {
  if (res.ok) return res;
  let detail = '';
  try {
    detail = (await res.text()).slice(0, 300);
  } catch {
    // The status is enough.
  }
  throw new Error(`${what}: HTTP ${res.status} ${detail}`);
}

/**
 * Samples from the relay's data provider, in requests of at most `maxPerRequest` samples. Sample ids past
 * the end of the training split wrap around (id mod count, see data-fold.ts), as a local shard does.
 * `samplesInSplit` is the training split's size from the relay's data manifest.
 */
export function relayDataSource(
  relayUrl: string,
  runId: string,
  maxPerRequest = 512,
): DataSource & { bytes: number; samplesInSplit(): Promise<number> } {
  const samplesInSplit = async (): Promise<number> => {
    const res = await ok(await fetch(`${base(relayUrl, runId)}/data/manifest`), 'data manifest');
    const m = (await res.json()) as { samples?: { train?: number } };
    const n = m.samples?.train ?? 0;
    if (!(n > 0)) throw new Error("the run's dataset has no training samples");
    return n;
  };
  const range = async (s: number, e: number): Promise<Int32Array> => {
    const res = await ok(
      await fetch(`${base(relayUrl, runId)}/data/samples?start=${s}&end=${e}`),
      'data samples',
    );
    const buf = new Uint8Array(await res.arrayBuffer());
    src.bytes += buf.length;
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    const out = new Int32Array(buf.length / 4);
    for (let i = 0; i < out.length; i++) out[i] = view.getInt32(4 * i, true);
    return out;
  };
  const folded = foldedDataSource({ samples: range }, samplesInSplit, maxPerRequest);
  const src = {
    bytes: 0,
    samplesInSplit,
    samples: (start: number, end: number) => folded.samples(start, end),
  };
  return src;
}

export interface RelayCheckpointOptions {
  relayUrl: string;
  runId: string;
  /** The run's model; uploads encode it as config.json. */
  model: LlamaConfig;
  /** Signs uploads (see `upload`). */
  secretKey: Uint8Array;
}

/** The relay's record of the checkpoint that serves a step (GET /api/runs/:id/checkpoint?step=S). */
export interface CheckpointSummary {
  step: number;
  epoch: number;
  /** parameterHash of its parameters, hex. */
  paramHash: string;
  /** Download URLs (absolute or relay-relative) by file name: model.safetensors, config.json. */
  files: Record<string, string>;
  /** Present when an earlier checkpoint stands in for parameters lost with their epoch's last clients. */
  rolledBackFrom?: number;
}

/** The summary for `step`, or null when the relay has no checkpoint for it yet (404); throws on other failures. */
export async function fetchCheckpointSummary(
  relayUrl: string,
  runId: string,
  step: number,
): Promise<CheckpointSummary | null> {
  const res = await fetch(`${base(relayUrl, runId)}/checkpoint?step=${step}`);
  if (res.status === 404) return null;
  return (await (await ok(res, 'checkpoint')).json()) as CheckpointSummary;
}

/** The relay's checkpoints; `loadSummary` downloads the files of a summary already fetched. */
export type RelayCheckpoints = CheckpointSource & {
  bytes: number;
  loadSummary(summary: CheckpointSummary): Promise<Checkpoint>;
};

/**
 * Checkpoints from the relay's store. An upload's body is the `model.safetensors` bytes alone; the signature
 * (core's signCheckpointUpload: the string the relay verifies), step and epoch travel in headers, so the relay
 * refuses an upload it would not take before reading its body.
 */
export function relayCheckpoints(o: RelayCheckpointOptions): RelayCheckpoints {
  const root = o.relayUrl.replace(/\/+$/, '');
  const src = {
    bytes: 0,
    async load(step: number): Promise<Checkpoint | null> {
      const summary = await fetchCheckpointSummary(o.relayUrl, o.runId, step);
      return summary ? src.loadSummary(summary) : null;
    },
    async has(step: number): Promise<boolean> {
      const summary = await fetchCheckpointSummary(o.relayUrl, o.runId, step);
      return summary !== null && summary.step === step;
    },
    async loadSummary(summary: CheckpointSummary): Promise<Checkpoint> {
      const get = async (name: string) => {
        const url = summary.files[name];
        if (!url) throw new Error(`checkpoint summary lists no ${name}`);
        const r = await ok(await fetch(url.startsWith('http') ? url : `${root}${url}`), name);
        const b = new Uint8Array(await r.arrayBuffer());
        src.bytes += b.length;
        return b;
      };
      const weights = await get('model.safetensors');
      const config = new TextDecoder().decode(await get('config.json'));
      const decoded = decodeCheckpoint(config, weights);
      return {
        step: summary.step,
        epoch: summary.epoch,
        paramHash: hexToBytes(summary.paramHash),
        params: decoded.params,
        ...(summary.rolledBackFrom !== undefined ? { rolledBackFrom: summary.rolledBackFrom } : {}),
      };
    },
    async upload(ck: Checkpoint): Promise<void> {
      const enc = encodeCheckpoint(o.model, ck.params);
      const res = await fetch(`${base(o.relayUrl, o.runId)}/checkpoint`, {
        method: 'POST',
        body: enc.safetensors as Uint8Array<ArrayBuffer>,
        headers: {
          'Content-Type': 'application/octet-stream',
          ...signCheckpointUpload(o.secretKey, {
            runId: o.runId,
            step: ck.step,
            epoch: ck.epoch,
            safetensorsSha256: bytesToHex(sha256(enc.safetensors)),
            timestamp: String(Date.now()),
          }),
        },
      });
      await ok(res, 'checkpoint upload');
      src.bytes += enc.safetensors.length;
    },
  };
  return src;
}
