// Three node-trainer clients (real onnxruntime-node sessions on the micro preset, real DisTrO) against core's
// coordinator in-process (LocalHub, virtual time): every round reaches witness quorum, and all replicas hold
// bit-identical parameters at the epoch end and after it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client, ClientEvent } from '@meshtrain/client';
import { LocalHub } from '@meshtrain/client/testing';
import {
  bytesToHex,
  DEFAULT_RUN_TOML,
  identityFromSeed,
  parseRunConfig,
  type RunConfig,
} from '@meshtrain/core';
import { ByteTokenizer } from '@meshtrain/model';
import { afterAll, describe, expect, it } from 'vitest';
import { prepareShards } from '@meshtrain/model/node';
import { localDataSource } from '../src/net/local-data.ts';
import { createTrainer } from '../src/net/trainer.ts';

let root: string | undefined;
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

function run(values: Record<string, string | number>): RunConfig {
  let toml = DEFAULT_RUN_TOML;
  for (const [k, v] of Object.entries(values))
    toml = toml.replace(new RegExp(`^${k} = .*$`, 'm'), `${k} = ${v}`);
  return parseRunConfig(toml).config;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('node-trainer client on ONNX Runtime', () => {
  it('three micro trainers stay bit-identical through an epoch', async () => {
    root = await mkdtemp(join(tmpdir(), 'meshtrain-client-ort-'));
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
      max_seq_len: 32,
      micro_batch_size: 4,
      global_batch_size_start: 6,
      global_batch_size_end: 6,
      min_clients: 2,
      init_min_clients: 3,
      waiting_for_members_extra_time: 1,
      max_round_train_time: 30,
      total_steps: 6,
      warmup_steps: 2,
      base_lr: '1.0e-2',
    });
    const hub = new LocalHub(r, 'ort');
    const data = await localDataSource(join(root, 'data'), 32);
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
        device: { device: 'cpu', reason: 'test' },
        onEvent: (e) => events.push(e),
      });
      peers.push({ client, events, done: client.run() });
    }
    for (let t = 0; t < 600 && hub.state.run_state !== 'Finished'; t++) {
      hub.advance(1);
      await sleep(60);
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
    expect(trained.length).toBeGreaterThanOrEqual(6);
    for (const e of trained) if (e.type === 'trained') expect(Number.isFinite(e.loss)).toBe(true);
  }, 180_000);
});
