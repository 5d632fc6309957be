// Issue 6, scenario a: two browser tabs (WebGPU on SwiftShader, the trainer in their workers) and one
// node-trainer (onnxruntime-node, CPU) train the same `micro` run on the real relay, with its libp2p node on:
// the tabs' js-libp2p peers and the node-trainer's exchange results through the relay's circuit. Asserted through the
// relay's API: the run passes step 10, the round losses fall, and at an epoch end all three clients report the
// same parameter hash (no mismatches), so browser and native replicas hold bit-identical parameters.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { collectConsole, launchChromium, REPO_ROOT, screenshot, writeArtifact } from '../lib/index.ts';
import type { ConsoleLog, LaunchedChromium } from '../lib/index.ts';
import { parameterCount, PRESETS } from '@meshtrain/model';
import { microRunToml } from './support/micro-run.ts';
import { relayJson, startRelayProcess, waitFor } from './support/relay-process.ts';
import type { RelayProcess } from './support/relay-process.ts';

interface RunDetailJson {
  run: { run_id: string; run_state: string; step: number; epoch: number };
  clients: { id: string; device_kind: string; points: number; connected: boolean }[];
  rounds: { step: number; loss: number | null }[];
  param_hashes: { epoch: number; majority: string | null; reports: number; mismatched: string[] }[];
}

const RUN = 'mixed';
const MIN_STEPS = 10;

let relay: RelayProcess;
let tmp: string;
let trainer: ChildProcess | undefined;
let trainerOut = '';
const browsers: LaunchedChromium[] = [];
const tabs: { page: Page; log: ConsoleLog }[] = [];

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'meshtrain-e2e-mixed-'));
  const config = join(tmp, 'run.toml');
  // Epochs of ~50 s: the first epoch end (parameter hashes) comes after a dozen rounds or so.
  await writeFile(config, microRunToml({ runId: RUN, steps: 400, clients: 3, epochTime: 50 }));
  relay = await startRelayProcess({ args: ['--config', config], p2p: true });
});

afterAll(async () => {
  for (const b of browsers) await b.close();
  if (trainer && trainer.exitCode === null) {
    trainer.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    if (trainer.exitCode === null) trainer.kill('SIGKILL');
  }
  await writeArtifact('mixed/node-trainer.log', trainerOut);
  for (const [i, t] of tabs.entries()) await writeArtifact(`mixed/tab-${i + 1}.console.log`, t.log.dump());
  if (relay) {
    await writeArtifact('mixed/relay.log', relay.output());
    await relay.stop();
  }
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('mixed run: two browser tabs and a node-trainer', () => {
  it('(a) train together past step 10 with falling loss and identical parameter hashes', async () => {
    trainer = spawn(
      process.execPath,
      [
        join(REPO_ROOT, 'apps/node-trainer/bin/node-trainer.mjs'),
        'train',
        '--relay',
        relay.url,
        '--run-id',
        RUN,
        '--device',
        'cpu',
        '--identity',
        join(tmp, 'node-trainer.key'),
        '--log',
        'json',
        '--eval-samples',
        '0',
      ],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    trainer.stdout?.on('data', (b: Buffer) => (trainerOut += b.toString()));
    trainer.stderr?.on('data', (b: Buffer) => (trainerOut += b.toString()));

    for (let i = 0; i < 2; i++) {
      const browser = await launchChromium({ webgpu: true });
      browsers.push(browser);
      const page = await browser.newPage();
      const log = collectConsole(page);
      tabs.push({ page, log });
      await page.goto(`${relay.url}/?run=${RUN}`);
      const button = page.getByRole('button', { name: 'Contribute my GPU' });
      await expect.poll(() => button.isEnabled(), { timeout: 30_000 }).toBe(true);
      await button.click();
    }

    const t0 = Date.now();
    const done = await waitFor(
      `step ≥ ${MIN_STEPS} and an epoch whose 3 parameter hashes are reported`,
      async () => {
        if (trainer?.exitCode !== null) throw new Error(`node-trainer exited:\n${trainerOut.slice(-2000)}`);
        const d = await relayJson<RunDetailJson>(relay, `/api/runs/${RUN}`);
        const full = d.param_hashes.find((e) => e.reports >= 3);
        return d.run.step >= MIN_STEPS && full ? d : undefined;
      },
      420_000,
    );
    const seconds = (Date.now() - t0) / 1000;
    const losses = done.rounds
      .filter((r) => r.loss !== null)
      .sort((a, b) => a.step - b.step)
      .map((r) => r.loss as number);
    await writeArtifact(
      'mixed/summary.json',
      JSON.stringify(
        { seconds, run: done.run, losses, clients: done.clients, param_hashes: done.param_hashes },
        null,
        2,
      ),
    );
    await screenshot(tabs[0]!.page, 'mixed/tab-1');

    const kinds = done.clients.map((c) => c.device_kind).sort();
    expect(kinds.filter((k) => k.startsWith('browser webgpu'))).toHaveLength(2);
    expect(kinds.filter((k) => k.startsWith('node-trainer'))).toHaveLength(1);
    for (const e of done.param_hashes) expect(e.mismatched, `epoch ${e.epoch}`).toEqual([]);
    const full = done.param_hashes.find((e) => e.reports >= 3)!;
    expect(full.majority).toMatch(/^[0-9a-f]{64}$/);
    expect(losses.length).toBeGreaterThanOrEqual(MIN_STEPS - 2);
    const head = losses.slice(0, 3).reduce((a, b) => a + b, 0) / 3;
    const tail = losses.slice(-3).reduce((a, b) => a + b, 0) / 3;
    expect(tail).toBeLessThan(head);
    for (const t of tabs) {
      expect(t.log.pageErrors).toEqual([]);
      expect(t.log.gpuErrors()).toEqual([]);
    }
    // js-libp2p in the tabs: each joined the mesh through the relay's circuit, and results travelled between
    // peers (the tabs fetch accepted results from their trainers before asking the relay).
    let fromPeers = 0;
    for (const [i, t] of tabs.entries()) {
      const trainerLog = (await t.page.getByTestId('trainer-log').textContent()) ?? '';
      await writeArtifact(`mixed/tab-${i + 1}.trainer.log`, trainerLog);
      expect(trainerLog, `tab ${i + 1}`).toMatch(/p2p: peer \S+ connected to the relay/);
      fromPeers += Number(await t.page.getByTestId('p2p-peers').getAttribute('data-results'));
    }
    expect(fromPeers, 'results the tabs fetched from peers').toBeGreaterThan(0);
    // GPU-resident training: the tabs fed ORT from DisTrO's GPU tensors and compressed ORT's gradient buffers in
    // WGSL. Per batch, what came back to the host must be far below one copy of the parameters (the host-copy
    // path reads them and the gradients, two copies, every step).
    const paramBytes = parameterCount(PRESETS.micro) * 4;
    for (const [i, t] of tabs.entries()) {
      const gpu = t.page.getByTestId('gpu-resident');
      expect(await gpu.getAttribute('data-resident'), `tab ${i + 1}`).toBe('yes');
      const batches = Number(await gpu.getAttribute('data-batches'));
      const readback = Number(await gpu.getAttribute('data-readback'));
      expect(batches, `tab ${i + 1} batches`).toBeGreaterThan(0);
      expect(readback / batches, `tab ${i + 1} bytes read back per batch`).toBeLessThan(paramBytes / 20);
      await writeArtifact(
        `mixed/tab-${i + 1}.gpu.json`,
        JSON.stringify({ batches, readback, perBatch: readback / batches, paramBytes }, null, 2),
      );
    }
  });
});
