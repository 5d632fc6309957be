// WebRTC from real Chromium: `@meshtrain/p2p/browser` on pages (main thread) and a Node peer upgrade their
// relay circuits to direct WebRTC links (DirectLinks), and blobs then travel over those links. ICE needs a
// non-loopback host candidate, so Chromium and the Node peer run in a network namespace the test creates
// (e2e/lib/netns.ts: one veth address inside, nothing leaves it); the relay and the static server stay on the
// host's loopback and are forwarded into the namespace. A page in a dedicated worker (no RTCPeerConnection)
// shows the fallback: its upgrade fails and the circuit keeps carrying its blobs.
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSockets } from '@multiformats/multiaddr-matcher';
import {
  buildPage,
  collectConsole,
  createTestNamespace,
  launchChromium,
  namespacesAvailable,
  openScenarioPage,
  runScenario,
  serveStatic,
  writeArtifact,
} from '../../../e2e/lib/index.ts';
import type {
  BuiltPage,
  ConsoleLog,
  LaunchedChromium,
  StaticServer,
  TestNamespace,
} from '../../../e2e/lib/index.ts';
import { blobAddress, createRelayNode, sameBytes, toHex } from '../src/index.ts';
import type { RelayNode } from '../src/index.ts';
import type { FetchedBlobResult, Outcome, StartResult } from './browser/protocol.ts';

const PAGE_ROOT = fileURLToPath(new URL('./browser/', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./fixtures/ns-node.ts', import.meta.url));
const NODE_BLOB_BYTES = 2 * 1024 * 1024;

const available = namespacesAvailable();
if (!available.ok) console.warn(`[p2p browser-webrtc] skipping: ${available.reason}`);

function bytesOf(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
const unb64 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'base64'));

function value<T>(o: Outcome<T>, what: string): T {
  if (!o.ok) throw new Error(`${what} failed in the page: ${o.error.name}: ${o.error.message}`);
  return o.value;
}

/** A Node peer inside the namespace (fixtures/ns-node.ts role `peer`), driven one command at a time. */
class NsPeer {
  peerId = '';
  address = '';
  private readonly child: ChildProcess;
  private buf = '';
  private waiting: ((evt: Record<string, unknown>) => void) | undefined;
  private stderr = '';

  constructor(child: ChildProcess) {
    this.child = child;
    child.stderr?.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString()).slice(-4000)));
    child.stdout?.on('data', (d: Buffer) => {
      this.buf += d.toString();
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        let evt: Record<string, unknown>;
        try {
          evt = JSON.parse(line) as Record<string, unknown>;
        } catch {
          continue; // a library's log line
        }
        const w = this.waiting;
        this.waiting = undefined;
        w?.(evt);
      }
    });
  }

  next(timeoutMs: number): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`ns peer: no answer in ${timeoutMs} ms; stderr: ${this.stderr}`)),
        timeoutMs,
      );
      this.waiting = (evt) => {
        clearTimeout(timer);
        if (evt.event === 'error') reject(new Error(`ns peer: ${String(evt.message)}`));
        else resolve(evt);
      };
    });
  }

  async send(cmd: Record<string, unknown>, timeoutMs = 30_000): Promise<Record<string, unknown>> {
    const answer = this.next(timeoutMs);
    this.child.stdin?.write(JSON.stringify(cmd) + '\n');
    return await answer;
  }
}

let ns: TestNamespace;
let relay: RelayNode;
let relayWs: string;
let built: BuiltPage;
let server: StaticServer;
let browser: LaunchedChromium;
let nodePeer: NsPeer;
const pages: {
  page: Awaited<ReturnType<LaunchedChromium['newPage']>>;
  log: ConsoleLog;
  started: StartResult;
}[] = [];

/** Polls a page's links until `peerId` is reached over WebRTC. */
async function waitForLink(i: number, peerId: string, timeoutMs = 40_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const l = await runScenario<{ links: Record<string, string> }>(pages[i]!.page, 'links', {});
    if (l.links[peerId] === 'webrtc') return;
    if (Date.now() - t0 > timeoutMs)
      throw new Error(`page ${i}: no WebRTC link to ${peerId} in ${timeoutMs} ms: ${JSON.stringify(l)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe.skipIf(!available.ok)('WebRTC links from Chromium (namespace)', () => {
  beforeAll(async () => {
    ns = await createTestNamespace('mt-p2p-web');
    relay = await createRelayNode({ host: '127.0.0.1', webrtcDirect: false });
    const ws = relay.multiaddrs().find((m) => WebSockets.exactMatch(m));
    if (ws === undefined) throw new Error('relay has no ws address');
    relayWs = ws.toString();
    [built] = await Promise.all([buildPage({ root: PAGE_ROOT })]);
    server = await serveStatic({ root: built.outDir });
    await ns.forward(Number(/\/tcp\/(\d+)\//.exec(relayWs)?.[1]));
    await ns.forward(server.port);
    const child = ns.spawn(process.execPath, [
      FIXTURE,
      'peer',
      JSON.stringify({ relay: relayWs, blobBytes: NODE_BLOB_BYTES }),
    ]);
    nodePeer = new NsPeer(child);
    const ready = await nodePeer.next(30_000);
    nodePeer.peerId = String(ready.peerId);
    nodePeer.address = String(ready.address);
    browser = await launchChromium({
      webgpu: false,
      executablePath: ns.chromiumPath,
      webrtcHostCandidates: true,
    });
    // Two pages on the main thread (WebRTC), one whose peer lives in a dedicated worker (circuit only).
    for (const [i, query] of ['', '', '?worker'].entries()) {
      const page = await browser.newPage();
      const log = collectConsole(page);
      await openScenarioPage(page, `${server.url}/${query}`);
      const started = value(
        await runScenario<Outcome<StartResult>>(page, 'start', {
          relayAddrs: [relayWs],
          seedHex: toHex(bytesOf(32, 40 + i)),
        }),
        `start page ${i}`,
      );
      pages.push({ page, log, started });
    }
  }, 180_000);

  afterAll(async () => {
    for (const [i, p] of pages.entries()) {
      await runScenario(p.page, 'stop', {}).catch(() => undefined);
      await writeArtifact(`p2p/browser-webrtc-${i}.console.log`, p.log.dump());
    }
    await browser?.close();
    await ns?.close(); // stops the Node peer and the forwards
    await server?.close();
    await built?.cleanup();
    await relay?.stop();
  });

  it('a page and a Node peer upgrade to WebRTC and blobs then travel over it, both ways', async () => {
    const a = pages[0]!;
    expect(a.started.hasWebRTC).toBe(true);
    await runScenario(a.page, 'want', { peerIds: [nodePeer.peerId] });
    await nodePeer.send({ cmd: 'want', peerIds: [a.started.peerId] });
    await waitForLink(0, nodePeer.peerId);

    const got = value(
      await runScenario<Outcome<FetchedBlobResult>>(a.page, 'fetchFrom', {
        addressHex: nodePeer.address,
        peerId: nodePeer.peerId,
        timeoutMs: 20_000,
      }),
      'page fetches from the Node peer',
    );
    expect(unb64(got.b64).length).toBe(NODE_BLOB_BYTES);
    expect(toHex(blobAddress(unb64(got.b64)))).toBe(nodePeer.address);
    expect(got.limited).toBe(false);
    expect(got.remoteAddr).toContain('/webrtc');

    const bytes = bytesOf(512 * 1024, 77);
    const address = value(
      await runScenario<Outcome<string>>(a.page, 'putBlob', { b64: b64(bytes) }),
      'putBlob',
    );
    const fetched = await nodePeer.send({ cmd: 'fetch', peerId: a.started.peerId, address });
    expect(fetched).toMatchObject({ event: 'fetched', bytes: bytes.length, verified: true, limited: false });
    const links = await nodePeer.send({ cmd: 'links' });
    expect((links.links as Record<string, string>)[a.started.peerId]).toBe('webrtc');
  });

  it('two pages upgrade to WebRTC between themselves', async () => {
    const [a, b] = [pages[0]!, pages[1]!];
    await runScenario(a.page, 'want', { peerIds: [b.started.peerId] });
    await runScenario(b.page, 'want', { peerIds: [a.started.peerId] });
    await waitForLink(0, b.started.peerId);
    await waitForLink(1, a.started.peerId);
    const bytes = bytesOf(1024 * 1024, 78);
    const address = value(
      await runScenario<Outcome<string>>(a.page, 'putBlob', { b64: b64(bytes) }),
      'putBlob',
    );
    const got = value(
      await runScenario<Outcome<FetchedBlobResult>>(b.page, 'fetchFrom', {
        addressHex: address,
        peerId: a.started.peerId,
        timeoutMs: 20_000,
      }),
      'page b fetches from page a',
    );
    expect(sameBytes(unb64(got.b64), bytes)).toBe(true);
    expect(got.limited).toBe(false);
    // One link between the two: the page with the smaller PeerId dialled, the other one waited for it.
    const statsA = await runScenario<{ stats: { linked: number } }>(a.page, 'links', {});
    const statsB = await runScenario<{ stats: { linked: number } }>(b.page, 'links', {});
    expect(statsA.stats.linked + statsB.stats.linked).toBe(1);
  });

  it('a peer without RTCPeerConnection stays on the circuit: the upgrade fails, blobs still arrive', async () => {
    const [a, w] = [pages[0]!, pages[2]!];
    expect(w.started.hasWebRTC).toBe(false);
    await runScenario(a.page, 'want', { peerIds: [w.started.peerId] });
    const t0 = Date.now();
    let failed = 0;
    while (failed === 0 && Date.now() - t0 < 60_000) {
      failed = (await runScenario<{ stats: { failed: number } }>(a.page, 'links', {})).stats.failed;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(failed).toBeGreaterThan(0);
    const bytes = bytesOf(256 * 1024, 79);
    const address = value(
      await runScenario<Outcome<string>>(w.page, 'putBlob', { b64: b64(bytes) }),
      'putBlob',
    );
    const got = value(
      await runScenario<Outcome<FetchedBlobResult>>(a.page, 'fetchFrom', {
        addressHex: address,
        peerId: w.started.peerId,
        timeoutMs: 20_000,
      }),
      'page a fetches from the worker page',
    );
    expect(sameBytes(unb64(got.b64), bytes)).toBe(true);
    expect(got.limited).toBe(true);
    const links = await runScenario<{ links: Record<string, string> }>(a.page, 'links', {});
    expect(links.links[w.started.peerId]).toBe('relayed');
  }, 90_000);
});
