// A small scripted run over real WebSockets against the real server: three honest clients join, send
// warmup witnesses, then every round trainers send signed results (+ announces) and witnesses submit
// attestations (core's attestationOf) of the results the relay admitted. Rounds advance by core's rules; the
// relay records round history with quorum and the accepted commitments, losses, points, and parameter-hash
// majorities.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchRunInfo } from '@meshtrain/client/relay-api';
import { encodeParamHash } from '@meshtrain/core';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import { fastRunToml, hexKey, HonestClient, identity, TestClient } from './helpers/relay-fixtures.ts';

let relay: RunningRelay;
const RUN = 'rounds';
const clients: HonestClient[] = [];

beforeAll(async () => {
  relay = await startRelayServer({ dataDir: ':memory:', tickMs: 100, graceMs: 5000 });
  relay.relay.createRun({
    toml: fastRunToml(RUN, {
      min_clients: 2,
      init_min_clients: 3,
      max_round_train_time: 10,
      total_steps: 30,
      // Long enough for the parameter-hash test to report during the epoch's Cooldown.
      cooldown_time: 60,
    }),
    mainAuthority: hexKey(identity(200)),
  });
});

afterAll(async () => {
  for (const c of clients) {
    c.stop();
    c.c.close();
  }
  await relay.close();
});

describe('scripted multi-client run', () => {
  it('rounds advance with witness quorum and accepted results', async () => {
    for (const n of [201, 202, 203])
      clients.push(new HonestClient(await TestClient.joined(relay.url, RUN, identity(n))));
    const loops = clients.map((c) => c.run());
    const first = clients[0]!.c;
    await first.until(() => (first.state?.progress.step ?? 0) >= 5, 40_000, 'step 5');
    for (const c of clients) c.stop();
    await Promise.all(loops);
    for (const c of clients) expect(c.log, `client log`).toEqual([]);

    const detail = await fetchRunInfo(relay.url, RUN);
    const ended = detail.rounds.filter((r) => r.quorum_reached !== null);
    expect(ended.length).toBeGreaterThanOrEqual(3);
    for (const r of ended) {
      expect(r.quorum_reached).toBe(true);
      expect(r.witnesses).toBe(3);
      expect(r.loss).toBeCloseTo(5 - r.step * 0.01, 4);
    }
    // Rounds attested by a later round have every batch's result accepted by the witnesses' attestations.
    const decided = detail.rounds.filter((r) => r.accepted !== null);
    expect(decided.length).toBeGreaterThanOrEqual(2);
    for (const r of decided) {
      expect(r.accepted!.length).toBeGreaterThan(0);
      for (const a of r.accepted!) expect(a.commitment).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(detail.clients.every((c) => c.points > 0 && c.device_kind === 'cpu')).toBe(true);
    // What the witnesses measured (the fixture reports 1000 tokens/s and 1 MB/s): per step and per client.
    expect(detail.reports.length).toBeGreaterThanOrEqual(3);
    for (const r of detail.reports) expect(r).toMatchObject({ tokens_per_sec: 1000, bandwidth: 1e6 });
    const newest = Math.max(...detail.reports.map((r) => r.step));
    expect(detail.reports[0]?.step).toBe(newest);
    for (const c of detail.clients) expect(c.report).toMatchObject({ tokens_per_sec: 1000, bandwidth: 1e6 });
    // Every client followed the run from its one snapshot by replaying deltas (core's tick on the relay's
    // transitions): its state is the relay's, exactly. Results reach it as admitted commitments in that
    // state; the relay forwards no announces.
    const host = relay.relay.run(RUN)!;
    for (const { c } of clients) {
      await c.until(() => c.seq === host.seq, 5000, 'the latest delta');
      expect(JSON.stringify(c.state)).toBe(JSON.stringify(host.state));
      expect(c.snapshots()).toBe(1);
      expect(c.gaps).toBe(0);
      expect(c.received.filter((m) => m.kind === 'stateDelta').length).toBeGreaterThan(3);
      expect(c.received.some((m) => m.kind === 'announce')).toBe(false);
    }
  });

  it("parameter hashes: only a majority of the epoch's clients sets the run hash; the odd client re-syncs", async () => {
    const [a, b, c] = clients.map((h) => h.c);
    const h = (v: number) => new Uint8Array(32).fill(v);
    // Nothing is taken before the coordinator reaches an epoch end, whatever epoch a report names.
    expect(await a!.request(encodeParamHash({ runId: RUN, epoch: 0, step: 5, hash: h(1) }))).toMatchObject({
      kind: 'error',
      message: { code: 'stale' },
    });
    // End the epoch: pause (it takes effect after the open round), and let the clients finish that round.
    const host = relay.relay.run(RUN)!;
    relay.relay.adminEvent(host, { type: 'pause' });
    for (const x of clients) x.restart();
    const loops = clients.map((x) => x.run());
    await a!.until(() => a!.state?.run_state === 'Cooldown', 30_000, 'Cooldown');
    for (const x of clients) x.stop();
    await Promise.all(loops);
    const { epoch, step } = a!.state!.progress;
    const report = (who: TestClient, v: number, e = epoch, st = step) =>
      who.request(encodeParamHash({ runId: RUN, epoch: e, step: st, hash: h(v) }));
    // A made-up epoch or step is refused; an outsider is not a voter.
    expect(await report(a!, 1, epoch + 5)).toMatchObject({ kind: 'error', message: { code: 'stale' } });
    expect(await report(a!, 1, epoch, step + 1000)).toMatchObject({
      kind: 'error',
      message: { code: 'stale' },
    });
    const outsider = await TestClient.joined(relay.url, RUN, identity(299));
    expect(await report(outsider, 1)).toMatchObject({ kind: 'error', message: { code: 'not_a_client' } });
    outsider.close();
    // One reporter alone sets nothing; two that disagree neither.
    expect((await report(a!, 1)).kind).toBe('ack');
    expect(host.paramHash).toBeUndefined();
    expect((await report(c!, 2)).kind).toBe('ack');
    expect(host.paramHash).toBeUndefined();
    // The third agrees with the first: 2 of 3 voters, the run hash; c is told (unsolicited).
    expect((await report(b!, 1)).kind).toBe('ack');
    await c!.until(
      () => c!.errors().some((e) => e.code === 'param_hash_mismatch' && e.requestId === 0),
      5000,
      'mismatch notice',
    );
    // A later report of a minority hash is refused in its reply.
    expect(await report(c!, 3)).toMatchObject({ kind: 'error', message: { code: 'param_hash_mismatch' } });
    const detail = await fetchRunInfo(relay.url, RUN);
    expect(detail.run.param_hash).toEqual({ epoch, hash: '01'.repeat(32) });
    expect(detail.param_hashes.find((e) => e.epoch === epoch)!.mismatched).toEqual([hexKey(c!.id)]);
  });
});
