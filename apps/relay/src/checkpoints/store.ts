// CheckpointStore: the relay's copy of each run's model, the guaranteed path for joiners (peers are the
// fast one). Layout:
//
//   <dataDir>/checkpoints/<runDir>/<step>/model.safetensors   canonical encodeCheckpoint(config, params)
//                                         config.json         HF config (hfConfigJson)
//                                         meta.json           CheckpointMeta (written last)
//
// <runDir> is the run id when it is a plain name, else `~` + hex of its UTF-8 bytes, so no run id can
// name a path outside the store. A checkpoint is written into a temporary sibling directory and renamed
// into place, so readers see either nothing or all three files; the newest `keep` steps are kept.
//
// The safetensors file is re-encoded from the decoded parameters rather than stored as uploaded: the bytes
// are then a pure function of (config, parameters), identical whoever uploaded them, which is what the
// peer-to-peer checkpoint manifest (packages/p2p, a hash over the bytes) needs to agree with the relay.
import { createHash, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeCheckpoint, parameterHashHex, type LlamaConfig, type Parameters } from '@meshtrain/model';
import { DEFAULT_CHECKPOINT_KEEP } from '../defaults.ts';

export const WEIGHTS_FILE = 'model.safetensors';
export const CONFIG_FILE = 'config.json';
export const META_FILE = 'meta.json';
/** The files a client may download (anything else under a step directory is not served). */
export const CHECKPOINT_FILES = [WEIGHTS_FILE, CONFIG_FILE, META_FILE] as const;
export type CheckpointFile = (typeof CHECKPOINT_FILES)[number];
export { DEFAULT_CHECKPOINT_KEEP as DEFAULT_KEEP } from '../defaults.ts';

export interface FileInfo {
  bytes: number;
  sha256: string;
}

/** meta.json of one stored checkpoint. */
export interface CheckpointMeta {
  format: 'meshtrain-checkpoint';
  version: 1;
  run_id: string;
  /** `progress.step` the parameters belong to (the step the next epoch starts at). */
  step: number;
  epoch: number;
  /** parameterHashHex of the parameters, hex. */
  param_hash: string;
  /** 'init' = seeded initial weights; 'upload' = a client's end-of-epoch upload. */
  source: 'init' | 'upload';
  /** Who uploaded it (the verifier's answer, e.g. a client id), when known. */
  uploader?: string;
  created_at: string;
  files: Record<typeof WEIGHTS_FILE | typeof CONFIG_FILE, FileInfo>;
}

export class CheckpointConflictError extends Error {
  readonly existing: CheckpointMeta;
  constructor(existing: CheckpointMeta) {
    super(
      `step ${existing.step} already has a checkpoint with parameter hash ${existing.param_hash}; a different one cannot replace it`,
    );
    this.name = 'CheckpointConflictError';
    this.existing = existing;
  }
}

export interface SaveCheckpointInput {
  runId: string;
  step: number;
  epoch: number;
  config: LlamaConfig;
  params: Parameters;
  source: CheckpointMeta['source'];
  uploader?: string;
  /** Precomputed parameterHashHex(params), to avoid hashing twice. */
  paramHash?: string;
}

/** A checkpoint already encoded canonically (encodeCheckpoint), with its hashes: what a worker hands back. */
export interface SaveEncodedInput {
  runId: string;
  step: number;
  epoch: number;
  source: CheckpointMeta['source'];
  uploader?: string;
  paramHash: string;
  safetensors: Uint8Array;
  configJson: string;
  sha256: { safetensors: string; config: string };
}

/** Directory under the store's root where uploads are streamed before they are checked. */
const UPLOADS_DIR = '.uploads';

const PLAIN_RUN_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
const STEP_DIR = /^\d{1,15}$/;

/** The directory name of a run: plain ids as they are, others hex-encoded behind `~` (never a path). */
export function runDirName(runId: string): string {
  return PLAIN_RUN_ID.test(runId) ? runId : `~${Buffer.from(runId, 'utf8').toString('hex')}`;
}

function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export class CheckpointStore {
  readonly root: string;
  readonly keep: number;
  /** Per-run write queue: saves and pruning of one run never interleave. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(options: { dataDir: string; keep?: number }) {
    this.root = join(options.dataDir, 'checkpoints');
    this.keep = Math.max(1, options.keep ?? DEFAULT_CHECKPOINT_KEEP);
    // Uploads in flight when the relay stopped are never finished: start with none.
    rmSync(join(this.root, UPLOADS_DIR), { recursive: true, force: true });
  }

  /** A fresh path to stream one upload into (the directory exists); the caller removes the file. */
  async uploadPath(): Promise<string> {
    const dir = join(this.root, UPLOADS_DIR);
    await mkdir(dir, { recursive: true });
    return join(dir, randomBytes(12).toString('hex'));
  }

  runDir(runId: string): string {
    return join(this.root, runDirName(runId));
  }

  /** Path of one file of a stored checkpoint (the name is checked against CHECKPOINT_FILES by callers). */
  filePath(runId: string, step: number, file: CheckpointFile): string {
    return join(this.runDir(runId), String(step), file);
  }

  /** Stored steps of a run, newest first (only complete ones: meta.json present). */
  async steps(runId: string): Promise<number[]> {
    let names: string[];
    try {
      names = await readdir(this.runDir(runId));
    } catch {
      return [];
    }
    return names
      .filter((n) => STEP_DIR.test(n))
      .map(Number)
      .sort((a, b) => b - a);
  }

  /** meta.json of `step`, or undefined when that checkpoint does not exist (or is incomplete). */
  async meta(runId: string, step: number): Promise<CheckpointMeta | undefined> {
    try {
      return JSON.parse(await readFile(this.filePath(runId, step, META_FILE), 'utf8')) as CheckpointMeta;
    } catch {
      return undefined;
    }
  }

  async latest(runId: string): Promise<CheckpointMeta | undefined> {
    for (const step of await this.steps(runId)) {
      const m = await this.meta(runId, step);
      if (m !== undefined) return m;
    }
    return undefined;
  }

  /**
   * Stores a checkpoint atomically and prunes old ones. Saving the same parameters for a step again is a
   * no-op returning the stored meta (uploads are retried); different parameters for a stored step throw
   * CheckpointConflictError, since the first accepted one is what joiners may already have.
   */
  async save(input: SaveCheckpointInput): Promise<{ meta: CheckpointMeta; created: boolean }> {
    const paramHash = input.paramHash ?? parameterHashHex(input.params);
    const { safetensors, configJson } = encodeCheckpoint(input.config, input.params);
    return await this.saveEncoded({
      runId: input.runId,
      step: input.step,
      epoch: input.epoch,
      source: input.source,
      ...(input.uploader === undefined ? {} : { uploader: input.uploader }),
      paramHash,
      safetensors,
      configJson,
      sha256: { safetensors: sha256(safetensors), config: sha256(configJson) },
    });
  }

  /** `save` for a checkpoint encoded elsewhere (a worker thread): same rules, no hashing or encoding here. */
  async saveEncoded(input: SaveEncodedInput): Promise<{ meta: CheckpointMeta; created: boolean }> {
    if (!Number.isSafeInteger(input.step) || input.step < 0)
      throw new RangeError(`step must be a non-negative integer, got ${input.step}`);
    if (!Number.isSafeInteger(input.epoch) || input.epoch < 0)
      throw new RangeError(`epoch must be a non-negative integer, got ${input.epoch}`);
    const { paramHash, safetensors, configJson } = input;
    return await this.serialized(input.runId, async () => {
      const existing = await this.meta(input.runId, input.step);
      if (existing !== undefined) {
        if (existing.param_hash === paramHash) return { meta: existing, created: false };
        throw new CheckpointConflictError(existing);
      }
      const meta: CheckpointMeta = {
        format: 'meshtrain-checkpoint',
        version: 1,
        run_id: input.runId,
        step: input.step,
        epoch: input.epoch,
        param_hash: paramHash,
        source: input.source,
        ...(input.uploader === undefined ? {} : { uploader: input.uploader }),
        created_at: new Date().toISOString(),
        files: {
          [WEIGHTS_FILE]: { bytes: safetensors.length, sha256: input.sha256.safetensors },
          [CONFIG_FILE]: { bytes: Buffer.byteLength(configJson), sha256: input.sha256.config },
        },
      };
      const runDir = this.runDir(input.runId);
      const tmp = join(runDir, `.tmp-${input.step}-${randomBytes(6).toString('hex')}`);
      await mkdir(tmp, { recursive: true });
      try {
        await writeFile(join(tmp, WEIGHTS_FILE), safetensors);
        await writeFile(join(tmp, CONFIG_FILE), configJson);
        await writeFile(join(tmp, META_FILE), `${JSON.stringify(meta, null, 2)}\n`);
        // A step directory without meta.json is a leftover of a crash before this rename's era; clear it.
        await rm(join(runDir, String(input.step)), { recursive: true, force: true });
        await rename(tmp, join(runDir, String(input.step)));
      } catch (err) {
        await rm(tmp, { recursive: true, force: true });
        throw err;
      }
      await this.prune(input.runId);
      return { meta, created: true };
    });
  }

  /** Removes all but the newest `keep` steps and any temporary directories left by a crash. */
  private async prune(runId: string): Promise<void> {
    const runDir = this.runDir(runId);
    const steps = await this.steps(runId);
    for (const step of steps.slice(this.keep))
      await rm(join(runDir, String(step)), { recursive: true, force: true });
    for (const name of await readdir(runDir))
      if (name.startsWith('.tmp-')) await rm(join(runDir, name), { recursive: true, force: true });
  }

  private async serialized<T>(runId: string, work: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(runId) ?? Promise.resolve();
    const next = prev.then(work, work);
    const settled = next.catch(() => undefined);
    this.queues.set(runId, settled);
    try {
      return await next;
    } finally {
      if (this.queues.get(runId) === settled) this.queues.delete(runId);
    }
  }
}
