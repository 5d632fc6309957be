// `kill -9` of the real relay process mid-round, then a restart on the same data dir and port: the run resumes
// from its latest SQLite snapshot plus the transitions logged after it — exactly the state, seq and parameter
// hash it had — and completes further rounds. One scripted client is restarted by the test; the other runs on
// the training client's own RelayLink, which is left alone: it must reconnect by itself, with a bounded
// number of attempts, and re-join into its slot.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startRelayServer } from '../src/server.ts';
import { currentRound, roundAdmitted, roundAssignments } from '@meshtrain/core';
import type { CoordinatorState } from '@meshtrain/core';
import {
  fastRunToml,
  hexKey,
  HonestClient,
  identity,
  LinkParticipant,
  resultFrames,
  TestClient,
  tinyResult,
} from './helpers/relay-fixtures.ts';

const BIN = fileURLToPath(new URL('../bin/meshtrain-relay.mjs', import.meta.url));
const RUN = 'restart';
const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-restart-'));
const children: ChildProcess[] = [];
let clients: HonestClient[] = [];
let linked: HonestClient<LinkParticipant> | undefined;

/** A TCP port free right now on loopback (the restarted relay must listen where the link reconnects). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Starts the real bin and resolves with its URL once it prints it. */
function startRelay(p2p = false, port = 0): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const child = spawn(
    process.execPath,
    [
      BIN,
      'run',
      '--config',
      join(dir, 'run.toml'),
      '--port',
      String(port),
      '--data-dir',
      join(dir, 'data'),
      ...(p2p ? [] : ['--no-p2p']),
      // Not what this test is about: a light join puzzle keeps several in-process joins quick.
      '--join-pow-bits',
      '8',
      '--tick-ms',
      '100',
      // Long enough for a backed-off RelayLink to be back before its slot is given up.
      '--grace-ms',
      '30000',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`relay did not start:\n${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ child, url: m[1]!, out: () => out });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`relay exited with ${code}:\n${out}`));
    });
  });
}

async function startClients(url: string): Promise<void> {
  clients = [new HonestClient(await TestClient.joined(url, RUN, identity(301)))];
  for (const c of clients) void c.run();
}

function stopClients(): void {
  for (const c of clients) {
    c.stop();
    c.c.close();
  }
}

interface RunWithState {
  run: { step: number; seq: number; epoch: number; run_state: string; param_hash: unknown };
  state: CoordinatorState;
}

async function runWithState(url: string): Promise<RunWithState> {
  return (await (await fetch(`${url}/api/runs/${RUN}?state=1`)).json()) as RunWithState;
}

/** The run's seq and state once it has held still for a second (no client acts, no timer is due). */
async function quietState(url: string): Promise<RunWithState> {
  let last = await runWithState(url);
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await runWithState(url);
    if (now.run.seq === last.run.seq) return now;
    last = now;
  }
}

afterAll(() => {
  stopClients();
  linked?.stop();
  linked?.c.close();
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('relay restart', () => {
  it('resumes every run from its latest snapshot after kill -9 mid-round', async () => {
    writeFileSync(
      join(dir, 'run.toml'),
      fastRunToml(RUN, {
        min_clients: 2,
        init_min_clients: 2,
        max_round_train_time: 30,
        warmup_time: 30,
        total_steps: 40,
      }),
    );
    const port = await freePort();
    const first = await startRelay(false, port);
    await startClients(first.url);
    linked = new HonestClient(new LinkParticipant(first.url, RUN, identity(302)));
    await linked.c.link.connect();
    void linked.run();
    const watcher = clients[0]!.c;
    await watcher.until(
      () => watcher.state?.run_state === 'RoundTrain' && watcher.state.progress.step >= 3,
      30_000,
      'RoundTrain at step 3',
    );
    const before = {
      step: watcher.state!.progress.step,
      seq: watcher.seq,
      epoch: watcher.state!.progress.epoch,
    };

    const connectsBefore = linked.c.link.stats.connects;

    // Hold the run still (a round waits for its witnesses for 30 s), then admit one more result (the one the
    // client sends again after the restart, so it is not a second result for its batch), so the state
    // the relay dies with lies past its latest snapshot: the restart must replay the log to reach it.
    for (const c of [...clients, linked]) c.stop();
    const quiet = await quietState(first.url);
    const round = currentRound(quiet.state)!;
    const me = hexKey(identity(301));
    const slot = roundAssignments(quiet.state, round).findIndex((a) => a.id === me);
    expect(slot).toBeGreaterThanOrEqual(0);
    if ((roundAdmitted(round)[slot] ?? null) === null) {
      const batch = roundAssignments(quiet.state, round)[slot]!.batch;
      const f = resultFrames(identity(301), tinyResult(RUN, round.step, batch));
      expect((await watcher.request(f.signed)).kind).toBe('ack');
    }
    const dying = await quietState(first.url);

    // Mid-round: the process dies without any chance to flush or say goodbye.
    first.child.kill('SIGKILL');
    await new Promise<void>((r) => first.child.once('exit', () => r()));
    stopClients();
    const db = new DatabaseSync(join(dir, 'data', 'relay.db'));
    const snapshotSeq = (db.prepare('SELECT seq FROM snapshots WHERE run_id = ?').get(RUN) as { seq: number })
      .seq;
    const logged = db
      .prepare('SELECT COUNT(*) AS n FROM transition_log WHERE run_id = ? AND seq > ?')
      .get(RUN, snapshotSeq) as { n: number };
    db.close();
    expect(Number(logged.n)).toBeGreaterThan(0);
    expect(Number(logged.n)).toBe(dying.run.seq - snapshotSeq);

    // The second start also runs the libp2p node behind the same port: coordinator WebSockets still work.
    const second = await startRelay(true, port);
    expect(second.out()).toMatch(/libp2p \/ip4\/127\.0\.0\.1\/tcp\/\d+\/ws\/p2p\/12D3Koo/);
    const resumed = await runWithState(second.url);
    // Exactly what the relay held when it died: seq, state (the replayed log on its snapshot), hash.
    expect(resumed.run.seq).toBe(dying.run.seq);
    expect(JSON.stringify(resumed.state)).toBe(JSON.stringify(dying.state));
    expect(resumed.run.param_hash).toEqual(dying.run.param_hash);
    expect(resumed.run.seq).toBeGreaterThanOrEqual(before.seq);
    expect(resumed.run.step).toBeGreaterThanOrEqual(before.step);
    expect(resumed.run.epoch).toBe(before.epoch);

    // The same identities re-join (their slots survived): 301 reconnected by the test, 302's RelayLink by
    // itself, in a handful of attempts (each failed attempt used to start a reconnect loop of its own).
    await startClients(second.url);
    linked.restart();
    void linked.run();
    const w2 = clients[0]!.c;
    await w2.until(() => linked!.c.link.isJoined, 60_000, 'the RelayLink to re-join');
    const reconnects = linked.c.link.stats.connects - connectsBefore;
    expect(reconnects).toBeGreaterThanOrEqual(1);
    expect(reconnects).toBeLessThanOrEqual(12);
    linked.log.length = 0;
    await w2.until(() => (w2.state?.progress.step ?? 0) >= before.step + 3, 60_000, 'three more rounds');
    expect(w2.state!.progress.epoch).toBe(before.epoch);
    // Both kept their places in the epoch and trained through: training resumed where it was.
    const healthy = w2.state!.epoch.clients.filter((c) => c.state === 'Healthy').map((c) => c.id);
    expect(healthy).toEqual(expect.arrayContaining([hexKey(identity(301)), hexKey(identity(302))]));
    expect(linked.log.filter((l) => l.includes('refused'))).toEqual([]);
    const detail = (await (await fetch(`${second.url}/api/runs/${RUN}`)).json()) as {
      rounds: Array<{ step: number; quorum_reached: boolean | null }>;
    };
    const after = detail.rounds.filter((r) => r.step > before.step && r.quorum_reached !== null);
    expect(after.length).toBeGreaterThanOrEqual(2);
    expect(after.every((r) => r.quorum_reached)).toBe(true);
    for (const c of clients) expect(c.log).toEqual([]);

    // A graceful stop exits 0.
    stopClients();
    linked.stop();
    linked.c.close();
    second.child.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => second.child.once('exit', (c) => r(c)));
    expect(code).toBe(0);
  });

  it('after a restart, members that do not reconnect within the grace period leave', async () => {
    const data = join(dir, 'grace');
    const first = await startRelayServer({ dataDir: data, tickMs: 50, graceMs: 300 });
    first.relay.createRun({
      toml: fastRunToml('grace', { init_min_clients: 5 }),
      mainAuthority: hexKey(identity(310)),
    });
    const stays = await TestClient.joined(first.url, 'grace', identity(311));
    const gone = await TestClient.joined(first.url, 'grace', identity(312));
    await stays.until(() => stays.state!.members.length === 2, 5000, 'both members');
    stays.close();
    gone.close();
    await first.close();

    const second = await startRelayServer({ dataDir: data, tickMs: 50, graceMs: 300 });
    try {
      expect(second.relay.run('grace')!.state.members).toHaveLength(2);
      const back = await TestClient.joined(second.url, 'grace', identity(311));
      await back.until(() => back.state!.members.length === 1, 5000, 'the absent member to leave');
      expect(back.state!.members.map((m) => m.id)).toEqual([hexKey(identity(311))]);
      back.close();
    } finally {
      await second.close();
    }
  });
});
