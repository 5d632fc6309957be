// End to end on real processes: `node-trainer local-testnet` starts `meshtrain-relay run` and two
// `node-trainer train` processes on loopback (micro preset, Brown corpus from the relay's data provider).
// The run must finish with witness quorum in every round, equal parameter hashes at the epoch end, a
// lower held-out loss, results fetched from peers over libp2p, stdout ending with the one JSON summary, and
// every trainer process ending by itself, with status 0, within EXIT_GRACE_S of its `done` event.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { TestnetResult } from '../src/testnet/index.ts';
import { expectExitedByThemselves } from './testnet-exits.ts';

const bin = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));

describe('node-trainer local-testnet', () => {
  it('relay + 2 micro trainers finish with equal hashes and a lower held-out loss', async () => {
    const { stdout, stderr, code } = await new Promise<{ stdout: string; stderr: string; code: number }>(
      (resolve) =>
        execFile(
          process.execPath,
          [bin, 'local-testnet', '--num-clients', '2', '--steps', '8', '--json', '--timeout', '240'],
          { timeout: 280_000 },
          (err, stdout, stderr) =>
            resolve({ stdout, stderr, code: err ? ((err as { code?: number }).code ?? 1) : 0 }),
        ),
    );
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const r = JSON.parse(lines[0] as string) as TestnetResult;
    if (code !== 0) console.error(stderr.slice(-4000));
    expect(code).toBe(0);
    expect(r.completed).toBe(true);
    expect(r.steps_completed).toBe(8);
    expect(r.quorum_failures).toBe(0);
    expect(r.batches_lost).toBe(0);
    expect(r.samples_applied_twice).toBe(0);
    expect(r.param_hash_mismatches).toBe(0);
    expect(r.param_hash_reports).toBe(2);
    expect(r.errors).toBe(0);
    expect(r.loss_last).toBeLessThan(r.loss_first as number);
    expect(r.bytes_sent_per_step).toBeGreaterThan(0);
    expect(r.ratio_vs_fp32).toBeGreaterThan(100);
    // The P2P fast path carried results between the trainers (the relay is only the fallback).
    expect(r.result_bytes_from_peers).toBeGreaterThan(0);
    // The trainers are light replicas (the default): each took every closed round's admitted list, from the
    // relay as the run's seeds (in a run this small every trainer is one) or from each other.
    expect(r.admitted_lists_from_peers + r.admitted_lists_from_relay).toBeGreaterThanOrEqual(2 * 4);
    expectExitedByThemselves(r, 2);
  }, 300_000);
});
