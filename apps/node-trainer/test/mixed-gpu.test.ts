// A mixed run: two node-trainer clients on the CPU EP (onnxruntime-node, the CPU reference optimizer) and one
// training resident on the GPU (`--device webgpu`: onnxruntime-web and the WGSL SparseLoCo kernels on one Dawn
// device, SwiftShader here, graph-captured) against core's coordinator in-process (LocalHub, virtual time).
// Every replica ends with the same parameter hash, and the GPU trainer moved no parameter or gradient bytes
// between host and GPU in its train steps.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client, ClientEvent } from '@meshtrain/client';
import { LocalHub } from '@meshtrain/client/testing';
import {
  bytesToHex,
  compressionChunkOf,
  DEFAULT_RUN_TOML,
  identityFromSeed,
  parseRunConfig,
  type RunConfig,
} from '@meshtrain/core';
import { ByteTokenizer, modelConfigForRun } from '@meshtrain/model';
import { afterAll, describe, expect, it } from 'vitest';
import { prepareShards } from '@meshtrain/model/node';
import { localDataSource } from '../src/net/local-data.ts';
import { openNodeGpu, type NodeGpu } from '../src/backend/gpu.ts';
import { createTrainer } from '../src/net/trainer.ts';

let root: string | undefined;
let gpu: NodeGpu | undefined;
afterAll(async () => {
  await gpu?.dispose();
  if (root) await rm(root, { recursive: true, force: true });
});

function run(values: Record<string, string | number>): RunConfig {
  let toml = DEFAULT_RUN_TOML;
  for (const [k, v] of Object.entries(values))
    toml = toml.replace(new RegExp(`^${k} = .*$`, 'm'), `${k} = ${v}`);
  return parseRunConfig(toml).config;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('node-trainer clients on the CPU EP and the resident GPU', () => {
  it('end a run with equal parameter hashes', async () => {
    root = await mkdtemp(join(tmpdir(), 'meshtrain-mixed-gpu-'));
    const words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'house', 'big', 'red'];
    const docs = Array.from({ length: 20 }, (_, d) => {
      const text = Array.from(
        { length: 200 },
        (_, i) => words[(i * 7 + d * 3 + ((i * i) % 5)) % words.length],
      ).join(' ');
      return { id: `d${d}`, bytes: text.length, load: () => `${text}.` };
    });
    await prepareShards(docs, join(root, 'data'), {
      tokenizer: new ByteTokenizer(),
      tokenBytes: 2,
      valFraction: 0.1,
      source: 'test',
    });

    const r = run({
      preset: '"micro"',
      max_seq_len: 16,
      micro_batch_size: 2,
      global_batch_size_start: 6,
      global_batch_size_end: 6,
      min_clients: 3,
      init_min_clients: 3,
      waiting_for_members_extra_time: 1,
      // Virtual seconds (one per 200 ms here): room for SwiftShader to compile the GPU trainer's sessions.
      max_round_train_time: 400,
      epoch_time: 3000,
      total_steps: 3,
      warmup_steps: 1,
      base_lr: '1.0e-2',
    });
    const chunk = compressionChunkOf(r.model.LLM.optimizer) as number;
    const model = modelConfigForRun(r);
    gpu = await openNodeGpu({ config: model, seqLen: 16, maxRows: 2, chunk });
    const hub = new LocalHub(r, 'ort');
    const data = await localDataSource(join(root, 'data'), 16);
    const peers: { client: Client; events: ClientEvent[]; done: Promise<void> }[] = [];
    for (const b of [1, 2, 3]) {
      const id = identityFromSeed(new Uint8Array(32).fill(b));
      const events: ClientEvent[] = [];
      const { client } = createTrainer({
        run: r,
        runId: 'ort',
        secretKey: id.secretKey,
        link: hub.connect(id.secretKey),
        data,
        checkpoints: hub.checkpoints(),
        device: { device: b === 3 ? 'webgpu' : 'cpu', reason: 'test' },
        ...(b === 3 ? { gpu } : {}),
        onEvent: (e) => events.push(e),
      });
      peers.push({ client, events, done: client.run() });
    }
    for (let t = 0; t < 20_000 && hub.state.run_state !== 'Finished'; t++) {
      hub.advance(1);
      await sleep(200);
    }
    for (const p of peers) p.client.stop();
    await Promise.all(peers.map((p) => p.done));
    const errors = peers.flatMap((p) => p.events.filter((e) => e.type === 'error' || e.type === 'resync'));
    expect(errors).toEqual([]);
    expect(hub.state.run_state).toBe('Finished');
    expect(hub.log.rounds.every((x) => x.reached)).toBe(true);
    const ends = [...hub.log.paramHashes.values()];
    expect(ends.length).toBeGreaterThan(0);
    for (const m of ends) {
      expect(m.size).toBe(3);
      expect(new Set(m.values()).size).toBe(1);
    }
    const hashes = await Promise.all(peers.map(async (p) => bytesToHex(await p.client.parameterHash())));
    expect(new Set(hashes).size).toBe(1);
    const trained = peers.flatMap((p) => p.events.filter((e) => e.type === 'trained'));
    for (const e of trained) if (e.type === 'trained') expect(Number.isFinite(e.loss)).toBe(true);
    expect(peers[2]!.events.filter((e) => e.type === 'trained').length).toBeGreaterThan(0);
    const s = gpu.backend.stats;
    expect(s.residentSteps).toBeGreaterThan(0);
    expect(s.capturedSteps).toBe(s.residentSteps);
    expect(s.hostParamBytes).toBe(0);
    expect(s.hostGradientBytes).toBe(0);
  }, 1_200_000);
});
