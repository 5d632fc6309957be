// Light sessions (`/ws/runs/:id?replica=light`) follow the summary of the state: a snapshot of core's
// summarizeState, then LightDelta frames that skip what only evidence changed. Checked against a run that real
// honest clients drive through rounds on a real relay: the light watcher (and the client library's RelayLink
// as a light follower) ends at the summary of the relay's state, with the summary's hash, on fewer and
// smaller frames than a full watcher; a gap is filled from the
// light ring (or a snapshot), and full and light sessions of one run each get their own kind of frame.
import { afterAll, describe, expect, it } from 'vitest';
import {
  acceptedCommitments,
  bytesToHex,
  checkAdmittedList,
  decodeAdmittedList,
  encodeResyncRequest,
  roundAdmitted,
  roundAtHeight,
  sha256,
  stateHash,
  summarizeState,
} from '@meshtrain/core';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import {
  fastRunToml,
  hexKey,
  HonestClient,
  identity,
  LinkParticipant,
  TestClient,
} from './helpers/relay-fixtures.ts';

const relays: RunningRelay[] = [];
const clients: TestClient[] = [];
afterAll(async () => {
  for (const c of clients) c.close();
  for (const r of relays) await r.close();
});

describe('light sessions', () => {
  it('follow the summary of a run that honest clients drive, for fewer bytes than a full session', async () => {
    const r = await startRelayServer({ dataDir: ':memory:', tickMs: 100 });
    relays.push(r);
    r.relay.createRun({
      toml: fastRunToml('light', { min_clients: 2, init_min_clients: 4, max_round_train_time: 10 }),
      mainAuthority: hexKey(identity(1)),
    });
    const host = r.relay.run('light')!;
    const join = async (n: number, light: boolean) => {
      const c = await TestClient.joined(r.url, 'light', identity(n), 'cpu', { light });
      clients.push(c);
      return c;
    };
    // A light replica that takes part: it trains, witnesses from the admitted lists it fetched and checked.
    const lightTrainer = new HonestClient(
      new LinkParticipant(r.url, 'light', identity(807), { replica: 'light' }),
    );
    await lightTrainer.c.link.connect();
    const honest = [
      new HonestClient(await join(801, false)),
      new HonestClient(await join(802, false)),
      new HonestClient(await join(803, false)),
    ];
    const loops = [...honest.map((h) => h.run()), lightTrainer.run()];
    const w = honest[0]!.c;
    await w.until(() => w.state?.run_state === 'RoundTrain', 30_000, 'the first round');
    // Two watchers that join once the epoch runs (members waiting for the next one): one full, one light.
    const full = await join(804, false);
    const light = await join(805, true);
    expect(light.received.find((m) => m.kind === 'stateSnapshot')).toBeDefined();
    // The client library's RelayLink as a light follower (a dashboard's view of the run).
    const follower = new LinkParticipant(r.url, 'light', identity(806), { replica: 'light' });
    await follower.link.connect();
    await w.until(() => (w.state?.progress.step ?? 0) >= 5, 60_000, 'step 5');
    for (const h of honest) h.stop();
    lightTrainer.stop();
    await Promise.all(loops);
    for (const h of honest) expect(h.log).toEqual([]);
    expect(lightTrainer.log).toEqual([]);
    // The light trainer's view names exactly the commitments the relay's state does for every judged round.
    await light.until(
      () =>
        lightTrainer.c.link.stats.deltas > 0 &&
        lightTrainer.c.state?.progress.step === host.state.progress.step,
      5000,
      'the light trainer caught up',
    );
    const view = lightTrainer.c.state!;
    let judged = 0;
    for (const round of view.epoch.rounds) {
      if (round?.accepted_bits === undefined) continue;
      const mine = acceptedCommitments(view, round.height)!.map(
        (a) => a.commitment && bytesToHex(a.commitment),
      );
      const relays = acceptedCommitments(host.state, round.height)!.map(
        (a) => a.commitment && bytesToHex(a.commitment),
      );
      expect(mine).toEqual(relays);
      expect(mine.some((c) => c !== null)).toBe(true);
      judged++;
    }
    expect(judged).toBeGreaterThan(0);
    expect(lightTrainer.c.link.stats.hashMismatches).toBe(0);
    lightTrainer.c.close();
    await light.until(() => light.seq === host.seq, 5000, 'the light watcher caught up');
    await full.until(() => full.seq === host.seq, 5000, 'the full watcher caught up');
    expect(light.gaps).toBe(0);
    expect(JSON.stringify(light.state)).toBe(JSON.stringify(summarizeState(host.state)));
    expect(JSON.stringify(full.state)).toBe(JSON.stringify(host.state));
    // Each kind of session got only its kind of frame, and the light frames' hashes were the summary's.
    expect(light.received.some((m) => m.kind === 'stateDelta')).toBe(false);
    expect(full.received.some((m) => m.kind === 'lightDelta')).toBe(false);
    const hashed = light.received.flatMap((m) =>
      m.kind === 'lightDelta' && m.message.stateHash ? [m.message] : [],
    );
    expect(hashed.length).toBeGreaterThan(3);
    expect(hashed.at(-1)!.toSeq).toBeLessThanOrEqual(host.seq);
    expect(stateHash(summarizeState(host.state))).toEqual(r.relay.run('light')!.lightStateHash());
    // Results, witnesses and verdicts are evidence: the light session skipped them.
    const bytes = (c: TestClient, kind: string) =>
      c.received.reduce((a, m, i) => a + (m.kind === kind ? c.sizes[i]! : 0), 0);
    const lightBytes = bytes(light, 'lightDelta');
    const fullBytes = bytes(full, 'stateDelta');
    expect(lightBytes).toBeGreaterThan(0);
    expect(lightBytes).toBeLessThan(fullBytes);

    await light.until(
      () =>
        follower.state !== undefined &&
        JSON.stringify(summarizeState(follower.state)) === JSON.stringify(summarizeState(host.state)),
      5000,
      'the light RelayLink caught up',
    );
    // What it hands on has the closed rounds' admitted lists put back, as the relay's state holds them.
    for (const round of follower.state!.epoch.rounds.filter((x) => x?.admitted_list !== undefined))
      expect(roundAdmitted(round).filter((x) => x !== null)).toEqual(
        roundAdmitted(roundAtHeight(host.state, round.height)!).filter((x) => x !== null),
      );
    expect(follower.link.stats.hashChecks).toBeGreaterThan(0);
    expect(follower.link.stats.hashMismatches).toBe(0);
    expect(follower.link.stats.deltas).toBeGreaterThan(3);
    follower.close();

    // A light replica learns a closed round's commitments from its admitted list, fetched by its address
    // and checked against it.
    const closed = light.state!.epoch.rounds.filter((x) => x?.admitted_list !== undefined);
    expect(closed.length).toBeGreaterThan(1);
    for (const round of closed) {
      const res = await fetch(`${r.url}/api/runs/light/admitted/${round.admitted_list}`);
      expect(res.status).toBe(200);
      const frame = new Uint8Array(await res.arrayBuffer());
      expect(bytesToHex(sha256(frame))).toBe(round.admitted_list);
      const list = checkAdmittedList(frame, 'light', { address: round.admitted_list!, step: round.step });
      expect(list).toEqual(decodeAdmittedList(frame));
      expect(list.entries.map((e) => bytesToHex(e.commitment))).toEqual(
        roundAdmitted(roundAtHeight(host.state, round.height)!).filter((x) => x !== null),
      );
    }
    expect((await fetch(`${r.url}/api/runs/light/admitted/${'0'.repeat(64)}`)).status).toBe(404);
    expect((await fetch(`${r.url}/api/runs/light/admitted/xyz`)).status).toBe(400);

    // A recent gap comes from the light ring, an old one as a summary snapshot.
    const n = light.received.length;
    const ask = (seq: number) => light.request(encodeResyncRequest({ runId: 'light', seq, reason: 'gap' }));
    const firstLight = light.received.find((m) => m.kind === 'lightDelta');
    expect(firstLight?.kind).toBe('lightDelta');
    if (firstLight?.kind !== 'lightDelta') return;
    expect((await ask(firstLight.message.fromSeq)).kind).toBe('ack');
    await light.until(
      () => light.received.slice(n).some((m) => m.kind === 'lightDelta'),
      5000,
      'ring frames',
    );
    expect(light.received.slice(n).some((m) => m.kind === 'stateSnapshot')).toBe(false);
    expect(light.received.slice(n).some((m) => m.kind === 'stateDelta')).toBe(false);
    expect(JSON.stringify(light.state)).toBe(JSON.stringify(summarizeState(host.state)));
  });
});
