// The coordinator WebSocket against the real server (Hono on @hono/node-server, ws, SQLite in memory):
// challenge-signed joins, duplicate identities, typed errors for bad frames while others keep being served,
// and forged results. The relay's clock is a test clock, so phases change exactly when a test says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  encodeAck,
  encodeHealthCheck,
  encodeJoin,
  encodeLeave,
  encodeParamHash,
  encodeSignedResult,
  encodeWarmupWitness,
  encodeWitness,
  roundAssignments,
  currentRound,
  signJoin,
  signResult,
} from '@meshtrain/core';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import type { TrainingResult } from '@meshtrain/core';
import {
  DEFAULT_SPEC,
  dummyWitness,
  fastRunToml,
  hexKey,
  identity,
  resultFrames,
  TestClient,
  tinyResult,
} from './helpers/relay-fixtures.ts';

let relay: RunningRelay;
let now = 1_800_000_000_000;
const RUN = 'ws-test';
const RUN2 = 'ws-results';
const owner = identity(1);
const open: TestClient[] = [];

async function joined(n: number): Promise<TestClient> {
  const c = await TestClient.joined(relay.url, RUN, identity(n));
  open.push(c);
  return c;
}

async function opened(n: number, run = RUN): Promise<TestClient> {
  const c = await TestClient.open(relay.url, run, identity(n));
  open.push(c);
  return c;
}

/** Moves the relay's clock and lets a few ticks run. */
async function advance(ms: number): Promise<void> {
  now += ms;
  await new Promise((r) => setTimeout(r, 120));
}

beforeAll(async () => {
  relay = await startRelayServer({
    dataDir: ':memory:',
    tickMs: 20,
    graceMs: 200,
    joinTimeoutMs: 1500,
    clock: () => now,
    limits: { maxFrameBytes: 64 * 1024 },
  });
  relay.relay.createRun({
    toml: fastRunToml(RUN, {
      max_round_train_time: 60,
      warmup_time: 60,
      min_clients: 2,
      init_min_clients: 2,
    }),
    mainAuthority: hexKey(owner),
  });
});

afterAll(async () => {
  for (const c of open) c.close();
  await relay.close();
});

describe('join', () => {
  it('sends a Challenge first; a signed Join gets Ack and then the full state', async () => {
    const c = await opened(10);
    await c.until(() => c.challenge !== undefined);
    expect(c.received[0]?.kind).toBe('challenge');
    const reply = await c.join();
    expect(reply.kind).toBe('ack');
    await c.until(() => c.state !== undefined);
    expect(c.state!.run_id).toBe(RUN);
    expect(c.state!.members.map((m) => m.id)).toContain(hexKey(identity(10)));
    const kinds = c.received.map((m) => m.kind);
    expect(kinds.indexOf('ack')).toBeLessThan(kinds.indexOf('stateSnapshot'));
  });

  it('refuses a forged signature with bad_signature and keeps the connection usable', async () => {
    const c = await opened(11);
    await c.until(() => c.challenge !== undefined);
    const j = signJoin(identity(11).secretKey, {
      runId: RUN,
      p2pPeerId: 'p',
      deviceKind: 'cpu',
      challenge: c.challenge!,
    });
    const forged = { ...j, signature: j.signature.slice() };
    forged.signature[5]! ^= 1;
    const r1 = await c.request(encodeJoin(forged));
    expect(r1).toMatchObject({ kind: 'error', message: { code: 'bad_signature', requestId: 1 } });
    // Someone else's key with our signature: also refused.
    const impostor = { ...j, pubkey: identity(12).publicKey };
    const r2 = await c.request(encodeJoin(impostor));
    expect(r2).toMatchObject({ kind: 'error', message: { code: 'bad_signature', requestId: 2 } });
    // A Join answering another connection's challenge (a replay) is refused too.
    const replay = signJoin(identity(11).secretKey, {
      runId: RUN,
      p2pPeerId: 'p',
      deviceKind: 'cpu',
      challenge: new Uint8Array(32),
    });
    expect(await c.request(encodeJoin(replay))).toMatchObject({
      kind: 'error',
      message: { code: 'bad_signature' },
    });
    // Three bad frames in a row closed it.
    await c.until(() => c.closed !== undefined);
    expect(c.closed!.code).toBe(4000);
    const d = await opened(11);
    expect((await d.join()).kind).toBe('ack');
  });

  it('an unknown run id gets unknown_run and close 4404; a Join naming another run gets wrong_run', async () => {
    const c = await opened(13, 'no-such-run');
    await c.until(() => c.closed !== undefined);
    expect(c.errors()[0]).toMatchObject({ code: 'unknown_run', requestId: 0 });
    expect(c.closed!.code).toBe(4404);

    const d = await opened(14);
    expect(await d.join('cpu', 'other-run')).toMatchObject({ kind: 'error', message: { code: 'wrong_run' } });
    expect((await d.join()).kind).toBe('ack');
  });

  it('a newer connection with the same identity replaces the older one', async () => {
    const first = await joined(15);
    const second = await joined(15);
    await first.until(() => first.closed !== undefined);
    expect(first.closed!.code).toBe(4001);
    expect(first.errors().some((e) => e.code === 'replaced' && e.requestId === 0)).toBe(true);
    // The survivor keeps getting state changes.
    const before = second.updates();
    await joined(16);
    await second.until(() => second.updates() > before);
    // Still one member for the identity.
    expect(second.state!.members.filter((m) => m.id === hexKey(identity(15)))).toHaveLength(1);
  });
});

describe('disconnects', () => {
  const memberIds = (c: TestClient) => c.state!.members.map((m) => m.id);

  it('a dropped connection is a leave only after the grace period; a quick reconnect keeps the slot', async () => {
    const watcher = await joined(50);
    const quick = await joined(51);
    quick.close();
    const back = await joined(51);
    await new Promise((r) => setTimeout(r, 400));
    expect(memberIds(back)).toContain(hexKey(identity(51)));

    const gone = await joined(52);
    gone.close();
    await watcher.until(() => !memberIds(watcher).includes(hexKey(identity(52))), 5000, 'the leave');
    expect(memberIds(watcher)).toContain(hexKey(identity(51)));
  });

  it('a connection that never joins is closed with 4008', async () => {
    const c = await opened(53);
    await c.until(() => c.closed !== undefined, 5000, 'join timeout');
    expect(c.closed!.code).toBe(4008);
  });
});

describe('bad frames', () => {
  it('get typed ControlErrors while another client keeps receiving state updates', async () => {
    const watcher = await joined(20);
    const bad = await joined(21);
    const good = encodeWitness(dummyWitness(0));
    const cases: Array<[Uint8Array | string, string]> = [
      [Uint8Array.from([0x4d, 0x54, 1, 0x10, 0x05]), 'wire_truncated'],
      [Uint8Array.from([0x00, 0x01, 0x02, 0x03]), 'wire_bad_magic'],
      [Uint8Array.from([0x4d, 0x54, 1, 0x6f]), 'wire_unknown_type'],
      ['{"hello":1}', 'text_frame'],
      [new Uint8Array(70 * 1024), 'wire_oversized'],
      [Uint8Array.from([...good, 0]), 'wire_trailing_bytes'],
      [encodeAck({ requestId: 1 }), 'unexpected_frame'],
    ];
    for (const [i, [frame, code]] of cases.entries()) {
      const reply = await bad.request(frame);
      expect(reply, `case ${i}`).toMatchObject({ kind: 'error', message: { code } });
      // Interleave a good frame so three-in-a-row never triggers here.
      await bad.request(
        encodeParamHash({ runId: RUN, epoch: 99, step: 1, hash: new Uint8Array(32).fill(i) }),
      );
      // Meanwhile the relay keeps serving others: a join by a new client reaches the watcher.
      const before = watcher.updates();
      await joined(30 + i);
      await watcher.until(() => watcher.updates() > before, 5000, 'a state update for the watcher');
    }
    expect(bad.closed).toBeUndefined();
  });

  it('frames before the Join get not_joined; three bad frames in a row close with 4000', async () => {
    const c = await opened(22);
    await c.until(() => c.challenge !== undefined);
    expect(await c.request(encodeWitness(dummyWitness(0)))).toMatchObject({
      kind: 'error',
      message: { code: 'not_joined' },
    });
    expect(await c.request('x')).toMatchObject({ kind: 'error', message: { code: 'text_frame' } });
    expect(await c.request(Uint8Array.from([1]))).toMatchObject({
      kind: 'error',
      message: { code: 'wire_truncated' },
    });
    await c.until(() => c.closed !== undefined);
    expect(c.closed!.code).toBe(4000);
  });

  it('a frame far beyond the limit is cut by the WebSocket layer without hurting others', async () => {
    const watcher = await joined(23);
    const c = await joined(24);
    c.send(new Uint8Array(200 * 1024));
    await c.until(() => c.closed !== undefined);
    expect(c.closed!.code).toBe(1009);
    const before = watcher.updates();
    await joined(25);
    await watcher.until(() => watcher.updates() > before);
  });
});

describe('results', () => {
  it('forged, tampered and unassigned results are refused; an honest one is stored and announced', async () => {
    // A run of its own, so these two are its only clients: both train, both witness.
    relay.relay.createRun({
      toml: fastRunToml(RUN2, { max_round_train_time: 60 }),
      mainAuthority: hexKey(owner),
    });
    const clients = await Promise.all([
      TestClient.joined(relay.url, RUN2, identity(40)),
      TestClient.joined(relay.url, RUN2, identity(41)),
    ]);
    open.push(...clients);
    await advance(2000);
    await clients[0]!.until(() => clients[0]!.state?.run_state === 'Warmup', 5000, 'Warmup');
    // A round Witness is not a warmup witness: it has its own frame.
    expect(await clients[0]!.request(encodeWitness(dummyWitness(0)))).toMatchObject({
      kind: 'error',
      message: { code: 'WrongPhase' },
    });
    expect(await clients[0]!.request(encodeWarmupWitness({ runId: RUN2, epoch: 7 }))).toMatchObject({
      kind: 'error',
      message: { code: 'stale' },
    });
    for (const c of clients)
      expect((await c.request(encodeWarmupWitness({ runId: RUN2, epoch: 0 }))).kind).toBe('ack');
    await clients[0]!.until(() => clients[0]!.state?.run_state === 'RoundTrain', 5000, 'RoundTrain');
    const s = clients[0]!.state!;
    const round = currentRound(s)!;
    const assignments = roundAssignments(s, round);
    const byId = new Map(clients.map((c) => [hexKey(c.id), c]));
    const trainer = assignments.find((a) => byId.has(a.id));
    expect(trainer).toBeDefined();
    const me = byId.get(trainer!.id)!;
    const other = clients.find((c) => c !== me)!;
    const result = tinyResult(RUN2, round.step, trainer!.batch);
    // A harmless frame between refusals keeps "three bad frames in a row" from closing the connection: a
    // parameter hash for an epoch that has not ended is refused as stale, which is not a bad frame.
    let epochTag = 1000;
    const good = async (c: TestClient) =>
      expect(
        await c.request(
          encodeParamHash({ runId: RUN2, epoch: epochTag++, step: 1, hash: new Uint8Array(32) }),
        ),
      ).toMatchObject({ kind: 'error', message: { code: 'stale' } });

    // Bad signature.
    const env = signResult(me.id.secretKey, result);
    const badSig = { ...env, signature: env.signature.slice() };
    badSig.signature[0]! ^= 0x80;
    expect(await me.request(encodeSignedResult({ envelope: badSig, result }))).toMatchObject({
      kind: 'error',
      message: { code: 'bad_signature' },
    });
    await good(me);
    // Tampered payload: signed one result, sent another.
    const tampered = { ...result, trainerNonce: result.trainerNonce + 1 };
    expect(await me.request(encodeSignedResult({ envelope: env, result: tampered }))).toMatchObject({
      kind: 'error',
      message: { code: 'bad_signature' },
    });
    await good(me);
    // Not the assignee: the other client signs (validly) a result for this batch.
    const theirs = resultFrames(other.id, result);
    expect(await other.request(theirs.signed)).toMatchObject({
      kind: 'error',
      message: { code: 'not_assignee' },
    });
    // Another identity's envelope sent on my connection.
    expect(await me.request(theirs.signed)).toMatchObject({
      kind: 'error',
      message: { code: 'bad_signature' },
    });
    await good(me);
    // A step no stored round has.
    const future = resultFrames(me.id, tinyResult(RUN2, round.step + 7, trainer!.batch));
    expect(await me.request(future.signed)).toMatchObject({
      kind: 'error',
      message: { code: 'unknown_round' },
    });
    await good(me);
    // Results that do not fit the model: a tensor missing, a dense tensor, f32 values in a 1-bit run.
    const misfits: TrainingResult[] = [
      { ...result, tensors: result.tensors.slice(1) },
      tinyResult(RUN2, round.step, trainer!.batch, 0, 2 * DEFAULT_SPEC.tensors[0]!.k),
      {
        ...result,
        tensors: result.tensors.map((t) => ({
          ...t,
          values: { kind: 'f32' as const, values: new Float32Array(t.indices.length).fill(1) },
        })),
      },
    ];
    for (const bad of misfits) {
      const f = resultFrames(me.id, bad);
      expect(await me.request(f.signed)).toMatchObject({ kind: 'error', message: { code: 'bad_result' } });
      await good(me);
    }

    // Honest: Announce before the result is unknown_result; after it, stored and acked. The other client
    // learns the admitted commitment from its state (a delta), not from a forwarded announce.
    const honest = resultFrames(me.id, result);
    expect(await me.request(honest.announce)).toMatchObject({
      kind: 'error',
      message: { code: 'unknown_result' },
    });
    expect((await me.request(honest.signed)).kind).toBe('ack');
    expect((await me.request(honest.signed)).kind).toBe('ack'); // idempotent
    expect((await me.request(honest.announce)).kind).toBe('ack');
    await other.until(
      () => (currentRound(other.state!)?.admitted ?? []).includes(honest.commitment),
      5000,
      'the admitted commitment in the state',
    );
    expect(other.received.some((m) => m.kind === 'announce')).toBe(false);
    const res = await fetch(`${relay.url}/api/runs/${RUN2}/results/${honest.commitment}`);
    expect(res.status).toBe(200);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(honest.signed);
    const missing = await fetch(`${relay.url}/api/runs/${RUN2}/results/${'0'.repeat(64)}`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('unknown_result');
    // HealthCheck frames become health_check events; core's refusal comes back with its own code.
    const hc = encodeHealthCheck({
      step: round.step,
      reports: [{ clientIndex: 0, committeeProof: { committee: 'Trainer', position: 0, index: 0 } }],
    });
    expect(await me.request(hc)).toMatchObject({ kind: 'error', message: { code: 'TooEarly' } });
    // A Leave frame is a coordinator leave; the connection then refuses a second Join.
    expect((await other.request(encodeLeave({ runId: RUN2, reason: 'done' }))).kind).toBe('ack');
    expect(await other.join('cpu', RUN2)).toMatchObject({
      kind: 'error',
      message: { code: 'unexpected_frame' },
    });
    // A second, different result for the same batch is equivocation: refused, kept as evidence, sender ejected.
    const second = resultFrames(me.id, tinyResult(RUN2, round.step, trainer!.batch, 1));
    expect(await me.request(second.signed)).toMatchObject({
      kind: 'error',
      message: { code: 'equivocation' },
    });
    expect(relay.relay.run(RUN2)!.state.ejected).toContain(hexKey(me.id));
    expect(relay.relay.store.rounds.result(RUN2, second.commitment)).toBeUndefined();
    const evidence = relay.relay.store.rounds.evidence(RUN2, 10);
    expect(evidence).toHaveLength(1);
    expect(evidence[0]).toMatchObject({ client: hexKey(me.id), kind: 'equivocation' });
    expect(new Uint8Array(evidence[0]!.first)).toEqual(honest.signed);
    expect(new Uint8Array(evidence[0]!.second)).toEqual(second.signed);
  });
});
