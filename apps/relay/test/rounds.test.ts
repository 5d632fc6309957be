// A small scripted run over real WebSockets against the real server: three honest clients join, send
// warmup witnesses, then every round trainers send signed results (+ announces) and witnesses submit blooms
// built with core's BloomFilter from what they received. Rounds advance by core's rules; the relay records
// round history with quorum and the accepted commitments, losses, points, and parameter-hash majorities.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

    const detail = (await (await fetch(`${relay.url}/api/runs/${RUN}`)).json()) as {
      rounds: Array<{
        step: number;
        quorum_reached: boolean | null;
        accepted: Array<{ commitment: string | null }> | null;
        loss: number | null;
        witnesses: number | null;
      }>;
      clients: Array<{ id: string; points: number; device_kind: string }>;
    };
    const ended = detail.rounds.filter((r) => r.quorum_reached !== null);
    expect(ended.length).toBeGreaterThanOrEqual(3);
    for (const r of ended) {
      expect(r.quorum_reached).toBe(true);
      expect(r.witnesses).toBe(3);
      expect(r.loss).toBeCloseTo(5 - r.step * 0.01, 4);
    }
    // Rounds attested by a later round have every batch's result accepted by the witnesses' blooms.
    const decided = detail.rounds.filter((r) => r.accepted !== null);
    expect(decided.length).toBeGreaterThanOrEqual(2);
    for (const r of decided) {
      expect(r.accepted!.length).toBeGreaterThan(0);
      for (const a of r.accepted!) expect(a.commitment).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(detail.clients.every((c) => c.points > 0 && c.device_kind === 'cpu')).toBe(true);
    // Every trainer got the others' announces forwarded.
    for (const c of clients) expect(c.c.received.some((m) => m.kind === 'announce')).toBe(true);
  });

  it('parameter hashes: the majority becomes the run hash, the odd client is told to re-sync', async () => {
    const [a, b, c] = clients.map((h) => h.c);
    const h = (v: number) => new Uint8Array(32).fill(v);
    expect((await a!.request(encodeParamHash({ runId: RUN, epoch: 0, step: 5, hash: h(1) }))).kind).toBe(
      'ack',
    );
    // Two reports that disagree: no majority yet, both acknowledged.
    expect((await c!.request(encodeParamHash({ runId: RUN, epoch: 0, step: 5, hash: h(2) }))).kind).toBe(
      'ack',
    );
    // The third agrees with the first: majority h(1); c is told (unsolicited), b's reply is an Ack.
    expect((await b!.request(encodeParamHash({ runId: RUN, epoch: 0, step: 5, hash: h(1) }))).kind).toBe(
      'ack',
    );
    await c!.until(
      () => c!.errors().some((e) => e.code === 'param_hash_mismatch' && e.requestId === 0),
      5000,
      'mismatch notice',
    );
    // A later report of the minority hash is refused in its reply.
    const again = await c!.request(encodeParamHash({ runId: RUN, epoch: 0, step: 5, hash: h(3) }));
    expect(again).toMatchObject({ kind: 'error', message: { code: 'param_hash_mismatch' } });
    const detail = (await (await fetch(`${relay.url}/api/runs/${RUN}`)).json()) as {
      run: { param_hash: { epoch: number; hash: string } };
      param_hashes: Array<{ epoch: number; majority: string; mismatched: string[] }>;
    };
    expect(detail.run.param_hash).toEqual({ epoch: 0, hash: '01'.repeat(32) });
    expect(detail.param_hashes.find((e) => e.epoch === 0)!.mismatched).toEqual([hexKey(c!.id)]);
  });
});
