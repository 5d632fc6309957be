// The client state machine against core's real coordinator (LocalHub, in-process, virtual time), with a
// TypeScript toy model so the protocol is what is under test: every replica applies the same accepted
// results in the same order and ends each epoch bit-identical; results nobody accepted are never applied;
// a client that cannot obtain an accepted result re-syncs from the checkpoint instead of diverging.
import {
  bytesToHex,
  CoordinatorError,
  decodeSignedResult,
  encodeSignedResult,
  signResult,
  identityFromSeed,
} from '@meshtrain/core';
import { describe, expect, it } from 'vitest';
import { LocalHub } from '../src/testing.ts';
import type { CoordinatorLink } from '../src/index.ts';
import { createWebGpuBackend } from '@meshtrain/distro';
import { dawnDevice } from '@meshtrain/distro/node';
import {
  drive,
  residentToyBackend,
  startPeer,
  testRun,
  TOY_HUB,
  type TestPeer,
  TOY_TIMERS,
  stopPeersAfterEach,
  stopStartedPeers,
} from './helpers.ts';

let peers: TestPeer[] = [];
stopPeersAfterEach();

const BASE = {
  ...TOY_TIMERS,
  init_min_clients: 3,
  global_batch_size_start: 6,
  global_batch_size_end: 6,
  max_seq_len: 8,
};

async function hashes(ps: TestPeer[]): Promise<string[]> {
  return Promise.all(ps.map(async (p) => bytesToHex(await p.client.parameterHash())));
}

describe('client', () => {
  it('three replicas train, witness every round and stay bit-identical', async () => {
    const run = testRun({ ...BASE, total_steps: 8 });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3].map((b) => startPeer(hub, run, b));
    // A newcomer registers during Cooldown: the snapshot that follows must not unsettle the epoch's clients.
    let newcomer = false;
    await drive(hub, () => {
      if (hub.state.run_state === 'Cooldown' && !newcomer) {
        newcomer = true;
        hub.connect(new Uint8Array(32).fill(9));
      }
      return hub.state.run_state === 'Finished';
    });
    expect(newcomer).toBe(true);
    expect(hub.state.run_state).toBe('Finished');
    expect(peers.flatMap((p) => p.events.filter((e) => e.type === 'resync' || e.type === 'error'))).toEqual(
      [],
    );
    expect(hub.log.rounds.length).toBeGreaterThanOrEqual(8);
    expect(hub.log.rounds.every((r) => r.reached)).toBe(true);
    // Every epoch end: one hash, reported by all three.
    for (const [, m] of hub.log.paramHashes) {
      expect(m.size).toBe(3);
      expect(new Set(m.values()).size).toBe(1);
    }
    const hs = await hashes(peers);
    expect(new Set(hs).size).toBe(1);
    // The model moved, and the loss went down.
    const applied = peers[0]!.events.filter((e) => e.type === 'applied');
    expect(applied.reduce((n, e) => n + (e.type === 'applied' ? e.results : 0), 0)).toBeGreaterThan(0);
    const losses = peers.flatMap((p) => p.events.flatMap((e) => (e.type === 'trained' ? [e.loss] : [])));
    expect(losses.length).toBeGreaterThan(6);
    expect(hub.log.refusals.filter((r) => r.event !== 'health_check')).toEqual([]);
  }, 60_000);

  it.runIf(process.env.MESHTRAIN_SKIP_WEBGPU !== '1')(
    'resident replicas (DisTrO WGSL, gradients as GPU tensors, one or several micro-batches) match host replicas bit for bit',
    async () => {
      const dawn = await dawnDevice();
      if (!dawn)
        throw new Error(
          'no WebGPU adapter (install chromium for SwiftShader, or set MESHTRAIN_SKIP_WEBGPU=1)',
        );
      try {
        const run = testRun({ ...BASE, total_steps: 6 });
        const hub = new LocalHub(run, 'unit', TOY_HUB);
        // Two rows per batch: maxRows 2 hands one step's gradients over as they are, maxRows 1 sums two on the GPU.
        const gpus = [2, 1].map(() => createWebGpuBackend(dawn.device, { chunk: 64 }));
        const residents = gpus.map((g, i) => residentToyBackend(g, i === 0 ? 2 : 1));
        peers = [
          startPeer(hub, run, 1, 300, { backend: residents[0], distro: gpus[0] }),
          startPeer(hub, run, 2, 300, { backend: residents[1], distro: gpus[1] }),
          startPeer(hub, run, 3),
        ];
        await drive(hub, () => hub.state.run_state === 'Finished');
        expect(hub.state.run_state).toBe('Finished');
        expect(
          peers.flatMap((p) => p.events.filter((e) => e.type === 'resync' || e.type === 'error')),
        ).toEqual([]);
        for (const r of residents) {
          expect(r.hostCalls).toBe(0);
          expect(r.residentSteps).toBeGreaterThan(0);
          expect(r.released).toBe(r.residentSteps);
        }
        // The several-micro-batch client ran two resident steps per batch it trained.
        const trained = (p: TestPeer) => p.events.filter((e) => e.type === 'trained').length;
        expect(residents[1]!.residentSteps).toBe(2 * trained(peers[1]!));
        for (const [, m] of hub.log.paramHashes) {
          expect(m.size).toBe(3);
          expect(new Set(m.values()).size).toBe(1);
        }
        expect(new Set(await hashes(peers)).size).toBe(1);
      } finally {
        await stopStartedPeers();
        dawn.device.destroy();
      }
    },
    90_000,
  );

  it('a warmup witness refused because the phase ended in flight is no error', async () => {
    const run = testRun({ ...BASE, total_steps: 4 });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    let refused = 0;
    // The relay took the witness but the reply says the phase had ended: the race a slow model load loses.
    const late = (link: CoordinatorLink): CoordinatorLink =>
      new Proxy(link, {
        get(target, prop, receiver) {
          if (prop === 'submitWarmupWitness')
            return async (epoch: number) => {
              await target.submitWarmupWitness(epoch);
              refused++;
              throw new CoordinatorError('WrongPhase', 'warmup_witness is only accepted in Warmup');
            };
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
    peers = [startPeer(hub, run, 1, 300, { wrapLink: late }), startPeer(hub, run, 2), startPeer(hub, run, 3)];
    await drive(hub, () => hub.state.run_state === 'Finished');
    expect(hub.state.run_state).toBe('Finished');
    expect(refused).toBeGreaterThan(0);
    expect(peers[0]!.events.filter((e) => e.type === 'error')).toEqual([]);
    expect(peers[0]!.events.filter((e) => e.type === 'trained').length).toBeGreaterThan(0);
  }, 60_000);

  it('work cut short by stop() is no error, and a failure while running still is', async () => {
    const run = testRun({ ...BASE, total_steps: 40 });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    // The shell's Ctrl-C: it stops the client and closes the link while a result is on its way out.
    let stopping: TestPeer | null = null;
    let failed = 0;
    const closing = (link: CoordinatorLink): CoordinatorLink =>
      new Proxy(link, {
        get(target, prop, receiver) {
          // The first submission fails while running; once `stopping` is set, the next fails with the stop.
          if (prop === 'submitResult' && (failed === 0 || stopping))
            return async () => {
              failed++;
              stopping?.client.stop();
              throw new Error('the relay link is closed');
            };
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
    peers = [
      startPeer(hub, run, 1, 300, { wrapLink: closing }),
      startPeer(hub, run, 2),
      startPeer(hub, run, 3),
    ];
    const peer = peers[0]!;
    // First a failure while running: reported.
    await drive(hub, () => failed === 1 && peer.events.some((e) => e.type === 'error'));
    expect(peer.events.filter((e) => e.type === 'error')).toHaveLength(1);
    // Then the same failure as the consequence of a stop: the run loop ends, nothing more is reported.
    stopping = peer;
    await drive(hub, () => failed > 1 || hub.state.run_state === 'Finished');
    expect(failed).toBe(2);
    await peer.done;
    expect(peer.events.filter((e) => e.type === 'error')).toHaveLength(1);
  }, 60_000);

  it('applies only the witnessed result when a trainer equivocates to one peer', async () => {
    const run = testRun({ ...BASE, total_steps: 6 });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3].map((b) => startPeer(hub, run, b));
    const victim = peers[2]!;
    // Peer 1 is the liar: whenever it publishes, the victim also gets a second, different result for the
    // same batch, validly signed by the same key. Witnesses saw only the first, so only it is accepted.
    const liar = identityFromSeed(new Uint8Array(32).fill(1));
    let forged = 0;
    const done = new Set<number>();
    await drive(hub, () => {
      if (hub.state.run_state === 'Finished') return true;
      for (const e of peers[0]!.events) {
        if (e.type !== 'trained' || done.has(e.step)) continue;
        done.add(e.step);
        const result = {
          runId: 'unit',
          step: e.step,
          batch: e.batch,
          trainerNonce: 999,
          tensors: [],
        };
        const frame = encodeSignedResult({ envelope: signResult(liar.secretKey, result), result });
        decodeSignedResult(frame);
        hub.deliverTo(victim.id, frame);
        forged++;
      }
      return false;
    });
    expect(forged).toBeGreaterThan(0);
    expect(hub.state.run_state).toBe('Finished');
    const hs = await hashes(peers);
    expect(new Set(hs).size).toBe(1);
    expect(victim.events.filter((e) => e.type === 'resync')).toEqual([]);
  }, 60_000);

  it('re-syncs from the checkpoint when an accepted result cannot be fetched', async () => {
    const run = testRun({ ...BASE, epoch_time: 25, total_steps: 30 });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3].map((b) => startPeer(hub, run, b));
    const victim = peers[2]!;
    // Starve the victim of payloads once training is under way: announces still name the accepted results.
    await drive(hub, () => hub.state.progress.step >= 3);
    hub.starve(victim.id);
    await drive(hub, () => victim.events.some((e) => e.type === 'resync'));
    hub.starve(victim.id, false);
    const resync = victim.events.find((e) => e.type === 'resync');
    expect(resync).toBeDefined();
    await drive(hub, () => hub.state.run_state === 'Finished', 800);
    expect(hub.state.run_state).toBe('Finished');
    // It came back with a verified checkpoint and matched everyone at the next epoch ends.
    expect(victim.events.some((e) => e.type === 'model' && e.source === 'checkpoint')).toBe(true);
    const ends = [...hub.log.paramHashes.values()];
    for (const m of ends) expect(new Set(m.values()).size).toBe(1);
    expect(ends.at(-1)!.has(victim.id)).toBe(true);
    const hs = await hashes(peers);
    expect(new Set(hs).size).toBe(1);
  }, 120_000);
});
