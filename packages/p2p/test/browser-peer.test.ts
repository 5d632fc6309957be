// `@meshtrain/p2p/browser` in real Chromium: the page (test/browser/page.ts, bundled with Vite exactly as the
// web app bundles the package) creates a browser peer against a real relay node and exchanges blobs and a
// pieced checkpoint with a real Node peer over the relay's circuit. Everything runs on 127.0.0.1: the browser
// reaches the relay by `ws://` (allowInsecureWs), and the two peers talk through `/p2p-circuit` (no WebRTC
// upgrade: ICE has no loopback candidates, see test/netns.test.ts for WebRTC between Node peers).
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Circuit, WebRTC, WebSockets } from '@multiformats/multiaddr-matcher';
import { multiaddr } from '@multiformats/multiaddr';
import {
  buildPage,
  collectConsole,
  launchChromium,
  openScenarioPage,
  runScenario,
  serveStatic,
  writeArtifact,
} from '../../../e2e/lib/index.ts';
import type { BuiltPage, ConsoleLog, LaunchedChromium, StaticServer } from '../../../e2e/lib/index.ts';
import { blobAddress, createNodePeer, createRelayNode, sameBytes, sha256Bytes, toHex } from '../src/index.ts';
import type { NodePeer, RelayNode } from '../src/index.ts';
import type { DownloadedResult, FetchedBlobResult, Outcome, StartResult } from './browser/protocol.ts';

const PAGE_ROOT = fileURLToPath(new URL('./browser/', import.meta.url));
const KiB = 1024;

/** Deterministic pseudo-random bytes (xorshift32). */
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

/** Rejects after `ms`, so a hang in the page or in libp2p is a failure with a name, not a test timeout. */
async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function value<T>(o: Outcome<T>, what: string): T {
  if (!o.ok)
    throw new Error(`${what} failed in the page: ${o.error.name} (${o.error.code}): ${o.error.message}`);
  return o.value;
}

let built: BuiltPage;
let server: StaticServer;
let browser: LaunchedChromium;
let relay: RelayNode;
let nodePeer: NodePeer;
let relayWs: string;

beforeAll(async () => {
  // The relay as apps/relay runs it in standalone mode: WebSockets on loopback, circuit-relay-v2 server.
  relay = await createRelayNode({ host: '127.0.0.1', webrtcDirect: false });
  const ws = relay.multiaddrs().find((m) => WebSockets.exactMatch(m));
  if (ws === undefined) throw new Error(`relay has no ws address: ${relay.multiaddrs().join(', ')}`);
  relayWs = ws.toString();
  nodePeer = await createNodePeer({ relayAddrs: [relayWs], host: '127.0.0.1', tcp: false });
  await nodePeer.circuitAddress(10_000);
  [built, browser] = await Promise.all([buildPage({ root: PAGE_ROOT }), launchChromium({ webgpu: false })]);
  server = await serveStatic({ root: built.outDir });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await built?.cleanup();
  await nodePeer?.stop();
  await relay?.stop();
});

// The same scenarios on the page's main thread and in a dedicated module worker (where the web app runs its
// peer: no RTCPeerConnection there, so WebRTC is unavailable, but WebSockets and the relay circuit are).
describe.each([
  { where: 'page', query: '', seed: 7 },
  { where: 'worker', query: '?worker', seed: 8 },
])('browser peer (@meshtrain/p2p/browser in Chromium, $where)', ({ where, query, seed }) => {
  let log: ConsoleLog;
  let page: Awaited<ReturnType<LaunchedChromium['newPage']>>;
  let started: StartResult;

  beforeAll(async () => {
    page = await browser.newPage();
    log = collectConsole(page);
    await openScenarioPage(page, `${server.url}/${query}`);
  }, 60_000);

  afterAll(async () => {
    if (page !== undefined) await runScenario(page, 'stop', {}).catch(() => undefined);
    if (log !== undefined) await writeArtifact(`p2p/browser-peer-${where}.console.log`, log.dump());
    await page?.close();
  });

  it('connects to the relay over ws:// and gets a /p2p-circuit address', async () => {
    const seedBytes = bytesOf(32, seed);
    started = value(
      await within(
        30_000,
        'start',
        runScenario<Outcome<StartResult>>(page, 'start', {
          relayAddrs: [relayWs],
          seedHex: toHex(seedBytes),
        }),
      ),
      'start',
    );
    const circuit = multiaddr(started.circuitAddress);
    expect(Circuit.matches(circuit)).toBe(true);
    expect(started.circuitAddress.startsWith(`${relayWs}/p2p-circuit`)).toBe(true);
    expect(started.circuitAddress.endsWith(`/p2p/${started.peerId}`)).toBe(true);
    expect(started.relayPeerIds).toEqual([relay.peerId]);
    // A window has WebRTC and advertises a /webrtc address once its circuit reservation exists; a
    // dedicated worker has no RTCPeerConnection and must advertise only its circuit address.
    expect(started.hasWebRTC).toBe(where === 'page');
    expect(started.multiaddrs.some((m) => WebRTC.matches(multiaddr(m)))).toBe(where === 'page');
    // The relay sees the browser; the browser reports no non-relay peer yet.
    expect(relay.libp2p.getConnections().some((c) => c.remotePeer.toString() === started.peerId)).toBe(true);
    expect(await runScenario<string[]>(page, 'connectedPeers', {})).toEqual([]);
  });

  it('a Node peer fetches a blob the browser put, through the relay circuit', async () => {
    const bytes = bytesOf(768 * KiB, 100 * seed + 11);
    const address = value(
      await within(10_000, 'putBlob', runScenario<Outcome<string>>(page, 'putBlob', { b64: b64(bytes) })),
      'putBlob',
    );
    expect(address).toBe(toHex(blobAddress(bytes)));
    const got = await within(
      30_000,
      'node fetchBlob',
      nodePeer.fetchBlob(blobAddress(bytes), nodePeer.viaRelays(started.peerId, { webrtc: false }), {
        timeoutMs: 20_000,
      }),
    );
    expect(sameBytes(got.bytes, bytes)).toBe(true);
    expect(got.peer).toBe(started.peerId);
    expect(got.limited).toBe(true);
    expect(await runScenario<string[]>(page, 'connectedPeers', {})).toEqual([nodePeer.peerId]);
  });

  it('the browser fetches a blob the Node peer put', async () => {
    const bytes = bytesOf(1024 * KiB, 100 * seed + 12);
    const address = await nodePeer.putBlob(bytes);
    const got = value(
      await within(
        30_000,
        'browser fetchBlob',
        runScenario<Outcome<FetchedBlobResult>>(page, 'fetchBlob', {
          addressHex: toHex(address),
          peerId: nodePeer.peerId,
          timeoutMs: 20_000,
        }),
      ),
      'fetchBlob',
    );
    expect(sameBytes(unb64(got.b64), bytes)).toBe(true);
    expect(got.limited).toBe(true);
    expect(Circuit.matches(multiaddr(got.remoteAddr))).toBe(true);
  });

  it('the browser downloads a pieced checkpoint by content hash from the Node peer', async () => {
    const bytes = bytesOf(1_100 * KiB, 100 * seed + 13); // 5 pieces of 256 KiB (the last one short)
    const root = nodePeer.shareCheckpoint(bytes, 256 * KiB);
    const contentHash = sha256Bytes(bytes);
    try {
      const got = value(
        await within(
          60_000,
          'browser downloadCheckpointByContent',
          runScenario<Outcome<DownloadedResult>>(page, 'downloadByContent', {
            contentHashHex: toHex(contentHash),
            peerId: nodePeer.peerId,
            pieceTimeoutMs: 20_000,
          }),
        ),
        'downloadByContent',
      );
      const received = unb64(got.b64);
      expect(received.length).toBe(bytes.length);
      expect(sameBytes(received, bytes)).toBe(true);
      expect(toHex(sha256Bytes(received))).toBe(toHex(contentHash));
      expect(got.contentHashHex).toBe(toHex(contentHash));
      expect(got.pieceCount).toBe(5);
      expect(Object.values(got.piecesByPeer).reduce((a, b) => a + b, 0)).toBe(5);
    } finally {
      nodePeer.checkpoints.unshare(root);
    }
  });

  it('an unknown blob or checkpoint hash fails fast with a typed error', async () => {
    const unknown = bytesOf(32, 99);
    const blob = await within(
      20_000,
      'unknown blob',
      runScenario<Outcome<FetchedBlobResult>>(page, 'fetchBlob', {
        addressHex: toHex(unknown),
        peerId: nodePeer.peerId,
        timeoutMs: 10_000,
      }),
    );
    expect(blob.ok).toBe(false);
    if (!blob.ok) {
      expect(blob.error.name).toBe('FetchFailedError');
      expect(blob.error.code).toBe('fetch-failed');
      expect(blob.error.causes).toEqual(['NotFoundError']);
      expect(blob.ms).toBeLessThan(10_000);
    }
    const ck = await within(
      20_000,
      'unknown checkpoint',
      runScenario<Outcome<DownloadedResult>>(page, 'downloadByContent', {
        contentHashHex: toHex(unknown),
        peerId: nodePeer.peerId,
        pieceTimeoutMs: 10_000,
      }),
    );
    expect(ck.ok).toBe(false);
    if (!ck.ok) {
      expect(ck.error.name).toBe('CheckpointDownloadError');
      expect(ck.error.code).toBe('checkpoint-download-failed');
      expect(ck.ms).toBeLessThan(10_000);
    }
  });
});
