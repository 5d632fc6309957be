// SparseLoCo runs end to end in-process (LocalHub with core's coordinator, real Clients, the toy model): every
// trainer takes H inner AdamW steps per round on its interval's H inner batches, sends n-bit top-k results the
// host admits by the run's result shape, and every replica — CPU reference, WGSL on Dawn, and resident
// replicas whose gradients never leave the GPU — applies the same exact outer steps, ending bit-identical.
import { bytesToHex, innerBatches, roundAssignments, type RunConfig } from '@meshtrain/core';
import { createWebGpuBackend } from '@meshtrain/distro';
import { dawnDevice } from '@meshtrain/distro/node';
import { describe, expect, it } from 'vitest';
import { LocalHub } from '../src/testing.ts';
import {
  drive,
  residentToyBackend,
  sparseLoCoRun,
  startPeer,
  toyBackend,
  toyData,
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
  // Sequences per inner step across the run: a round's batch is H × this.
  global_batch_size_start: 6,
  global_batch_size_end: 6,
  max_seq_len: 8,
};
const H = 3;
/** The toy with batches that agree more than its default, as a language model's do (see the verification test). */
const BATCH_WEIGHT = 1;
/** Per-row gradients, so replicas with different micro-batch sizes compute the same gradient (to rounding). */
const toy = () => toyBackend(BATCH_WEIGHT, true);
/** The toy's tensors have 16 or 128 entries per chunk: 16 of them sent, at 2 bits. */
const TABLE = { inner_steps: H, compression_topk: 16, quantization_bits: 2 };

async function hashes(ps: TestPeer[]): Promise<string[]> {
  return Promise.all(ps.map(async (p) => bytesToHex(await p.client.parameterHash())));
}

function problems(ps: TestPeer[]) {
  return ps.flatMap((p) => p.events.filter((e) => e.type === 'resync' || e.type === 'error'));
}

/** Counts the samples each trainer's data source is asked for, per call (one call per inner batch). */
function countingData(calls: number[]) {
  return {
    samples: (start: number, end: number) => {
      calls.push(end - start + 1);
      return toyData.samples(start, end);
    },
  };
}

/** Drives `hub` to the run's end (`msPerSecond`: real time per virtual second, for slow software GPUs). */
async function finishedRun(run: RunConfig, hub: LocalHub, msPerSecond = 30): Promise<void> {
  await drive(hub, () => hub.state.run_state === 'Finished', 400, msPerSecond);
  expect(hub.state.run_state).toBe('Finished');
  expect(problems(peers)).toEqual([]);
  expect(hub.log.refusals.filter((r) => r.event !== 'health_check')).toEqual([]);
  for (const [, m] of hub.log.paramHashes) {
    expect(m.size).toBe(peers.length);
    expect(new Set(m.values()).size).toBe(1);
  }
  expect(new Set(await hashes(peers)).size).toBe(1);
  void run;
}

describe('SparseLoCo', () => {
  it.runIf(process.env.MESHTRAIN_SKIP_WEBGPU !== '1')(
    'three CPU replicas and one WGSL replica train H inner steps per round and end bit-identical',
    async () => {
      const dawn = await dawnDevice();
      if (!dawn)
        throw new Error(
          'no WebGPU adapter (install chromium for SwiftShader, or set MESHTRAIN_SKIP_WEBGPU=1)',
        );
      try {
        const run = sparseLoCoRun(
          { ...BASE, init_min_clients: 4, total_steps: 8, verification_percent: 0 },
          TABLE,
        );
        const hub = new LocalHub(run, 'unit', TOY_HUB);
        const calls: number[] = [];
        peers = [
          startPeer(hub, run, 1, 300, { data: countingData(calls), backend: toy() }),
          startPeer(hub, run, 2, 300, { backend: toy() }),
          startPeer(hub, run, 3, 300, { backend: toy() }),
          startPeer(hub, run, 4, 300, {
            backend: toy(),
            distro: createWebGpuBackend(dawn.device, { chunk: 64 }),
          }),
        ];
        // Every round hands out H × 6 samples; each trainer's interval is H inner batches.
        const rounds = new Set<number>();
        await drive(hub, () => {
          const s = hub.state;
          const round = s.epoch.rounds[s.epoch.rounds_head];
          if (s.run_state === 'RoundTrain' && round?.training && !rounds.has(round.step)) {
            rounds.add(round.step);
            expect(round.batch_size).toBe(H * 6);
            for (const a of roundAssignments(s, round)) expect(innerBatches(a.batch, H)).toHaveLength(H);
          }
          return s.run_state === 'Finished';
        });
        await finishedRun(run, hub);
        expect(rounds.size).toBeGreaterThan(3);
        // The counted trainer fetched each inner batch separately: H calls per trained round.
        const trained = peers[0]!.events.filter((e) => e.type === 'trained').length;
        expect(trained).toBeGreaterThan(0);
        expect(calls.length).toBe(H * trained);
        // Applied results moved the model, and the training loss fell.
        const applied = peers[0]!.events.reduce((n, e) => n + (e.type === 'applied' ? e.results : 0), 0);
        expect(applied).toBeGreaterThan(0);
        const losses = peers.flatMap((p) => p.events.flatMap((e) => (e.type === 'trained' ? [e] : [])));
        const first = losses.filter((e) => e.step === Math.min(...losses.map((x) => x.step)));
        const last = losses.filter((e) => e.step === Math.max(...losses.map((x) => x.step)));
        const mean = (xs: { loss: number }[]) => xs.reduce((a, b) => a + b.loss, 0) / xs.length;
        expect(mean(last)).toBeLessThan(mean(first));
      } finally {
        await stopStartedPeers();
        dawn.device.destroy();
      }
    },
    120_000,
  );

  it.runIf(process.env.MESHTRAIN_SKIP_WEBGPU !== '1')(
    'resident replicas (inner AdamW, error feedback, top-k and verification on the GPU) match a host replica bit for bit, in both domains',
    async () => {
      const dawn = await dawnDevice();
      if (!dawn)
        throw new Error(
          'no WebGPU adapter (install chromium for SwiftShader, or set MESHTRAIN_SKIP_WEBGPU=1)',
        );
      try {
        for (const domain of ['"raw"', '"dct"']) {
          // Every result verified: GPU trainers checked by the CPU replica and the other way round.
          const run = sparseLoCoRun(
            { ...BASE, total_steps: 5, verification_percent: 100, max_round_train_time: 60 },
            { ...TABLE, domain },
          );
          const hub = new LocalHub(run, 'unit', TOY_HUB);
          // Inner batches of 2 rows: maxRows 2 hands one step's gradients over, maxRows 1 sums two on the GPU.
          const gpus = [2, 1].map(() => createWebGpuBackend(dawn.device, { chunk: 64 }));
          const residents = gpus.map((g, i) => residentToyBackend(g, i === 0 ? 2 : 1, BATCH_WEIGHT, true));
          peers = [
            startPeer(hub, run, 1, 300, { backend: residents[0], distro: gpus[0] }),
            startPeer(hub, run, 2, 300, { backend: residents[1], distro: gpus[1] }),
            startPeer(hub, run, 3, 300, { backend: toy() }),
          ];
          // Resident steps and reruns on SwiftShader take longer than a round of the default pace (rounds
          // still end as soon as every witness is in).
          await finishedRun(run, hub, 100);
          const count = (p: TestPeer, type: string) => p.events.filter((e) => e.type === type).length;
          for (const r of residents) {
            expect(r.hostCalls).toBe(0);
            expect(r.released).toBe(r.residentSteps);
          }
          // At least one resident step per inner batch trained or rerun to verify (H each); one per row at
          // maxRows 1, so more there.
          const batches = (p: TestPeer) => H * (count(p, 'trained') + count(p, 'verified'));
          expect(residents[0]!.residentSteps).toBeGreaterThanOrEqual(batches(peers[0]!));
          expect(residents[1]!.residentSteps).toBeGreaterThan(batches(peers[1]!));
          const verified = peers.flatMap((p) => p.events.flatMap((e) => (e.type === 'verified' ? [e] : [])));
          expect(verified.length).toBeGreaterThan(3);
          for (const v of verified) {
            expect(v.pass).toBe(true);
            expect(v.fingerprintAgreement).toBe(1);
          }
          await stopStartedPeers();
        }
      } finally {
        dawn.device.destroy();
      }
    },
    180_000,
  );

  it('spans epochs and a re-sync: a starved replica reloads the checkpoint (fresh optimizer state) and ends identical', async () => {
    const run = sparseLoCoRun({ ...BASE, epoch_time: 40, total_steps: 16, verification_percent: 0 }, TABLE);
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3].map((b) => startPeer(hub, run, b, 300, { backend: toy() }));
    const victim = peers[2]!;
    await drive(hub, () => hub.state.progress.step >= 3);
    hub.starve(victim.id);
    await drive(hub, () => victim.events.some((e) => e.type === 'resync'));
    hub.starve(victim.id, false);
    await drive(hub, () => hub.state.run_state === 'Finished', 1200);
    expect(hub.state.run_state).toBe('Finished');
    expect(hub.log.paramHashes.size).toBeGreaterThan(1);
    expect(victim.events.some((e) => e.type === 'model' && e.source === 'checkpoint')).toBe(true);
    const ends = [...hub.log.paramHashes.values()];
    for (const m of ends) expect(new Set(m.values()).size).toBe(1);
    expect(ends.at(-1)!.has(victim.id)).toBe(true);
    expect(new Set(await hashes(peers)).size).toBe(1);
  }, 180_000);
});
