// What clients put on the wire about themselves is measured: witness metadata carries the loss of the last
// train step, tokens/s of that step and bytes/s moved, all on the client's injected clock (here one that moves
// only while the toy backend "computes", one virtual second per call); and a kept model's event names the
// hash of the parameters it kept; a refused parameter hash is judged by its code. Three toy replicas on core's
// real coordinator (LocalHub).
import { bytesToHex, identityFromSeed, type WitnessMetadata } from '@meshtrain/core';
import { createCpuBackend } from '@meshtrain/distro';
import { afterEach, describe, expect, it } from 'vitest';
import { Client, PARAM_HASH_MISMATCH, RelayRefusal, type ClientEvent } from '../src/index.ts';
import { LocalHub } from '../src/testing.ts';
import { drive, SEQ, SHAPES, testRun, TOY_HUB, toyBackend, toyData, toyInit } from './helpers.ts';

interface Reported {
  metadata: WitnessMetadata;
  bytes: number;
  now: number;
  loss: number | null;
}

interface Peer {
  client: Client;
  events: ClientEvent[];
  reports: Reported[];
  done: Promise<void>;
}

let peers: Peer[] = [];
afterEach(async () => {
  for (const p of peers) p.client.stop();
  await Promise.all(peers.map((p) => p.done));
  peers = [];
});

/** Epochs of a few rounds, so a run has several epoch ends. */
function shortEpochs(): ReturnType<typeof testRun> {
  return testRun({
    warmup_time: 10,
    cooldown_time: 2,
    epoch_time: 15,
    max_round_train_time: 12,
    round_witness_time: 1,
    waiting_for_members_extra_time: 1,
    min_clients: 2,
    init_min_clients: 3,
    global_batch_size_start: 6,
    global_batch_size_end: 6,
    max_seq_len: SEQ,
    total_steps: 20,
  });
}

function startMeasuredPeer(
  hub: LocalHub,
  run: ReturnType<typeof testRun>,
  seedByte: number,
  refuseHash?: () => Error,
): Peer {
  const identity = identityFromSeed(new Uint8Array(32).fill(seedByte));
  const link = hub.connect(identity.secretKey);
  if (refuseHash)
    link.reportParamHash = async () => {
      throw refuseHash();
    };
  const events: ClientEvent[] = [];
  const reports: Reported[] = [];
  let virtualMs = 0;
  const toy = toyBackend();
  const backend = {
    ...toy,
    async loadParams(p: Map<string, Float32Array>) {
      await toy.loadParams(p);
    },
    async trainStep(tokens: Int32Array, rows: number) {
      virtualMs += 1000;
      return toy.trainStep(tokens, rows);
    },
  };
  let client: Client | null = null;
  const submitWitness = link.submitWitness.bind(link);
  link.submitWitness = (w) => {
    const c = client as Client;
    if (w.metadata)
      reports.push({
        metadata: w.metadata,
        bytes: c.stats.bytesSent + c.stats.bytesReceived,
        now: virtualMs,
        loss: c.lastLoss,
      });
    return submitWitness(w);
  };
  client = new Client({
    run,
    runId: hub.runId,
    secretKey: identity.secretKey,
    link,
    backend,
    distro: createCpuBackend({ chunk: 64 }),
    data: toyData,
    initParams: toyInit,
    checkpoints: hub.checkpoints(),
    onEvent: (e) => events.push(e),
    fetchPatienceMs: 300,
    now: () => virtualMs,
  });
  client.setShapes(SHAPES);
  return { client, events, reports, done: client.run() };
}

describe('client reports', () => {
  it('witness metadata is measured, and a kept model names its hash', async () => {
    const run = shortEpochs();
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3].map((b) => startMeasuredPeer(hub, run, b));
    await drive(hub, () => hub.state.run_state === 'Finished', 800);
    expect(hub.state.run_state).toBe('Finished');
    expect(peers.flatMap((p) => p.events.filter((e) => e.type === 'resync' || e.type === 'error'))).toEqual(
      [],
    );

    const reports = peers.flatMap((p) => p.reports);
    expect(reports.length).toBeGreaterThan(3);
    for (const r of reports) {
      // Two rows of SEQ predicted tokens per batch, one virtual second per backend call (maxRows 2: one call).
      expect(r.metadata.tokensPerSec).toBe(2 * SEQ);
      // Within the first window: everything this client moved, over its clock's time since it started.
      expect(r.metadata.bandwidth).toBeCloseTo(r.bytes / (r.now / 1000), 6);
      expect(r.metadata.bandwidth).toBeGreaterThan(0);
      expect(r.metadata.loss).toBe(r.loss);
    }

    // Every epoch after the first keeps the model each replica hashed at the previous epoch's end.
    for (const p of peers) {
      const hashes = new Map(p.events.flatMap((e) => (e.type === 'paramHash' ? [[e.step, e.hash]] : [])));
      const kept = p.events.filter((e) => e.type === 'model' && e.source === 'kept');
      expect(kept.length).toBeGreaterThan(0);
      for (const e of kept) {
        if (e.type !== 'model') continue;
        expect(e.hash).toMatch(/^[0-9a-f]{64}$/);
        expect(e.hash).toBe(hashes.get(e.step));
      }
    }
    const final = await Promise.all(peers.map(async (p) => bytesToHex(await p.client.parameterHash())));
    expect(new Set(final).size).toBe(1);
  }, 120_000);

  it('a hash refused with param_hash_mismatch re-syncs; a refusal without that code only warns', async () => {
    const run = shortEpochs();
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [
      startMeasuredPeer(hub, run, 1),
      startMeasuredPeer(hub, run, 2, () => new RelayRefusal(PARAM_HASH_MISMATCH, 'not the majority')),
      // The code's text in the message alone means nothing: a warning, and the replica carries on.
      startMeasuredPeer(hub, run, 3, () => new Error(`${PARAM_HASH_MISMATCH}? relay connection closed`)),
    ];
    await drive(hub, () => hub.state.run_state === 'Finished', 800);
    const [, refused, other] = peers as [Peer, Peer, Peer];
    const resyncs = refused.events.filter((e) => e.type === 'resync');
    expect(resyncs.length).toBeGreaterThan(0);
    expect(resyncs[0]).toMatchObject({ reason: expect.stringContaining('not the majority') });
    expect(other.events.filter((e) => e.type === 'resync')).toEqual([]);
    expect(
      other.events.some((e) => e.type === 'warning' && e.message.startsWith('parameter hash report failed')),
    ).toBe(true);
  }, 120_000);
});
