// SparseLoCo's lag-0 apply (docs/protocol.md "Speculative apply (SparseLoCo)"): each round's admitted results
// are applied before the next round trains, and a result applied that way but missing from the round's final
// accepted set (here: one the verifiers failed) is taken out by a rebuild on every replica alike.
import { describe, expect, it } from 'vitest';
import { bytesToHex } from '@meshtrain/core';
import { LocalHub, adversary } from '../src/testing.ts';
import {
  drive,
  sparseLoCoRun,
  startPeer,
  toyBackend,
  TOY_HUB,
  toyData,
  type TestPeer,
  TOY_TIMERS,
  stopPeersAfterEach,
} from './helpers.ts';

let peers: TestPeer[] = [];
stopPeersAfterEach();

const CONFIG = {
  ...TOY_TIMERS,
  init_min_clients: 4,
  global_batch_size_start: 4,
  global_batch_size_end: 4,
  max_seq_len: 8,
  total_steps: 8,
};
const TABLE = { inner_steps: 4, compression_topk: 16 };

describe('SparseLoCo applies each round at once', () => {
  it('every round after the first trains on the previous round’s results', async () => {
    const run = sparseLoCoRun(CONFIG, TABLE);
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3, 4].map((b) => startPeer(hub, run, b, 300, { backend: toyBackend(1) }));
    await drive(hub, () => hub.state.run_state === 'Finished');
    expect(hub.state.run_state).toBe('Finished');
    for (const p of peers) {
      const trained = p.events.flatMap((e, i) => (e.type === 'trained' ? [{ i, step: e.step }] : []));
      expect(trained.length).toBeGreaterThan(3);
      for (const t of trained.slice(1)) {
        const applied = p.events.findIndex((e) => e.type === 'applied' && e.step === t.step - 1);
        expect(applied, `step ${t.step - 1} applied before step ${t.step} trains`).toBeGreaterThanOrEqual(0);
        expect(applied).toBeLessThan(t.i);
        const e = p.events[applied];
        expect(e?.type === 'applied' && e.results).toBeGreaterThan(0);
      }
      expect(p.events.filter((e) => e.type === 'replayed' || e.type === 'resync')).toEqual([]);
    }
    const hashes = await Promise.all(peers.map(async (p) => bytesToHex(await p.client.parameterHash())));
    expect(new Set(hashes).size).toBe(1);
  }, 120_000);

  it('a result applied at once and then failed by its verifiers is removed on every replica', async () => {
    const run = sparseLoCoRun({ ...CONFIG, verification_percent: 100 }, TABLE);
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    const honest = [1, 2, 3].map((b) => startPeer(hub, run, b, 300, { backend: toyBackend(1) }));
    const cheater = startPeer(hub, run, 9, 300, {
      backend: toyBackend(1),
      wrapLink: (link, key) =>
        adversary(
          'sign-flip',
          key,
          { link, data: toyData, checkpoints: hub.checkpoints() },
          { honestRounds: 1 },
        ).link,
    });
    peers = [...honest, cheater];
    await drive(hub, () => hub.state.run_state === 'Finished');
    const failed = honest.flatMap((p) =>
      p.events.flatMap((e) => (e.type === 'verified' && e.trainer === cheater.id && !e.pass ? [e.step] : [])),
    );
    expect(failed.length).toBeGreaterThan(0);
    const failedStep = Math.min(...failed);
    for (const p of honest) {
      // The round of the cheat's first failed result was applied with all four results, before the verdict.
      const applied = p.events.find((e) => e.type === 'applied' && e.step === failedStep);
      expect(applied?.type === 'applied' && applied.results).toBe(4);
      const replayed = p.events.filter((e) => e.type === 'replayed');
      expect(replayed.length).toBeGreaterThan(0);
      expect(replayed.every((e) => e.type === 'replayed' && e.excluded > 0)).toBe(true);
    }
    const hashes = await Promise.all(honest.map(async (p) => bytesToHex(await p.client.parameterHash())));
    expect(new Set(hashes).size).toBe(1);
    expect(hub.state.ejected).toContain(cheater.id);
  }, 120_000);
});
