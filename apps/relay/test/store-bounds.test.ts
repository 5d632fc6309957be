// Every table of relay.db is bounded per run, whatever clients and creators send: a real SQLite file, and
// the one-result-per-batch rule on a real server (the coordinator's admitted record decides what is stored).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { currentRound, encodeWarmupWitness, roundAssignments } from '@meshtrain/core';
import { startRelayServer } from '../src/server.ts';
import {
  CONFIG_HISTORY,
  IDLE_CLIENT_HISTORY,
  METRIC_HISTORY,
  ORPHANED_HISTORY,
  ROUND_HISTORY,
  RelayStore,
} from '../src/store.ts';
import {
  fastRunToml,
  hexKey,
  identity,
  resultFrames,
  TestClient,
  tinyResult,
} from './helpers/relay-fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-bounds-'));
const store = new RelayStore(dir);
const RUN = 'bounded';
store.runs.insertRunRows(
  { run_id: RUN, main_authority: 'a'.repeat(64), join_authority: 'a'.repeat(64), created_at: 0 },
  'toml-0',
  '{}',
);

afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const count = (table: string, where = ''): number =>
  Number(
    (
      store.db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE run_id = ? ${where}`).get(RUN) as {
        n: number;
      }
    ).n,
  );

describe('relay.db tables stay bounded per run', () => {
  it('configs: the newest CONFIG_HISTORY, the latest is the run', () => {
    store.transaction(() => {
      for (let i = 1; i <= CONFIG_HISTORY + 50; i++) store.runs.insertConfig(RUN, `toml-${i}`, i);
    });
    expect(count('configs')).toBe(CONFIG_HISTORY);
    expect(store.runs.latestConfig(RUN)).toBe(`toml-${CONFIG_HISTORY + 50}`);
  });

  it('clients: identities without points are forgotten past IDLE_CLIENT_HISTORY, the others kept', () => {
    store.transaction(() => {
      store.sessions.touchClient(RUN, 'worker', 'cpu', 'p', 0);
      store.sessions.addPoints(RUN, 'worker', 3);
      // A sybil flood: fresh keys that join once and never contribute.
      for (let i = 0; i < IDLE_CLIENT_HISTORY + 2000; i++)
        store.sessions.touchClient(RUN, `sybil-${i}`, 'cpu', 'p', i + 1);
    });
    expect(count('clients')).toBeLessThanOrEqual(IDLE_CLIENT_HISTORY + 256 + 1);
    const ids = new Set(store.sessions.clients(RUN).map((c) => c.id));
    expect(ids.has('worker')).toBe(true);
    expect(ids.has(`sybil-${IDLE_CLIENT_HISTORY + 1999}`)).toBe(true);
    expect(ids.has('sybil-0')).toBe(false);
  });

  it('rounds: the newest ROUND_HISTORY steps', () => {
    store.transaction(() => {
      for (let step = 1; step <= ROUND_HISTORY + 500; step++)
        store.rounds.roundStarted(RUN, {
          step,
          epoch: 0,
          height: step,
          random_seed: '',
          data_index: 0,
          batch_size: 1,
          training: true,
          clients: 1,
          started_at: step,
        });
    });
    expect(count('rounds')).toBeLessThanOrEqual(ROUND_HISTORY + 100);
    expect(store.rounds.rounds(RUN, 1)[0]!.step).toBe(ROUND_HISTORY + 500);
  });

  it('metrics: every name, however the inserts of several names interleave', () => {
    // Five inserts per round in a fixed order: a pruning keyed to one name would miss the others.
    store.transaction(() => {
      for (let i = 0; i < 3 * METRIC_HISTORY; i++)
        for (const name of ['clients', 'witnesses', 'loss', 'tokens_per_sec', 'bandwidth'])
          store.metrics.addMetric(RUN, i, name, i);
    });
    for (const name of ['clients', 'witnesses', 'loss', 'tokens_per_sec', 'bandwidth'])
      expect(count('metrics', `AND name = '${name}'`), name).toBeLessThanOrEqual(METRIC_HISTORY + 500);
  });

  it('orphaned steps: the newest ORPHANED_HISTORY', () => {
    for (let step = 1; step <= ORPHANED_HISTORY + 40; step++) store.checkpoints.markOrphaned(RUN, step);
    expect(count('orphaned_steps')).toBe(ORPHANED_HISTORY);
    expect(store.checkpoints.isOrphaned(RUN, ORPHANED_HISTORY + 40)).toBe(true);
    expect(store.checkpoints.isOrphaned(RUN, 1)).toBe(false);
  });
});

describe('one stored result per sender and batch', () => {
  it('ten different signed results for one batch store one; the second is equivocation', async () => {
    let now = 1_800_000_000_000;
    const relay = await startRelayServer({ dataDir: ':memory:', tickMs: 20, clock: () => now });
    const clients: TestClient[] = [];
    try {
      const run = 'one-per-batch';
      relay.relay.createRun({
        toml: fastRunToml(run, { max_round_train_time: 60, warmup_time: 60 }),
        mainAuthority: hexKey(identity(1)),
      });
      clients.push(
        await TestClient.joined(relay.url, run, identity(60)),
        await TestClient.joined(relay.url, run, identity(61)),
      );
      now += 2000;
      const c0 = clients[0]!;
      await c0.until(() => c0.state?.run_state === 'Warmup', 5000, 'Warmup');
      for (const c of clients)
        expect((await c.request(encodeWarmupWitness({ runId: run, epoch: 0 }))).kind).toBe('ack');
      await c0.until(() => c0.state?.run_state === 'RoundTrain', 5000, 'RoundTrain');
      const s = c0.state!;
      const round = currentRound(s)!;
      const mine = roundAssignments(s, round).find((a) => a.id === hexKey(c0.id))!;
      const me = mine ? c0 : clients[1]!;
      const batch = (mine ?? roundAssignments(s, round).find((a) => a.id === hexKey(me.id))!).batch;
      const replies: string[] = [];
      for (let salt = 0; salt < 10; salt++) {
        const f = resultFrames(me.id, tinyResult(run, round.step, batch, salt));
        const r = await me.request(f.signed);
        replies.push(r.kind === 'ack' ? 'ack' : (r.message as { code: string }).code);
        if (me.closed) break;
      }
      expect(replies[0]).toBe('ack');
      expect(replies[1]).toBe('equivocation');
      expect(replies.slice(2).every((r) => r !== 'ack')).toBe(true);
      const stored = relay.relay.store.rounds
        .resultsForSteps(run, [round.step])
        .filter(
          (r) => r.sender === hexKey(me.id) && r.batch_start === batch.start && r.batch_end === batch.end,
        );
      expect(stored).toHaveLength(1);
      expect(relay.relay.store.rounds.evidence(run, 100)).toHaveLength(1);
    } finally {
      for (const c of clients) c.close();
      await relay.close();
    }
  });
});
