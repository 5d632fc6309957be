// A cold-start epoch (after a pause) zeroes every client's DisTrO momentum at round height 0. The residual of
// the client's last result before the pause belongs to that zeroed momentum: subtracting it from the fresh
// one would put the negation of the last result before the pause into the first one after it — an update
// against the gradient, which verifiers fail (on the toy model: update agreement 0.33 at the cold-start round
// instead of 1). End to end in-process (LocalHub with core's coordinator, real Clients, the toy model),
// verification on every result.
import { describe, expect, it } from 'vitest';
import { bytesToHex, type CoordinatorEvent } from '@meshtrain/core';
import { LocalHub } from '../src/testing.ts';
import {
  drive,
  startPeer,
  testRun,
  TOY_HUB,
  type TestPeer,
  TOY_TIMERS,
  stopPeersAfterEach,
} from './helpers.ts';

let peers: TestPeer[] = [];
stopPeersAfterEach();

/** The admin's pause / resume, as the relay feeds them to core. */
function admin(hub: LocalHub, type: 'pause' | 'resume'): void {
  const err = (hub as unknown as { apply(id: string, e: CoordinatorEvent): Error | null }).apply('', {
    type,
  });
  expect(err).toBeNull();
}

describe('cold start', () => {
  it('the first results after a pause and resume follow the gradient: every verdict passes, nobody is ejected', async () => {
    const run = testRun({
      ...TOY_TIMERS,
      init_min_clients: 4,
      global_batch_size_start: 8,
      global_batch_size_end: 8,
      max_seq_len: 8,
      verification_percent: 100,
      total_steps: 14,
    });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    peers = [1, 2, 3, 4].map((b) => startPeer(hub, run, b));
    await drive(hub, () => hub.state.progress.step >= 5);
    admin(hub, 'pause');
    await drive(hub, () => hub.state.run_state === 'Paused');
    expect(hub.state.run_state).toBe('Paused');
    const pausedAt = hub.state.progress.step;
    admin(hub, 'resume');
    await drive(hub, () => hub.state.epoch.cold_start_epoch && hub.state.progress.step > pausedAt + 3);
    expect(hub.state.epoch.cold_start_epoch).toBe(true);
    await drive(hub, () => hub.state.run_state === 'Finished');
    expect(hub.state.run_state).toBe('Finished');

    const verdicts = peers.flatMap((p) => p.events.flatMap((e) => (e.type === 'verified' ? [e] : [])));
    const afterResume = verdicts.filter((v) => v.step >= pausedAt);
    expect(afterResume.length).toBeGreaterThan(4);
    // The cold-start round itself (height 0 of the resumed epoch) was verified.
    expect(afterResume.some((v) => v.step === pausedAt)).toBe(true);
    for (const v of verdicts) {
      expect(v.fingerprintAgreement, `step ${v.step}`).toBe(1);
      expect(v.updateAgreement, `step ${v.step}`).toBeGreaterThan(0.5);
      expect(v.pass).toBe(true);
    }
    expect(hub.state.ejected).toEqual([]);
    const hashes = await Promise.all(peers.map(async (p) => bytesToHex(await p.client.parameterHash())));
    expect(new Set(hashes).size).toBe(1);
  }, 120_000);
});
