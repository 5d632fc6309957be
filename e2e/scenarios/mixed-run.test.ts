// Issue 6, scenario a: two browser tabs (WebGPU on SwiftShader, the trainer in their workers) and one
// node-trainer (onnxruntime-node, CPU) train the same `micro` run (SparseLoCo, as the default run) on the real
// relay, with its libp2p node on.
// Asserted through the relay's API: the run passes step 10, the round losses fall, and at an epoch end all three
// clients report the same parameter hash (no mismatches), so browser and native replicas hold bit-identical
// parameters.
//
// Peer to peer: each tab's libp2p peer runs on its page (RTCPeerConnection) and the tabs and the node-trainer
// meet on the relay's circuit, then upgrade to direct WebRTC links. ICE needs a non-loopback host candidate, so
// Chromium and the node-trainer run in a network namespace the test creates (e2e/lib/netns.ts), with the relay's
// port forwarded into it; the relay itself stays on the host's loopback. Asserted: each tab holds a direct WebRTC
// connection to the other tab and to the node-trainer, and most result bytes each tab fetched came directly, not
// through the relay's circuit nor from its HTTP API; the bytes per path are printed. Without namespaces (not
// root) the run happens on loopback as before and the WebRTC test is skipped.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import {
  collectConsole,
  createTestNamespace,
  launchChromium,
  namespacesAvailable,
  REPO_ROOT,
  screenshot,
  writeArtifact,
} from '../lib/index.ts';
import type { ConsoleLog, LaunchedChromium, TestNamespace } from '../lib/index.ts';
import { fetchRunInfo } from '@meshtrain/client/relay-api';
import { parameterCount, PRESETS } from '@meshtrain/model';
import { microRunToml } from './support/micro-run.ts';
import { startRelayProcess, waitFor } from './support/relay-process.ts';
import type { RelayProcess } from './support/relay-process.ts';

const RUN = 'mixed';
const MIN_STEPS = 10;

const netns = namespacesAvailable();
if (!netns.ok)
  console.warn(
    `[e2e mixed] no network namespace, so no WebRTC (peers stay on the relay's circuit): ${netns.reason}`,
  );

let relay: RelayProcess;
let ns: TestNamespace | undefined;
let tmp: string;
let trainer: ChildProcess | undefined;
let trainerOut = '';
const browsers: LaunchedChromium[] = [];
const tabs: { page: Page; log: ConsoleLog }[] = [];

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'meshtrain-e2e-mixed-'));
  const config = join(tmp, 'run.toml');
  // Epochs of ~50 s: the first epoch end (parameter hashes) comes after a dozen rounds or so.
  // SparseLoCo, as the embedded default run (2 inner steps a round here, to keep SwiftShader's rounds short):
  // tabs run its inner AdamW, error feedback and top-k in WGSL, the node-trainer on the CPU.
  await writeFile(config, microRunToml({ runId: RUN, steps: 400, clients: 3, epochTime: 50, innerSteps: 2 }));
  relay = await startRelayProcess({ args: ['--config', config], p2p: true });
  if (netns.ok) {
    ns = await createTestNamespace('mt-e2e-mixed');
    await ns.forward(Number(new URL(relay.url).port));
  }
});

afterAll(async () => {
  for (const b of browsers) await b.close();
  await stopTrainer(500);
  await ns?.close();
  await writeArtifact('mixed/node-trainer.log', trainerOut);
  for (const [i, t] of tabs.entries()) await writeArtifact(`mixed/tab-${i + 1}.console.log`, t.log.dump());
  if (relay) {
    await writeArtifact('mixed/relay.log', relay.output());
    await relay.stop();
  }
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** SIGTERM, then SIGKILL after `graceMs`: the trainer prints its `done` line (with its byte counters) on the way out. */
async function stopTrainer(graceMs: number): Promise<void> {
  const t = trainer;
  if (!t || t.exitCode !== null || t.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => t.once('exit', () => resolve()));
  t.kill('SIGTERM');
  const timer = setTimeout(() => t.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** The node-trainer's JSON log lines of a type. */
function trainerLines(type: string): Record<string, unknown>[] {
  return trainerOut
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return {};
      }
    })
    .filter((o) => o.type === type);
}

describe('mixed run: two browser tabs and a node-trainer', () => {
  it('(a) train together past step 10 with falling loss and identical parameter hashes', async () => {
    const trainerArgs = [
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
    ];
    // In the namespace: its WebRTC host candidate is the namespace's address, the relay is the forwarded port.
    trainer = ns
      ? ns.spawn(process.execPath, trainerArgs, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(process.execPath, trainerArgs, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    trainer.stdout?.on('data', (b: Buffer) => (trainerOut += b.toString()));
    trainer.stderr?.on('data', (b: Buffer) => (trainerOut += b.toString()));

    for (let i = 0; i < 2; i++) {
      const browser = await launchChromium({
        webgpu: true,
        ...(ns ? { executablePath: ns.chromiumPath, webrtcHostCandidates: true } : {}),
      });
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
        const d = await fetchRunInfo(relay.url, RUN);
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
        {
          seconds,
          run: done.run,
          losses,
          clients: done.clients,
          reports: done.reports,
          param_hashes: done.param_hashes,
        },
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
    // The witnesses' measured throughput reached the relay: every per-step mean is a real, positive rate.
    expect(done.reports.length).toBeGreaterThan(0);
    for (const r of done.reports) expect(r.tokens_per_sec, `step ${r.step}`).toBeGreaterThan(0);
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
    // GPU-resident training: the tabs fed ORT from the replica's GPU tensors and ran the inner steps, error
    // feedback and top-k in WGSL. Per batch, what came back to the host must be far below one copy of the
    // parameters (the host-copy path reads them and the gradients, two copies, every step); what does come back
    // is mostly the result to sign and send (SparseLoCo's top-64 per chunk, indices and codes, and the small
    // 1-D tensors whole: about 6% of a copy on micro).
    const paramBytes = parameterCount(PRESETS.micro) * 4;
    for (const [i, t] of tabs.entries()) {
      const gpu = t.page.getByTestId('gpu-resident');
      expect(await gpu.getAttribute('data-resident'), `tab ${i + 1}`).toBe('yes');
      const batches = Number(await gpu.getAttribute('data-batches'));
      const readback = Number(await gpu.getAttribute('data-readback'));
      expect(batches, `tab ${i + 1} batches`).toBeGreaterThan(0);
      expect(readback / batches, `tab ${i + 1} bytes read back per batch`).toBeLessThan(paramBytes / 10);
      await writeArtifact(
        `mixed/tab-${i + 1}.gpu.json`,
        JSON.stringify({ batches, readback, perBatch: readback / batches, paramBytes }, null, 2),
      );
    }
  });

  it.skipIf(!netns.ok)(
    '(a) the tabs hold direct WebRTC links to each other and to the node-trainer, and fetch most results directly',
    async () => {
      expect(tabs, 'the training test above ran').toHaveLength(2);
      const nodeLog = trainerLines('log')
        .map((l) => String(l.message))
        .join('\n');
      const nodePeer = /p2p: peer (\S+) via/.exec(nodeLog)?.[1];
      expect(nodePeer, 'the node-trainer logs its PeerId').toBeDefined();
      const ids: string[] = [];
      for (const t of tabs) {
        const el = t.page.getByTestId('p2p-peers');
        // The page hosts the tab's peer (it has RTCPeerConnection), not the worker.
        expect(await el.getAttribute('data-host')).toBe('page');
        ids.push((await el.getAttribute('data-peer-id')) ?? '');
      }
      for (const [i, t] of tabs.entries()) {
        const others = [ids[1 - i] as string, nodePeer as string];
        const el = t.page.getByTestId('p2p-peers');
        // A direct WebRTC connection (not limited, not relayed) to each of the other two peers.
        await expect
          .poll(async () => ((await el.getAttribute('data-webrtc-peers')) ?? '').split(','), {
            timeout: 30_000,
          })
          .toEqual(expect.arrayContaining(others));
      }

      // Where the result bytes came from: each tab's own counters, and the node-trainer's from its `done` line.
      const rows: { client: string; direct: number; circuit: number; relayHttp: number }[] = [];
      for (const [i, t] of tabs.entries()) {
        const el = t.page.getByTestId('result-sources');
        rows.push({
          client: `tab ${i + 1}`,
          direct: Number(await el.getAttribute('data-direct')),
          circuit: Number(await el.getAttribute('data-circuit')),
          relayHttp: Number(await el.getAttribute('data-relay')),
        });
      }
      await stopTrainer(30_000);
      const done = trainerLines('done').at(-1) as
        | {
            p2p: { bytesDirect: number; bytesRelayed: number };
            stats: { bytesReceived: number; bytesFromPeers: number };
          }
        | undefined;
      if (done)
        rows.push({
          client: 'node-trainer',
          direct: done.p2p.bytesDirect,
          circuit: done.p2p.bytesRelayed,
          // What it accepted that did not come from peers came from the relay's HTTP result route.
          relayHttp: done.stats.bytesReceived - done.stats.bytesFromPeers,
        });
      const total = rows.reduce(
        (a, r) => ({ direct: a.direct + r.direct, relay: a.relay + r.circuit + r.relayHttp }),
        { direct: 0, relay: 0 },
      );
      const lines = rows.map(
        (r) =>
          `  ${r.client}: ${r.direct} B direct (WebRTC), ${r.circuit} B via the relay's circuit, ${r.relayHttp} B from the relay's HTTP`,
      );
      console.log(
        `[e2e mixed] result bytes by path (2 tabs + 1 node-trainer, micro preset):\n${lines.join('\n')}\n` +
          `  peers exchanged ${total.direct} B directly; the relay carried ${total.relay} B of results ` +
          `(${((100 * total.relay) / Math.max(1, total.relay + total.direct)).toFixed(1)}%)`,
      );
      await writeArtifact('mixed/result-bytes.json', JSON.stringify({ rows, total }, null, 2));
      expect(done, 'the node-trainer printed its done line').toBeDefined();
      // Each tab follows the run as a light replica: it took the closed rounds' admitted lists (from the relay
      // as one of the round's seeds in a run this small, or from its peers).
      for (const [i, t] of tabs.entries()) {
        const el = t.page.getByTestId('list-sources');
        const lists =
          Number(await el.getAttribute('data-peers')) + Number(await el.getAttribute('data-relay'));
        expect(lists, `tab ${i + 1}: admitted lists taken`).toBeGreaterThan(0);
      }
      for (const r of rows.slice(0, 2)) {
        expect(r.direct, `${r.client}: result bytes fetched directly`).toBeGreaterThan(0);
        // "Most": more bytes came straight from peers than through the relay (circuit and HTTP together).
        expect(r.direct, `${r.client}: direct vs through the relay`).toBeGreaterThan(r.circuit + r.relayHttp);
      }
    },
    120_000,
  );
});
