// `kill -9` of the real relay process mid-round, then a restart on the same data dir: the run resumes from
// its latest SQLite snapshot and completes further rounds once the (scripted) clients reconnect and re-join.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startRelayServer } from '../src/server.ts';
import { fastRunToml, hexKey, HonestClient, identity, TestClient } from './helpers/relay-fixtures.ts';

const BIN = fileURLToPath(new URL('../bin/meshtrain-relay.mjs', import.meta.url));
const RUN = 'restart';
const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-restart-'));
const children: ChildProcess[] = [];
let clients: HonestClient[] = [];

/** Starts the real bin and resolves with its URL once it prints it. */
function startRelay(p2p = false): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const child = spawn(
    process.execPath,
    [
      BIN,
      'run',
      '--config',
      join(dir, 'run.toml'),
      '--port',
      '0',
      '--data-dir',
      join(dir, 'data'),
      ...(p2p ? [] : ['--no-p2p']),
      '--tick-ms',
      '100',
      '--grace-ms',
      '3000',
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
  clients = [];
  for (const n of [301, 302]) clients.push(new HonestClient(await TestClient.joined(url, RUN, identity(n))));
  for (const c of clients) void c.run();
}

function stopClients(): void {
  for (const c of clients) {
    c.stop();
    c.c.close();
  }
}

afterAll(() => {
  stopClients();
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
    const first = await startRelay();
    await startClients(first.url);
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

    // Mid-round: the process dies without any chance to flush or say goodbye.
    first.child.kill('SIGKILL');
    await new Promise<void>((r) => first.child.once('exit', () => r()));
    stopClients();

    // The second start also runs the libp2p node behind the same port: coordinator WebSockets still work.
    const second = await startRelay(true);
    expect(second.out()).toMatch(/libp2p \/ip4\/127\.0\.0\.1\/tcp\/\d+\/ws\/p2p\/12D3Koo/);
    const resumed = (await (await fetch(`${second.url}/api/runs/${RUN}`)).json()) as {
      run: { step: number; seq: number; epoch: number; run_state: string };
    };
    // Nothing acknowledged before the kill is lost: the snapshot is at least what clients last saw.
    expect(resumed.run.seq).toBeGreaterThanOrEqual(before.seq);
    expect(resumed.run.step).toBeGreaterThanOrEqual(before.step);
    expect(resumed.run.epoch).toBe(before.epoch);

    // The same identities reconnect and re-join (their slots survived), and the run moves on.
    await startClients(second.url);
    const w2 = clients[0]!.c;
    await w2.until(() => (w2.state?.progress.step ?? 0) >= before.step + 3, 30_000, 'three more rounds');
    expect(w2.state!.progress.epoch).toBe(before.epoch);
    const detail = (await (await fetch(`${second.url}/api/runs/${RUN}`)).json()) as {
      rounds: Array<{ step: number; quorum_reached: boolean | null }>;
    };
    const after = detail.rounds.filter((r) => r.step > before.step && r.quorum_reached !== null);
    expect(after.length).toBeGreaterThanOrEqual(2);
    expect(after.every((r) => r.quorum_reached)).toBe(true);
    for (const c of clients) expect(c.log).toEqual([]);

    // A graceful stop exits 0.
    stopClients();
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
