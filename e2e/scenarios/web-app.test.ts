// e2e for apps/web served by the real relay (issue 6, scenarios b, d, e, and a one-tab part of a):
//  - a browser tab with WebGPU (SwiftShader) clicks "Contribute my GPU" and trains the relay's `micro` run in
//    its worker: the relay's step advances, the round losses fall, the tab is listed with points;
//  b. a run created, paused, reconfigured and resumed through the admin console in a real browser, every
//     change checked through the relay's public API;
//  d. a browser without WebGPU opens `/` and gets the explanation, with no errors on its console;
//  e. screenshots of the volunteer page mid-training and of the admin console under e2e/artifacts/web/.
// The relay runs its libp2p node, and the volunteer tab opens with `?p2p=worker`: its peer runs in the training
// worker, circuit-only, as in a browser whose page cannot host it (mixed-run.test.ts covers the page-hosted
// peer with WebRTC).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { fetchRunInfo, fetchRunList } from '@meshtrain/client/relay-api';
import { DEFAULT_RUN_TOML } from '@meshtrain/core';
import { collectConsole, launchChromium, screenshot, writeArtifact } from '../lib/index.ts';
import type { ConsoleLog, LaunchedChromium } from '../lib/index.ts';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { microRunToml } from './support/micro-run.ts';
import { startRelayProcess, waitFor } from './support/relay-process.ts';
import type { RelayProcess } from './support/relay-process.ts';

/** Steps the in-tab training must reach (the run has more, so the tab is still training for the screenshots). */
const TRAIN_STEPS = 8;

let relay: RelayProcess;
const browsers: LaunchedChromium[] = [];

beforeAll(async () => {
  // The relay's one run at startup is `default` on the micro preset: SwiftShader trains it in seconds a step.
  const config = join(tmpdir(), `meshtrain-e2e-web-${process.pid}.toml`);
  await writeFile(config, microRunToml({ runId: 'default', steps: 200, clients: 1 }));
  relay = await startRelayProcess({ args: ['--config', config], p2p: true });
});

afterAll(async () => {
  for (const b of browsers) await b.close();
  if (relay) {
    await writeArtifact('web/relay.log', relay.output());
    await relay.stop();
  }
});

async function open(webgpu: boolean, path: string): Promise<{ page: Page; log: ConsoleLog }> {
  const browser = await launchChromium({ webgpu });
  browsers.push(browser);
  const page = await browser.newPage();
  const log = collectConsole(page);
  await page.goto(`${relay.url}${path}`);
  return { page, log };
}

describe('web app on the relay', () => {
  it('serves the app for its client routes and keeps the API beside it', async () => {
    for (const path of ['/', '/admin', '/runs/default']) {
      const res = await fetch(`${relay.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(await res.text(), path).toContain('<div id="app">');
    }
    expect((await fetchRunList(relay.url)).runs.map((r) => r.run_id)).toContain('default');
  });

  it('(d) explains how to get WebGPU when the browser has none, without console errors', async () => {
    const { page, log } = await open(false, '/');
    const help = page.getByTestId('webgpu-help');
    await help.waitFor({ state: 'visible', timeout: 30_000 });
    const text = await help.innerText();
    expect(text).toContain('WebGPU is not available');
    expect(text).toMatch(/chrome:\/\/flags|edge:\/\/flags/);
    expect(text).toContain('hardware acceleration');
    expect(text).toContain('Vulkan');
    // The run is still shown, and the contribute button is there but disabled.
    await page.getByTestId('run-phase').waitFor({ timeout: 30_000 });
    const button = page.getByRole('button', { name: 'Contribute my GPU' });
    expect(await button.isDisabled()).toBe(true);
    await screenshot(page, 'web/volunteer-no-webgpu');
    await writeArtifact('web/volunteer-no-webgpu.console.log', log.dump());
    expect(log.errors()).toEqual([]);
  });

  it('(e) a volunteer tab with WebGPU trains the run in its worker: steps advance, loss falls', async () => {
    const { page, log } = await open(true, '/?p2p=worker');
    await page.getByTestId('run-phase').waitFor({ timeout: 30_000 });
    const button = page.getByRole('button', { name: 'Contribute my GPU' });
    await expect.poll(() => button.isEnabled(), { timeout: 30_000 }).toBe(true);
    const t0 = Date.now();
    await button.click();
    const status = page.getByTestId('trainer-status');
    await expect.poll(() => status.innerText(), { timeout: 60_000 }).toMatch(/training/);

    const trained = await waitFor(
      `the relay's run to reach step ${TRAIN_STEPS} with this tab training`,
      async () => {
        const d = await fetchRunInfo(relay.url, 'default');
        return d.run.step >= TRAIN_STEPS ? d : undefined;
      },
      150_000,
    );
    const seconds = (Date.now() - t0) / 1000;
    const losses = trained.rounds
      .filter((r) => r.loss !== null)
      .sort((a, b) => a.step - b.step)
      .map((r) => r.loss as number);
    await writeArtifact(
      'web/volunteer-training.json',
      JSON.stringify({ seconds, step: trained.run.step, losses, clients: trained.clients }, null, 2),
    );
    expect(losses.length).toBeGreaterThanOrEqual(TRAIN_STEPS - 2);
    const head = losses.slice(0, 2).reduce((a, b) => a + b, 0) / 2;
    const tail = losses.slice(-2).reduce((a, b) => a + b, 0) / 2;
    expect(tail).toBeLessThan(head);
    const me = trained.clients.find((c) => c.device_kind.startsWith('browser webgpu'));
    expect(me, JSON.stringify(trained.clients)).toBeDefined();
    expect(me!.connected).toBe(true);
    await expect
      .poll(async () => Number(await page.getByTestId('my-batches').innerText()))
      .toBeGreaterThan(0);
    // Measured figures, nothing made up: the tab (the run's only client, so its witness) reports its tokens/s
    // and bandwidth with its attestation, the relay keeps them, and the page shows the tab's own.
    const reported = await waitFor('a witness report from the tab', async () => {
      const d = await fetchRunInfo(relay.url, 'default');
      const mine = d.clients.find((c) => c.id === me!.id)?.report;
      return mine && d.reports.length > 0 ? { mine, steps: d.reports } : undefined;
    });
    expect(reported.mine.tokens_per_sec).toBeGreaterThan(0);
    expect(reported.mine.bandwidth).toBeGreaterThan(0);
    for (const r of reported.steps) expect(r.tokens_per_sec).toBeGreaterThan(0);
    expect(Number(await page.getByTestId('my-tokens-per-sec').getAttribute('data-value'))).toBeGreaterThan(0);
    expect(Number(await page.getByTestId('my-bandwidth').getAttribute('data-value'))).toBeGreaterThan(0);
    // The worker-hosted peer: it reached the relay's libp2p and says it has no WebRTC.
    expect(await page.getByTestId('p2p-peers').getAttribute('data-host')).toBe('worker');
    expect(await page.getByTestId('trainer-log').textContent()).toMatch(
      /p2p: peer \S+ connected to the relay .*no RTCPeerConnection here/,
    );

    // "Try the model": greedy generation in the worker from the tab's current parameters.
    await page.getByLabel('Prompt').fill('The ');
    await page.getByRole('button', { name: 'Generate' }).click();
    const sample = page.getByTestId('generated');
    await sample.waitFor({ timeout: 150_000 });
    expect((await sample.innerText()).length).toBeGreaterThan('The '.length);

    await page.getByText('Your device').click();
    await screenshot(page, 'web/volunteer');
    await writeArtifact('web/volunteer.console.log', log.dump());
    expect(log.pageErrors).toEqual([]);
    expect(log.gpuErrors()).toEqual([]);
    expect(log.errors()).toEqual([]);
  }, 300_000);

  it('(b) creates, pauses, reconfigures and resumes a run from the admin console', async () => {
    const { page, log } = await open(false, '/admin');
    const keyText = page.getByTestId('admin-public-key');
    await keyText.waitFor({ timeout: 30_000 });
    const adminKey = (await keyText.innerText()).trim();
    expect(adminKey).toMatch(/^[0-9a-f]{64}$/);
    expect(adminKey).not.toBe(relay.relayKey);

    // Core's validation runs in the page as the user types, with key paths.
    const editor = page.locator('#create-toml');
    const create = page.getByRole('button', { name: 'Create run' });
    const runId = 'e2e-admin';
    const toml = DEFAULT_RUN_TOML.replace('run_id = "default"', `run_id = "${runId}"`);
    await editor.fill(toml.replace('witness_nodes = 0', 'witnes_nodes = 0'));
    const check = page.locator('#create-toml-check');
    await expect.poll(() => check.innerText()).toContain('config.witnes_nodes');
    expect(await check.innerText()).toContain('did you mean witness_nodes');
    expect(await create.isDisabled()).toBe(true);
    await editor.fill(toml);
    await expect.poll(() => check.innerText()).toContain('Valid');

    await create.click();
    const created = await waitFor('the run to exist on the relay', async () => {
      const runs = (await fetchRunList(relay.url)).runs;
      return runs.find((r) => r.run_id === runId);
    });
    expect(created.main_authority).toBe(adminKey);
    await page.getByText(`POST /api/runs → 201`).waitFor();

    // Pause: the relay's state changes.
    await page.getByRole('button', { name: 'Pause run' }).click();
    await waitFor('the run to be paused', async () => {
      const d = await fetchRunInfo(relay.url, runId);
      return d.run.run_state === 'Paused' ? d : undefined;
    });
    await expect
      .poll(() => page.getByTestId('run-phase').innerText(), { timeout: 10_000 })
      .toContain('Paused');

    // Update the config while paused.
    await page.getByRole('button', { name: 'Edit config…' }).click();
    const edit = page.locator('#edit-toml');
    await edit.fill(toml.replace('max_round_train_time = 60', 'max_round_train_time = 90'));
    await page.getByRole('button', { name: 'Save config' }).click();
    await waitFor('the new config on the relay', async () => {
      const d = await fetchRunInfo(relay.url, runId);
      return d.config.toml.includes('max_round_train_time = 90') ? d : undefined;
    });

    // Resume.
    await page.getByRole('button', { name: 'Resume run' }).click();
    const resumed = await waitFor('the run to leave Paused', async () => {
      const d = await fetchRunInfo(relay.url, runId);
      return d.run.run_state !== 'Paused' ? d : undefined;
    });
    expect(resumed.run.run_state).not.toBe('Paused');

    // Grants: this key is the run's join authority, so it may grant a key; the relay lists the grant.
    const grantee = 'ab'.repeat(32);
    await page.getByLabel('Grantee public key').fill(grantee);
    await page.getByRole('button', { name: 'Save grant' }).click();
    await waitFor('the grant on the relay', async () => {
      const d = await fetchRunInfo(relay.url, runId);
      return d.grants.some((g) => g.grantee === grantee && g.active) ? true : undefined;
    });

    // A run owned by another key (the relay's default run, which the volunteer tab is training) can be watched
    // but not paused from this console.
    await page.locator('tr[data-run="default"]').getByRole('button').click();
    await expect.poll(() => page.getByText('Another key owns this run').isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: 'Pause run' }).isDisabled()).toBe(true);
    await page
      .getByRole('table', { name: 'Clients' })
      .getByText('browser webgpu')
      .waitFor({ timeout: 10_000 });
    await page.getByRole('table', { name: 'Rounds and witness quorum' }).waitFor();
    // Let the bandwidth chart collect a few samples of /metrics.
    await page.waitForTimeout(7000);

    await screenshot(page, 'web/admin');
    await writeArtifact('web/admin.console.log', log.dump());
    expect(log.pageErrors).toEqual([]);

    // The public run dashboard, reached by its link (client-side navigation).
    await page.getByRole('link', { name: 'Public dashboard →' }).click();
    await page.waitForURL(`${relay.url}/runs/default`);
    await page
      .getByRole('table', { name: 'Clients' })
      .getByText('browser webgpu')
      .waitFor({ timeout: 10_000 });
    // The dashboard shows the tokens/s the training tab measured and reported (test e trained it).
    const rate = page.getByRole('table', { name: 'Clients' }).getByTestId('client-tokens-per-sec').first();
    await expect
      .poll(async () => Number(await rate.getAttribute('data-value')), { timeout: 10_000 })
      .toBeGreaterThan(0);
    expect(await rate.innerText()).toMatch(/[1-9][\d,.]* tok\/s/);
    expect(Number(await page.getByTestId('throughput-chart').getAttribute('data-reports'))).toBeGreaterThan(
      0,
    );
    await screenshot(page, 'web/dashboard');
    expect(log.pageErrors).toEqual([]);
  });
});
