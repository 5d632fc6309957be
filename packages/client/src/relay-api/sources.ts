// A client's data source and checkpoint source backed by the relay's HTTP routes (PROTOCOL.md "HTTP API"),
// over the typed requests of this folder. Isomorphic (global fetch); not in the folder's light index (it
// decodes checkpoints with @meshtrain/model), so the package's main entry exports it.
import { bytesToHex, hexToBytes, sha256, signCheckpointUpload } from '@meshtrain/core';
import { decodeCheckpoint, encodeCheckpoint, type LlamaConfig } from '@meshtrain/model';
import { orderedDataSource } from '../data-fold.ts';
import type { Checkpoint, CheckpointSource, DataSource } from '../interfaces.ts';
import { fetchDataManifest, fetchSamples } from './data.ts';
import { ensureOk, relayRoot, runPath } from './request.ts';
import { fetchCheckpointSummary } from './runs.ts';
import type { CheckpointSummary, DataManifestResponse, DataOrder, DataSplit } from './types.ts';

/** Samples asked for in one request unless told otherwise: a few MB of tokens at the presets' lengths. */
const SAMPLES_PER_REQUEST = 512;

export { fetchCheckpointSummary };
export type { CheckpointSummary };

export interface RelayDataOptions {
  /** The split to read (default 'train'): 'val' holds the held-out samples evaluations use. */
  split?: DataSplit;
  /** Most samples per request (default SAMPLES_PER_REQUEST, and never more than the relay's manifest allows). */
  maxPerRequest?: number;
}

export type RelayDataSource = DataSource & {
  /** Sample bytes downloaded so far. */
  bytes: number;
  readonly split: DataSplit;
  /** The split's sample count from the relay's data manifest. */
  samplesInSplit(): Promise<number>;
  /** The split's order: the manifest's for train, always corpus for val. */
  order(): Promise<DataOrder>;
  manifest(): Promise<DataManifestResponse>;
};

/**
 * Samples of one split of the relay's data provider, by run sample id. In corpus order, ids past the end of
 * the split wrap around (id mod count, see data-fold.ts), as a local shard does; in a seeded order the relay
 * maps run ids itself (each pass its own permutation), so they go to it as they are. Every reply is checked to
 * hold exactly the samples asked for, at the manifest's sample width.
 */
export function relayDataSource(relayUrl: string, runId: string, o: RelayDataOptions = {}): RelayDataSource {
  const split = o.split ?? 'train';
  let manifest: Promise<DataManifestResponse> | null = null;
  const getManifest = (): Promise<DataManifestResponse> =>
    (manifest ??= fetchDataManifest(relayUrl, runId).catch((e: unknown) => {
      manifest = null;
      throw e;
    }));
  const samplesInSplit = async (): Promise<number> => {
    const n = (await getManifest()).samples[split];
    if (!(n > 0)) throw new Error(`the run's dataset has no ${split} samples`);
    return n;
  };
  const range = async (start: number, end: number): Promise<Int32Array> => {
    const m = await getManifest();
    const got = await fetchSamples(relayUrl, runId, { split, start, end, sampleTokens: m.sample_tokens });
    src.bytes += got.bytes;
    return got.tokens;
  };
  const perRequest = async (): Promise<number> =>
    Math.max(
      1,
      Math.min(o.maxPerRequest ?? SAMPLES_PER_REQUEST, (await getManifest()).max_samples_per_request),
    );
  const order = async (): Promise<DataOrder> => (split === 'train' ? (await getManifest()).order : 'corpus');
  let ordered: DataSource | null = null;
  const src: RelayDataSource = {
    bytes: 0,
    split,
    samplesInSplit,
    order,
    manifest: getManifest,
    async samples(start: number, end: number): Promise<Int32Array> {
      ordered ??= orderedDataSource({ samples: range }, { samplesInSplit, order }, await perRequest());
      return ordered.samples(start, end);
    },
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
  const root = relayRoot(o.relayUrl);
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
        const r = await ensureOk(await fetch(url.startsWith('http') ? url : `${root}${url}`), url);
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
      const res = await fetch(`${root}${runPath(o.runId)}/checkpoint`, {
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
      await ensureOk(res, `${runPath(o.runId)}/checkpoint`, 'POST');
      src.bytes += enc.safetensors.length;
    },
  };
  return src;
}
