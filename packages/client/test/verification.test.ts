// Verification of work, end to end in-process (LocalHub with core's coordinator, real Clients, the toy model):
// honest replicas pass every check and stay bit-identical; a cheater is caught by two verifiers, ejected, and
// its results — also those applied before it was caught — are removed from every replica alike.
import { describe, expect, it } from 'vitest';
import { bytesToHex } from '@meshtrain/core';
import { LocalHub, adversary, type AdversaryKind } from '../src/testing.ts';
import {
  drive,
  startPeer,
  testRun,
  TOY_HUB,
  toyData,
  type TestPeer,
  TOY_TIMERS,
  stopPeersAfterEach,
} from './helpers.ts';

let peers: TestPeer[] = [];
stopPeersAfterEach();

const BASE = {
  ...TOY_TIMERS,
  init_min_clients: 4,
  global_batch_size_start: 8,
  global_batch_size_end: 8,
  max_seq_len: 8,
  verification_percent: 100,
};

async function hashes(ps: TestPeer[]): Promise<string[]> {
  return Promise.all(ps.map(async (p) => bytesToHex(await p.client.parameterHash())));
}

function verdicts(ps: TestPeer[]) {
  return ps.flatMap((p) => p.events.flatMap((e) => (e.type === 'verified' ? [e] : [])));
}

describe('verification', () => {
  it('honest replicas pass every check (fingerprints agree exactly), nobody is ejected, hashes stay equal', async () => {
    const run = testRun({ ...BASE, total_steps: 8 });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3, 4].map((b) => startPeer(hub, run, b));
    await drive(hub, () => hub.state.run_state === 'Finished');
    expect(hub.state.run_state).toBe('Finished');
    const v = verdicts(peers);
    expect(v.length).toBeGreaterThan(10);
    for (const x of v) {
      expect(x.pass).toBe(true);
      expect(x.fingerprintAgreement).toBe(1);
      expect(x.updateAgreement).toBeGreaterThan(0.5);
    }
    expect(hub.state.ejected).toEqual([]);
    expect(peers.flatMap((p) => p.events.filter((e) => e.type === 'error' || e.type === 'resync'))).toEqual(
      [],
    );
    expect(new Set(await hashes(peers)).size).toBe(1);
  }, 90_000);

  const caught: Array<[AdversaryKind, number]> = [
    ['random-signs', 0],
    ['sign-flip', 0],
    ['stale-replay', 0],
    ['other-batch', 0],
    // Honest for two rounds first: those results are applied before the cheat is confirmed, then removed.
    ['random-signs', 2],
  ];
  for (const [kind, honestRounds] of caught)
    it(`catches ${kind}${honestRounds ? ` after ${honestRounds} honest rounds` : ''}: ejected, its results removed, the others stay identical`, async () => {
      const run = testRun({ ...BASE, total_steps: 10 });
      const hub = new LocalHub(run, 'unit', TOY_HUB);
      const honest = [1, 2, 3].map((b) => startPeer(hub, run, b));
      const cheater = startPeer(hub, run, 9, 300, {
        wrapLink: (link, key) =>
          adversary(kind, key, { link, data: toyData, checkpoints: hub.checkpoints() }, { honestRounds })
            .link,
        ...(kind === 'other-batch'
          ? {
              data: adversary(kind, new Uint8Array(32), {
                link: hub.connect(new Uint8Array(32).fill(77)),
                data: toyData,
                checkpoints: hub.checkpoints(),
              }).data,
            }
          : {}),
      });
      peers = [...honest, cheater];
      await drive(hub, () => hub.state.run_state === 'Finished' || hub.state.ejected.includes(cheater.id));
      await drive(hub, () => hub.state.run_state === 'Finished');
      expect(hub.state.ejected).toContain(cheater.id);
      // Nobody honest was ejected or dropped, and every verdict on an honest result passed.
      for (const p of honest) expect(hub.state.ejected).not.toContain(p.id);
      const onHonest = verdicts(honest).filter((x) => x.trainer !== cheater.id);
      expect(onHonest.every((x) => x.pass)).toBe(true);
      const onCheater = verdicts(honest).filter((x) => x.trainer === cheater.id);
      expect(onCheater.some((x) => !x.pass)).toBe(true);
      if (honestRounds > 0)
        expect(honest.some((p) => p.events.some((e) => e.type === 'replayed'))).toBe(true);
      expect(
        honest.flatMap((p) => p.events.filter((e) => e.type === 'error' || e.type === 'resync')),
      ).toEqual([]);
      expect(new Set(await hashes(honest)).size).toBe(1);
    }, 120_000);
});
