// Verification of work in SparseLoCo runs, end to end in-process (LocalHub, real Clients, the toy model):
// verifiers rerun the trainer's H inner steps from the shared parameters, so honest results pass (the
// fingerprint of the first inner step agrees exactly) and results whose signs were made up or flipped, that
// were trained on other samples, or replayed from an earlier round are caught by both verifiers, their
// trainer ejected and its results removed, with the honest replicas staying bit-identical.
import { describe, expect, it } from 'vitest';
import { bytesToHex } from '@meshtrain/core';
import { LocalHub, adversary, type AdversaryKind } from '../src/testing.ts';
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

const BASE = {
  ...TOY_TIMERS,
  init_min_clients: 4,
  global_batch_size_start: 4,
  global_batch_size_end: 4,
  max_seq_len: 8,
  verification_percent: 100,
};
const TABLE = { inner_steps: 4, compression_topk: 16 };
/**
 * The toy with batches that agree more than its default (as a language model's do): the trainer's AdamW
 * moments carry earlier rounds' batches, which the verifier's fresh rerun cannot know, so on the default
 * toy, whose batches disagree in sign almost everywhere, an honest update would look unrelated.
 */
const toy = () => toyBackend(1);

async function hashes(ps: TestPeer[]): Promise<string[]> {
  return Promise.all(ps.map(async (p) => bytesToHex(await p.client.parameterHash())));
}

function verdicts(ps: TestPeer[]) {
  return ps.flatMap((p) => p.events.flatMap((e) => (e.type === 'verified' ? [e] : [])));
}

describe('verification of SparseLoCo results', () => {
  it('honest replicas pass every check, nobody is ejected, hashes stay equal', async () => {
    const run = sparseLoCoRun({ ...BASE, total_steps: 10 }, TABLE);
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3, 4].map((b) => startPeer(hub, run, b, 300, { backend: toy() }));
    await drive(hub, () => hub.state.run_state === 'Finished');
    expect(hub.state.run_state).toBe('Finished');
    const v = verdicts(peers);
    expect(v.length).toBeGreaterThan(10);
    for (const x of v) {
      expect(x.pass).toBe(true);
      expect(x.fingerprintAgreement).toBe(1);
    }
    expect(hub.state.ejected).toEqual([]);
    expect(peers.flatMap((p) => p.events.filter((e) => e.type === 'error' || e.type === 'resync'))).toEqual(
      [],
    );
    expect(new Set(await hashes(peers)).size).toBe(1);
  }, 120_000);

  const caught: Array<[AdversaryKind, number]> = [
    ['random-signs', 0],
    ['sign-flip', 0],
    ['stale-replay', 0],
    ['other-batch', 0],
    // Honest for two rounds first: those results are applied before the cheat is confirmed, then removed.
    ['sign-flip', 2],
  ];
  for (const [kind, honestRounds] of caught)
    it(`catches ${kind}${honestRounds ? ` after ${honestRounds} honest rounds` : ''}: ejected, its results removed, the others stay identical`, async () => {
      const run = sparseLoCoRun({ ...BASE, total_steps: 10 }, TABLE);
      const hub = new LocalHub(run, 'unit', TOY_HUB);
      const honest = [1, 2, 3].map((b) => startPeer(hub, run, b, 300, { backend: toy() }));
      const cheater = startPeer(hub, run, 9, 300, {
        backend: toy(),
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
      for (const p of honest) expect(hub.state.ejected).not.toContain(p.id);
      const onHonest = verdicts(honest).filter((x) => x.trainer !== cheater.id);
      expect(onHonest.length).toBeGreaterThan(0);
      expect(onHonest.every((x) => x.pass)).toBe(true);
      expect(verdicts(honest).some((x) => x.trainer === cheater.id && !x.pass)).toBe(true);
      // Lag 0: the cheat's first result was applied at once, before any verdict, so every honest replica
      // rebuilt its parameters without it.
      for (const p of honest) expect(p.events.some((e) => e.type === 'replayed')).toBe(true);
      expect(
        honest.flatMap((p) => p.events.filter((e) => e.type === 'error' || e.type === 'resync')),
      ).toEqual([]);
      expect(new Set(await hashes(honest)).size).toBe(1);
    }, 120_000);
});
