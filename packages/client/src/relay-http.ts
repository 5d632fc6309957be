// The relay's HTTP routes a client reads (PROTOCOL.md "HTTP API"): data samples and checkpoints.
// Isomorphic (global fetch).
import { bytesToHex, hexToBytes, sha256, sign, publicKeyOf, utf8Bytes } from '@meshtrain/core';
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

interface Summary {
  step: number;
  epoch: number;
  paramHash: string;
  files: Record<string, string>;
  /** Present when an earlier checkpoint stands in for parameters lost with their epoch's last clients. */
  rolledBackFrom?: number;
}

/**
 * Checkpoints from the relay's store. Uploads are multipart (`model.safetensors`, `config.json`, `step`,
 * `epoch`) signed by the client: X-Meshtrain-Key / -Timestamp / -Signature (Ed25519 over the canonical
 * string below).
 */
export function relayCheckpoints(o: RelayCheckpointOptions): CheckpointSource & { bytes: number } {
  const root = o.relayUrl.replace(/\/+$/, '');
  const src = {
    bytes: 0,
    async load(step: number): Promise<Checkpoint | null> {
      const res = await fetch(`${base(o.relayUrl, o.runId)}/checkpoint?step=${step}`);
      if (res.status === 404) return null;
      const summary = (await (await ok(res, 'checkpoint')).json()) as Summary;
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
      const timestamp = String(Date.now());
      // The relay's canonical upload string (apps/relay extras.ts checkpointCanonical): run, step, epoch,
      // both files' SHA-256 and the timestamp, so an upload cannot be replayed with other bytes.
      const message = [
        'meshtrain-checkpoint/v1',
        o.runId,
        ck.step,
        ck.epoch,
        bytesToHex(sha256(enc.safetensors)),
        bytesToHex(sha256(utf8Bytes(enc.configJson))),
        timestamp,
      ].join('\n');
      const form = new FormData();
      form.set('model.safetensors', new Blob([enc.safetensors as BlobPart]), 'model.safetensors');
      form.set('config.json', new Blob([enc.configJson]), 'config.json');
      form.set('step', String(ck.step));
      form.set('epoch', String(ck.epoch));
      const res = await fetch(`${base(o.relayUrl, o.runId)}/checkpoint`, {
        method: 'POST',
        body: form,
        headers: {
          'X-Meshtrain-Key': bytesToHex(publicKeyOf(o.secretKey)),
          'X-Meshtrain-Timestamp': timestamp,
          'X-Meshtrain-Signature': bytesToHex(sign(o.secretKey, utf8Bytes(message))),
        },
      });
      await ok(res, 'checkpoint upload');
      src.bytes += enc.safetensors.length;
    },
  };
  return src;
}
