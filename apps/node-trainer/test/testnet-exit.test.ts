// node-trainer ends when its run ends: `node-trainer local-testnet` with four `node-trainer train` processes
// (micro preset, CPU) on 0.0.0.0, so that they make WebRTC links to each other as on a real network and load
// node-datachannel, whose native state kept a finished trainer's process alive until its libp2p node
// released it. Every trainer must end by itself, with status 0, within EXIT_GRACE_S of its `done` event;
// with four trainers, three are checkpoint standbys whose waits (8 s per rank) the run's end cuts short.
// The two-trainer case is testnet.test.ts. And a signal: the first SIGTERM in the middle of a run stops a
// trainer cleanly (it reports `done` and exits with status 0), where it used to be swallowed.
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXIT_GRACE_S, testnetToml, type TestnetResult } from '../src/testnet/index.ts';
import { seedHex } from '../src/testnet/adversaries.ts';
import { plan } from '../src/testnet/launch.ts';
import { launchRelay, TrainerPool } from '../src/testnet/processes.ts';
import { expectExitedByThemselves } from './testnet-exits.ts';

const bin = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));

describe('node-trainer exits when its run ends', () => {
  it('4 trainers with WebRTC between them each exit with status 0 within 10 s of done', async () => {
    const args = ['local-testnet', '--num-clients', '4', '--steps', '6', '--p2p-host', '0.0.0.0'];
    const { stdout, stderr, code } = await new Promise<{ stdout: string; stderr: string; code: number }>(
      (resolve) =>
        execFile(
          process.execPath,
          [bin, ...args, '--json', '--timeout', '240'],
          { timeout: 280_000 },
          (err, stdout, stderr) =>
            resolve({ stdout, stderr, code: err ? ((err as { code?: number }).code ?? 1) : 0 }),
        ),
    );
    const r = JSON.parse(stdout.trim().split('\n').at(-1) as string) as TestnetResult;
    if (code !== 0) console.error(stderr.slice(-4000));
    expect(r.completed).toBe(true);
    expect(r.param_hash_mismatches).toBe(0);
    expect(r.param_hash_reports).toBe(4);
    expect(r.result_bytes_from_peers).toBeGreaterThan(0);
    expectExitedByThemselves(r, 4);
    expect(code).toBe(0);
  }, 300_000);

  it('a first SIGTERM while it trains stops a trainer cleanly: done, then status 0 within 10 s', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'meshtrain-sigterm-'));
    const children = new Set<ChildProcess>();
    try {
      await mkdir(join(dir, 'logs'));
      const configPath = join(dir, 'run.toml');
      await writeFile(
        configPath,
        testnetToml({
          numClients: 2,
          steps: 200,
          preset: 'micro',
          randomKillNum: 0,
          randomKillInterval: 20,
          seed: 1,
        }),
      );
      const relay = await launchRelay(dir, configPath, children, 8);
      // On 0.0.0.0 the two make WebRTC links, whose native state is what a stopped trainer must release.
      const pool = new TrainerPool({ dir, url: relay.url, children, log: () => {}, p2pHost: '0.0.0.0' });
      const trainers = [];
      for (const spec of plan({ numClients: 2, lateJoiners: 0, adversaries: [] })) {
        const identity = join(dir, `${spec.name}.key`);
        await writeFile(identity, `${seedHex(spec.index)}\n`, { mode: 0o600 });
        trainers.push(pool.add({ ...spec, identity }));
      }
      const t = trainers[0]!;
      const trained = () => pool.events.filter((x) => x.trainer === t.index && x.e.type === 'trained').length;
      const deadline = Date.now() + 120_000;
      while (trained() < 3 && t.exit === null && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 200));
      expect(t.exit, 'the trainer ended before it trained').toBeNull();
      expect(trained()).toBeGreaterThanOrEqual(3);
      t.child?.kill('SIGTERM');
      await Promise.race([t.exited, new Promise((r) => setTimeout(r, 30_000))]);
      expect(t.doneAt, 'no done event after SIGTERM').not.toBeNull();
      expect(t.exit).toMatchObject({ code: 0, signal: null });
      expect(t.lingered).toBe(false);
      expect((t.exit!.at - t.doneAt!) / 1000).toBeLessThanOrEqual(EXIT_GRACE_S);
      relay.log.end();
    } finally {
      for (const c of children) c.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
