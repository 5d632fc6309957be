// `status` and `metrics` against a real relay process (no trainers: a run waiting for members), plus the
// Prometheus reader on the relay's own exposition.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchDataManifest, relayDataSource } from '@meshtrain/client';
import { parsePrometheus, valueOf } from '../src/net/prometheus.ts';
import { testnetToml } from '../src/testnet/index.ts';

const bin = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));
const relayBin = fileURLToPath(new URL('../../relay/bin/meshtrain-relay.mjs', import.meta.url));
let dir = '';
let relay: ChildProcess | undefined;
let url = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'meshtrain-status-'));
  const config = join(dir, 'run.toml');
  await writeFile(
    config,
    testnetToml({
      numClients: 2,
      steps: 5,
      preset: 'micro',
      randomKillNum: 0,
      randomKillInterval: 20,
      seed: 1,
    }),
  );
  relay = spawn(
    process.execPath,
    [relayBin, 'run', '--config', config, '--port', '0', '--data-dir', join(dir, 'relay'), '--no-p2p'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: relay!.stdout! }).on('line', (line) => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
    relay!.once('exit', (code) => reject(new Error(`relay exited ${code}`)));
  });
}, 60_000);

afterAll(async () => {
  relay?.kill('SIGKILL');
  if (dir) await rm(dir, { recursive: true, force: true });
});

function cli(args: string[]): Promise<{ stdout: string; code: number }> {
  return new Promise((resolve) =>
    execFile(process.execPath, [bin, ...args], (err, stdout) => resolve({ stdout, code: err ? 1 : 0 })),
  );
}

describe('status and metrics', () => {
  it('status reads the run from the relay API', async () => {
    const text = await cli(['status', '--relay', url]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/run testnet: WaitingForMembers, epoch 0, step 1\/5/);
    const json = await cli(['status', '--relay', url, '--run-id', 'testnet', '--json']);
    const parsed = JSON.parse(json.stdout) as { runs: { run_id: string; total_steps: number }[] };
    expect(parsed.runs[0]).toMatchObject({ run_id: 'testnet', total_steps: 5 });
  });

  it('metrics summarises the Prometheus text', async () => {
    const raw = await (await fetch(`${url}/metrics`)).text();
    const samples = parsePrometheus(raw);
    expect(valueOf(samples, 'meshtrain_step', { run: 'testnet' })).toBe(1);
    expect(valueOf(samples, 'meshtrain_run_state', { run: 'testnet', state: 'WaitingForMembers' })).toBe(1);
    const out = await cli(['metrics', '--relay', url, '--interval', '0', '--json']);
    expect(out.code).toBe(0);
    const s = JSON.parse(out.stdout) as {
      runs: { run: string; state: string; step: number }[];
      bytes_out: number;
    };
    expect(s.runs).toHaveLength(1);
    expect(s.runs[0]).toMatchObject({ run: 'testnet', state: 'WaitingForMembers', step: 1 });
    const human = await cli(['metrics', '--relay', url, '--interval', '0']);
    expect(human.stdout).toMatch(/^bandwidth {2}in .*, out /m);
    expect(human.stdout).toMatch(/run testnet: WaitingForMembers, epoch 0, step 1 \(round 0\)/);
  });

  it("reads the relay's samples, wrapping ids past the end of the split", async () => {
    const manifest = await fetchDataManifest(url, 'testnet');
    const n = manifest.samples.train;
    const w = manifest.sample_tokens;
    const data = relayDataSource(url, 'testnet', { maxPerRequest: 3 });
    const first = await data.samples(0, 4);
    expect(first).toHaveLength(5 * w);
    const across = await data.samples(n - 2, n + 1);
    const last = await data.samples(n - 2, n - 1);
    expect([...across]).toEqual([...last, ...first.subarray(0, 2 * w)]);
  });

  it('reads the held-out split through the same source and decoder', async () => {
    const manifest = await fetchDataManifest(url, 'testnet');
    const w = manifest.sample_tokens;
    const val = relayDataSource(url, 'testnet', { split: 'val' });
    expect(await val.samplesInSplit()).toBe(manifest.samples.val);
    const held = await val.samples(0, 1);
    expect(held).toHaveLength(2 * w);
    // Consecutive samples overlap by one token (the relay's sample layout), as in the training split.
    expect(held[w - 1]).toBe(held[w]);
    const train = await relayDataSource(url, 'testnet').samples(0, 1);
    expect([...held]).not.toEqual([...train]);
  });

  it('refuses a relay that is not there with a clear message', async () => {
    const { code } = await cli(['status', '--relay', 'http://127.0.0.1:1']);
    expect(code).toBe(1);
  });
});
