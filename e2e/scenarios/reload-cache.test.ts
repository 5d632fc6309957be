// Issue 6, scenario c: a training tab is reloaded and rejoins from its IndexedDB (Dexie) checkpoint cache
// instead of downloading the model again. The tab trains a `micro` run; the run creator pauses it (the epoch
// ends with a Cooldown, where the tab hashes, uploads and caches its parameters); the tab is reloaded; the
// run resumes and the reloaded tab joins the next epoch with the cached parameters — it fetches the relay's
// small checkpoint summary to compare hashes, never `model.safetensors` — and the run trains on, reading
// training data it had already fetched from its IndexedDB data cache, and its local metrics restored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchCheckpointSummary, fetchRunInfo } from '@meshtrain/client/relay-api';
import type { RunSummary } from '@meshtrain/client/relay-api';
import { identityFromSeed } from '@meshtrain/core';
import { signAdminRequest } from '../../apps/relay/src/middleware/admin-auth.ts';
import { collectConsole, launchChromium, screenshot, writeArtifact } from '../lib/index.ts';
import type { LaunchedChromium } from '../lib/index.ts';
import { microRunToml } from './support/micro-run.ts';
import { startRelayProcess, waitFor } from './support/relay-process.ts';
import type { RelayProcess } from './support/relay-process.ts';

const RUN = 'reload';
const owner = identityFromSeed(new Uint8Array(32).fill(61));

let relay: RelayProcess;
let browser: LaunchedChromium | undefined;

async function admin(method: 'POST', path: string, body = ''): Promise<void> {
  const headers = signAdminRequest(owner.secretKey, method, path, body, Date.now());
  const res = await fetch(`${relay.url}${path}`, { method, headers, body });
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status}: ${await res.text()}`);
}

async function runState(): Promise<RunSummary> {
  return (await fetchRunInfo(relay.url, RUN)).run;
}

beforeAll(async () => {
  relay = await startRelayProcess();
  // A 120 s epoch gives warmup and a round 60 s each, as the other scenarios have: a tab's first step compiles
  // its kernels, which on SwiftShader took 27–30 s on a 2-core VM, past the 20 s rounds of a 40 s epoch (the tab
  // then missed the epoch and rejoined the next from the relay's checkpoint, downloading the model).
  await admin('POST', '/api/runs', microRunToml({ runId: RUN, steps: 400, clients: 1, epochTime: 120 }));
});

afterAll(async () => {
  await browser?.close();
  if (relay) {
    await writeArtifact('reload/relay.log', relay.output());
    await relay.stop();
  }
});

describe('reloading a training tab', () => {
  it('(c) rejoins from the Dexie checkpoint cache without downloading the model again', async () => {
    browser = await launchChromium({ webgpu: true });
    const page = await browser.newPage();
    const log = collectConsole(page);
    const trainerLog = page.getByTestId('trainer-log');
    const contribute = async () => {
      await page.goto(`${relay.url}/?run=${RUN}`);
      const button = page.getByRole('button', { name: 'Contribute my GPU' });
      await expect.poll(() => button.isEnabled(), { timeout: 30_000 }).toBe(true);
      await button.click();
    };

    await contribute();
    await waitFor(
      'the tab to train a few steps',
      async () => ((await runState()).step >= 4 ? true : undefined),
      120_000,
    );

    // Pause: the current round finishes, the epoch cools down (hash, upload, cache), then the run is Paused.
    await admin('POST', `/api/runs/${RUN}/pause`);
    const paused = await waitFor(
      'the run to be Paused',
      async () => {
        const r = await runState();
        return r.run_state === 'Paused' ? r : undefined;
      },
      60_000,
    );
    await expect
      .poll(async () => (await trainerLog.textContent()) ?? '', { timeout: 30_000 })
      .toContain(`saved the parameters at step ${paused.step}`);
    await waitFor(`the relay's checkpoint for step ${paused.step}`, async () => {
      const summary = await fetchCheckpointSummary(relay.url, RUN, paused.step);
      return summary?.step === paused.step ? true : undefined;
    });
    const before = await page.getByTestId('checkpoint-source').innerText();
    await writeArtifact('reload/tab-before-reload.trainer.log', (await trainerLog.textContent()) ?? '');
    const batchesBefore = Number(await page.getByTestId('my-batches').innerText());

    // Reload the tab, resume the run, contribute again: only the reloaded page's requests are recorded.
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await admin('POST', `/api/runs/${RUN}/resume`);
    await contribute();
    await expect
      .poll(async () => (await trainerLog.textContent()) ?? '', { timeout: 120_000 })
      .toContain(`checkpoint for step ${paused.step} loaded from this browser's cache`);
    await waitFor(
      'the run to train past the paused step with the reloaded tab',
      async () => ((await runState()).step >= paused.step + 2 ? true : undefined),
      120_000,
    );
    const source = await page.getByTestId('checkpoint-source').innerText();
    // Local metrics live in IndexedDB too: the reloaded tab restored its record and counts on from it.
    const restored = /restored this browser's record of run \S+: (\d+) batches/.exec(
      (await trainerLog.textContent()) ?? '',
    );
    await expect
      .poll(async () => Number(await page.getByTestId('my-batches').innerText()), { timeout: 60_000 })
      .toBeGreaterThan(batchesBefore);
    // Training data comes in blocks cached in IndexedDB: the resumed epoch re-reads samples near the pause
    // (the data rewinds for the rounds a Cooldown cuts short) that the page fetched before it was reloaded.
    const dataHits = Number(await page.getByTestId('data-source').getAttribute('data-hits'));
    await writeArtifact(
      'reload/summary.json',
      JSON.stringify(
        {
          pausedAt: paused,
          before,
          after: source,
          dataHits,
          batchesBefore,
          restored: restored?.[1],
          requests,
        },
        null,
        2,
      ),
    );
    await page.getByText('Your device').click();
    await screenshot(page, 'reload/after-reload');
    await writeArtifact('reload/tab.console.log', log.dump());
    await writeArtifact('reload/tab.trainer.log', (await trainerLog.textContent()) ?? '');

    // The count is the browser's record across reloads: nothing is added to what the tab had downloaded before
    // (0 B when it started from the run seed; a checkpoint's size when a loaded machine made it miss the first
    // epoch and join the next one from the relay's checkpoint).
    expect(source.startsWith(`cached (${before} downloaded)`)).toBe(true);
    expect(dataHits).toBeGreaterThan(0);
    expect(batchesBefore).toBeGreaterThan(0);
    expect(Number(restored?.[1])).toBe(batchesBefore);
    expect(requests.filter((u) => u.includes('model.safetensors'))).toEqual([]);
    expect(requests.some((u) => u.includes(`/checkpoint?step=${paused.step}`))).toBe(true);
    expect(log.pageErrors).toEqual([]);
  });
});
