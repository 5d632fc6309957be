// A client the coordinator dropped (here: accused by a witness quorum for results it never sent) is no longer a
// member; at the next WaitingForMembers it joins again by itself and trains the rest of the run, ending with
// the same parameters as everyone else.
import { describe, expect, it } from 'vitest';
import { bytesToHex } from '@meshtrain/core';
import { LocalHub } from '../src/testing.ts';
import type { CoordinatorLink } from '../src/interfaces.ts';
import { drive, startPeer, testRun, TOY_HUB, type TestPeer, stopPeersAfterEach } from './helpers.ts';

let peers: TestPeer[] = [];
stopPeersAfterEach();

/** A link that swallows this client's results while `silent()` holds: to the witnesses it trained nothing. */
function silentWhile(link: CoordinatorLink, silent: () => boolean): CoordinatorLink {
  return new Proxy(link, {
    get(target, prop, receiver) {
      if (prop === 'submitResult')
        return (frame: Uint8Array, announce: Parameters<CoordinatorLink['submitResult']>[1]) =>
          silent() ? Promise.resolve() : target.submitResult(frame, announce);
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe('a dropped client', () => {
  it('joins again at the next epoch and ends with the same parameters', async () => {
    const run = testRun({
      warmup_time: 10,
      cooldown_time: 2,
      epoch_time: 40,
      max_round_train_time: 10,
      round_witness_time: 1,
      waiting_for_members_extra_time: 1,
      min_clients: 3,
      init_min_clients: 4,
      global_batch_size_start: 8,
      global_batch_size_end: 8,
      max_seq_len: 8,
      total_steps: 30,
    });
    const hub = new LocalHub(run, 'unit', TOY_HUB);
    let firstEpoch = true;
    const honest = [1, 2, 3].map((b) => startPeer(hub, run, b));
    const flaky = startPeer(hub, run, 4, 300, {
      wrapLink: (link) => silentWhile(link, () => firstEpoch),
    });
    peers = [...honest, flaky];
    const droppedOnce = () => hub.state.epoch.clients.some((c) => c.id === flaky.id && c.state === 'Dropped');
    await drive(hub, droppedOnce);
    expect(droppedOnce()).toBe(true);
    expect(hub.state.members.map((m) => m.id)).not.toContain(flaky.id);
    firstEpoch = false;
    const droppedAtStep = hub.state.progress.step;

    await drive(hub, () => hub.state.run_state === 'Finished', 1500);
    expect(hub.state.run_state).toBe('Finished');
    expect(flaky.events.some((e) => e.type === 'warning' && /joining again/.test(e.message))).toBe(true);
    expect(hub.state.members.map((m) => m.id)).toContain(flaky.id);
    // It trained again after coming back.
    expect(flaky.events.some((e) => e.type === 'trained' && e.step > droppedAtStep + 2)).toBe(true);
    expect(hub.state.ejected).toEqual([]);
    const hashes = await Promise.all(peers.map(async (p) => bytesToHex(await p.client.parameterHash())));
    expect(new Set(hashes).size).toBe(1);
  }, 180_000);
});
