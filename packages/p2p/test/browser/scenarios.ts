// Scenarios of packages/p2p/test/browser-peer.test.ts: a real libp2p browser peer (`@meshtrain/p2p/browser`)
// talking to a relay and a Node peer started by the test. They run in the page itself (page.ts) and in a
// dedicated module worker (worker.ts, where the web app runs its peer). Every scenario returns its outcome as
// data (typed errors included) so the Node side asserts on names and codes.
import { createBrowserPeer, hasWebRTC, toHex } from '@meshtrain/p2p/browser';
import type { BrowserPeer } from '@meshtrain/p2p/browser';
import { toBase64 } from '../../../../e2e/lib/page-runtime.ts';
import type {
  DownloadedResult,
  FetchedBlobResult,
  Outcome,
  PageError,
  StartArgs,
  StartResult,
} from './protocol.ts';

let peer: BrowserPeer | undefined;

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function fromBase64(b64: string): Uint8Array {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function asPageError(err: unknown): PageError {
  const e = err as { name?: string; code?: unknown; message?: string; failures?: unknown[] };
  const causes = (e.failures ?? []).map((f) => {
    const x = f as { error?: { name?: string }; name?: string };
    return x.error?.name ?? x.name ?? String(f);
  });
  return {
    name: e.name ?? typeof err,
    code: typeof e.code === 'string' ? e.code : null,
    message: e.message ?? String(err),
    causes,
  };
}

async function outcome<T>(run: () => Promise<T>): Promise<Outcome<T>> {
  const t0 = performance.now();
  try {
    const value = await run();
    return { ok: true, value, ms: performance.now() - t0 };
  } catch (err) {
    return { ok: false, error: asPageError(err), ms: performance.now() - t0 };
  }
}

function need(): BrowserPeer {
  if (peer === undefined) throw new Error('start first');
  return peer;
}

/** Plain circuit addresses (no WebRTC upgrade): loopback-only tests have no usable ICE candidates. */
function circuitTo(peerId: string) {
  return need().viaRelays(peerId, { webrtc: false });
}

export const scenarios = {
  start: async (args: StartArgs): Promise<Outcome<StartResult>> =>
    await outcome(async () => {
      peer = await createBrowserPeer({
        relayAddrs: args.relayAddrs,
        allowInsecureWs: true,
        privateKeySeed: hexBytes(args.seedHex),
        relayDialTimeoutMs: 10_000,
      });
      const circuit = await peer.circuitAddress(15_000);
      if (hasWebRTC()) await peer.webrtcAddress(10_000);
      return {
        peerId: peer.peerId,
        circuitAddress: circuit.toString(),
        relayPeerIds: peer.relayPeerIds(),
        multiaddrs: peer.multiaddrs().map((m) => m.toString()),
        hasWebRTC: hasWebRTC(),
      };
    }),

  putBlob: async (args: { b64: string }): Promise<Outcome<string>> =>
    await outcome(async () => toHex(await need().putBlob(fromBase64(args.b64)))),

  fetchBlob: async (args: {
    addressHex: string;
    peerId: string;
    timeoutMs: number;
  }): Promise<Outcome<FetchedBlobResult>> =>
    await outcome(async () => {
      const got = await need().fetchBlob(hexBytes(args.addressHex), circuitTo(args.peerId), {
        timeoutMs: args.timeoutMs,
      });
      return { b64: toBase64(got.bytes), limited: got.limited, remoteAddr: got.remoteAddr };
    }),

  downloadByContent: async (args: {
    contentHashHex: string;
    peerId: string;
    pieceTimeoutMs: number;
  }): Promise<Outcome<DownloadedResult>> =>
    await outcome(async () => {
      const got = await need().downloadCheckpointByContent(
        hexBytes(args.contentHashHex),
        circuitTo(args.peerId),
        {
          pieceTimeoutMs: args.pieceTimeoutMs,
        },
      );
      const piecesByPeer: Record<string, number> = {};
      for (const [p, n] of got.piecesByPeer) piecesByPeer[String(p)] = n;
      return {
        b64: toBase64(got.bytes),
        contentHashHex: toHex(got.manifest.contentHash),
        pieceCount: got.manifest.pieceHashes.length,
        piecesByPeer,
      };
    }),

  connectedPeers: async (): Promise<string[]> => await Promise.resolve(need().connectedPeers()),

  /** Keep direct (WebRTC) links to these peers (browser-webrtc.test.ts). */
  want: async (args: { peerIds: string[] }): Promise<void> => {
    need().directLinks.want(args.peerIds);
    await Promise.resolve();
  },

  /** How each connected peer is reached, and the direct-link dial counters. */
  links: async (): Promise<{
    links: Record<string, string>;
    stats: { dials: number; linked: number; failed: number };
  }> =>
    await Promise.resolve({
      links: Object.fromEntries(need().peerLinks()),
      stats: { ...need().directLinks.stats },
    }),

  /** Fetches a blob from `peerId` the way MeshNetwork does: over its direct link if any, else the circuit. */
  fetchFrom: async (args: {
    addressHex: string;
    peerId: string;
    timeoutMs: number;
  }): Promise<Outcome<FetchedBlobResult>> =>
    await outcome(async () => {
      const route = need().routeTo(args.peerId);
      if (route === undefined) throw new Error(`no route to ${args.peerId}`);
      const got = await need().fetchBlob(hexBytes(args.addressHex), [route], { timeoutMs: args.timeoutMs });
      return { b64: toBase64(got.bytes), limited: got.limited, remoteAddr: got.remoteAddr };
    }),

  stop: async (): Promise<void> => {
    await peer?.stop();
    peer = undefined;
  },
};
