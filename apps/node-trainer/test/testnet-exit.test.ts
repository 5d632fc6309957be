// node-trainer ends when its run ends: `node-trainer local-testnet` with four `node-trainer train` processes
// (micro preset, CPU) on 0.0.0.0, so that they make WebRTC links to each other as on a real network and load
// node-datachannel, whose native state kept a finished trainer's process alive until its libp2p node
// released it. Every trainer must end by itself, with status 0, within EXIT_GRACE_S of its `done` event;
// with four trainers, three are checkpoint standbys whose waits (8 s per rank) the run's end cuts short.
// The two-trainer case is testnet.test.ts.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { TestnetResult } from '../src/testnet/index.ts';
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
});
