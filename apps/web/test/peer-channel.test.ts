// The peer channel between the training worker and the page: the worker's PeerNetwork proxy (page-peer.ts)
// and the page's host (lib/peer-host.ts) over a real MessageChannel, with real libp2p peers behind the host
// (Node peers on a loopback relay, circuit only: the browser transports are tested in packages/p2p), plus the
// checks both ends apply to what they receive (peer-messages.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MeshNetwork } from '@meshtrain/client';
import {
  bytesToHex,
  encodeSignedResult,
  encodeTrainingResult,
  identityFromSeed,
  signAnnounce,
  sha256,
  signResult,
} from '@meshtrain/core';
import type { CoordinatorState, TrainingResult } from '@meshtrain/core';
import { parameterHash } from '@meshtrain/model';
import { createNodePeer, createRelayNode } from '@meshtrain/p2p';
import type { NodePeer, RelayNode } from '@meshtrain/p2p';
import { hostPeerNetwork } from '../src/lib/peer-host.ts';
import type { HostedNetwork, PeerHost } from '../src/lib/peer-host.ts';
import { PagePeerNetwork } from '../src/worker/page-peer.ts';
import {
  MAX_BLOB_BYTES,
  MAX_FRAME_BYTES,
  parseHostReply,
  parseHostRequest,
} from '../src/worker/peer-messages.ts';

const alice = identityFromSeed(new Uint8Array(32).fill(1));
const bob = identityFromSeed(new Uint8Array(32).fill(2));
const aliceId = bytesToHex(alice.publicKey);
const bobId = bytesToHex(bob.publicKey);

let relay: RelayNode;
let a: NodePeer;
let b: NodePeer;

beforeAll(async () => {
  relay = await createRelayNode({ host: '127.0.0.1', webrtcDirect: false });
  const relayAddrs = relay.multiaddrs().map((m) => m.toString());
  // Loopback, no WebRTC: the relay's circuit carries everything.
  [a, b] = await Promise.all([
    createNodePeer({ relayAddrs, host: '127.0.0.1', tcp: false, webrtc: false }),
    createNodePeer({ relayAddrs, host: '127.0.0.1', tcp: false, webrtc: false }),
  ]);
  await Promise.all([a.circuitAddress(10_000), b.circuitAddress(10_000)]);
}, 60_000);

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await relay?.stop();
});

function stateWith(peers: Record<string, string>): CoordinatorState {
  const members = Object.entries(peers).map(([id, p2p_id]) => ({ id, p2p_id }));
  return { members, epoch: { clients: members } } as unknown as CoordinatorState;
}

function signedResult(secretKey: Uint8Array, step: number) {
  const result: TrainingResult = {
    runId: 'unit',
    step,
    batch: { start: step * 10, end: step * 10 + 3 },
    trainerNonce: 1,
    tensors: [],
  };
  const envelope = signResult(secretKey, result);
  const frame = encodeSignedResult({ envelope, result });
  const announce = signAnnounce(secretKey, {
    runId: 'unit',
    step,
    batch: result.batch,
    commitment: envelope.commitment,
    size: encodeTrainingResult(result).length,
  });
  return { frame, announce, commitment: envelope.commitment, trainingFrame: encodeTrainingResult(result) };
}

async function until<T>(what: string, f: () => T | undefined, ms = 10_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('peer channel: worker proxy ⇄ page host', () => {
  it('forwards results and parameters both ways through the page peer, and reports its stats', async () => {
    const pageNet = new MeshNetwork(a);
    const other = new MeshNetwork(b);
    const lines: string[] = [];
    const { port1, port2 } = new MessageChannel();
    let startedWith: readonly string[] = [];
    const host: PeerHost = hostPeerNetwork(port1, {
      relayUrl: 'http://127.0.0.1:9',
      secretKey: alice.secretKey,
      log: (l) => lines.push(l),
      statsIntervalMs: 20,
      hasWebRTC: () => true,
      start: async (o) => {
        startedWith = o.announced;
        return pageNet;
      },
    });
    const opened = await PagePeerNetwork.open(port2, ['/ip4/127.0.0.1/tcp/9/ws'], (l) => lines.push(l));
    if (!opened.ok) throw new Error(opened.reason);
    const proxy = opened.network;
    expect(proxy.host).toBe('page');
    expect(proxy.peerId).toBe(a.peerId);
    expect(startedWith).toEqual(['/ip4/127.0.0.1/tcp/9/ws']);

    const state = stateWith({ [aliceId]: a.peerId, [bobId]: b.peerId });
    // Messages on a port arrive in order: the page has the directory before any request below.
    proxy.setState(state);
    other.setState(state);

    // The worker publishes through the page; another peer fetches the result from the page's peer.
    const mine = signedResult(alice.secretKey, 3);
    await proxy.publish(mine.announce, mine.frame);
    expect(mine.frame.byteLength).toBeGreaterThan(0); // copied, not transferred: the client still uses it
    const atOther = await other.fetch(mine.commitment, [aliceId]);
    expect(atOther && bytesToHex(atOther)).toBe(bytesToHex(mine.trainingFrame));

    // Another peer's result, fetched by the worker through the page's peer (over the relay's circuit).
    const theirs = signedResult(bob.secretKey, 4);
    await other.publish(theirs.announce, theirs.frame);
    const atWorker = await proxy.fetch(theirs.commitment, [bobId]);
    expect(atWorker && bytesToHex(atWorker)).toBe(bytesToHex(theirs.trainingFrame));
    const stats = await until('stats with the fetch', () => {
      const s = proxy.stats();
      return s.resultsFromPeers === 1 ? s : undefined;
    });
    expect(stats).toMatchObject({ resultsRelayed: 1, resultsDirect: 0, bytesDirect: 0, peersRelayed: 1 });
    expect(stats.bytesRelayed).toBe(stats.bytesFromPeers);
    expect(stats.bytesRelayed).toBeGreaterThan(theirs.trainingFrame.length);
    // Unknown commitments are null, not an error.
    expect(await proxy.fetch(new Uint8Array(32).fill(9), [bobId])).toBeNull();

    // Parameters: shared by the worker (through the page), fetched by the other peer, and the reverse.
    const params = new Map<string, Float32Array>([
      ['w', Float32Array.from({ length: 70_000 }, (_, i) => Math.cos(i))],
      ['b', Float32Array.from({ length: 33 }, (_, i) => i)],
    ]);
    const sizes = new Map([...params].map(([k, v]) => [k, v.length] as const));
    const paramHash = parameterHash(params);
    await proxy.shareCheckpoint({ step: 5, epoch: 1, paramHash, params });
    const atOtherParams = await other.fetchParams(paramHash, sizes);
    expect(atOtherParams && parameterHash(atOtherParams)).toEqual(paramHash);

    const params2 = new Map([...params].map(([k, v]) => [k, v.map((x) => x * 2)] as const));
    const hash2 = parameterHash(params2);
    await other.shareCheckpoint({ step: 9, epoch: 2, paramHash: hash2, params: params2 });
    const atWorkerParams = await proxy.fetchParams(hash2, sizes);
    expect(atWorkerParams && parameterHash(atWorkerParams)).toEqual(hash2);
    expect(await proxy.fetchParams(new Uint8Array(32).fill(3), sizes)).toBeNull();

    // Shared blobs (admitted lists): served by the worker through the page, fetched by the other peer by
    // their SHA-256, and the reverse; an address nobody serves is null.
    const list = Uint8Array.from({ length: 3_000 }, (_, i) => (i * 7) & 0xff);
    await proxy.shareBlob(list);
    const atOtherBlob = await other.fetchBlob(sha256(list));
    expect(atOtherBlob && bytesToHex(atOtherBlob)).toBe(bytesToHex(list));
    const list2 = list.map((x) => x ^ 0x5a);
    await other.shareBlob(list2);
    const atWorkerBlob = await proxy.fetchBlob(sha256(list2));
    expect(atWorkerBlob && bytesToHex(atWorkerBlob)).toBe(bytesToHex(list2));
    expect(await proxy.fetchBlob(new Uint8Array(32).fill(4))).toBeNull();

    // A malformed message is dropped by each end, with a log line, and the channel goes on working.
    port2.postMessage({ type: 'fetch', id: 1, commitment: new ArrayBuffer(31), hints: [] });
    await until('the page to drop it', () => (lines.some((l) => l.includes('dropped')) ? true : undefined));
    expect(await proxy.fetch(theirs.commitment, [bobId])).not.toBeNull();

    await proxy.stop();
    await until('the page peer to stop', () => (host.network() === null ? true : undefined));
    expect(await proxy.fetch(theirs.commitment, [bobId])).toBeNull();
  });

  it('tells the worker to start its own peer when the page has no RTCPeerConnection', async () => {
    const { port1, port2 } = new MessageChannel();
    const host = hostPeerNetwork(port1, {
      relayUrl: 'http://127.0.0.1:9',
      secretKey: alice.secretKey,
      log: () => {},
      hasWebRTC: () => false,
      start: () => Promise.reject(new Error('must not start')),
    });
    const opened = await PagePeerNetwork.open(port2, ['/ip4/127.0.0.1/tcp/9/ws'], () => {});
    expect(opened).toMatchObject({ ok: false, fallback: true });
    await host.stop();
  });

  it('says there is no peer (and no fallback) when the page could not reach libp2p', async () => {
    const { port1, port2 } = new MessageChannel();
    const host = hostPeerNetwork(port1, {
      relayUrl: 'http://127.0.0.1:9',
      secretKey: alice.secretKey,
      log: () => {},
      hasWebRTC: () => true,
      start: async (): Promise<HostedNetwork | null> => null,
    });
    const opened = await PagePeerNetwork.open(port2, ['/ip4/127.0.0.1/tcp/9/ws'], () => {});
    expect(opened).toMatchObject({ ok: false, fallback: false });
    await host.stop();
  });
});

describe('peer channel messages', () => {
  const hash = () => new ArrayBuffer(32);
  it('accepts well-formed requests and refuses malformed or oversized ones', () => {
    expect(parseHostRequest({ type: 'fetch', id: 1, commitment: hash(), hints: [aliceId] })).not.toBeNull();
    expect(parseHostRequest({ type: 'fetch', id: 1, commitment: new ArrayBuffer(33), hints: [] })).toBeNull();
    expect(parseHostRequest({ type: 'fetch', id: -1, commitment: hash(), hints: [] })).toBeNull();
    expect(parseHostRequest({ type: 'fetch', id: 1, commitment: hash(), hints: ['nothex'] })).toBeNull();
    expect(parseHostRequest({ type: 'open', announced: Array(17).fill('/ip4/1.2.3.4') })).toBeNull();
    expect(parseHostRequest({ type: 'nope' })).toBeNull();
    expect(parseHostRequest({ type: 'fetchBlob', id: 4, address: hash() })).not.toBeNull();
    expect(parseHostRequest({ type: 'fetchBlob', id: 4, address: new ArrayBuffer(31) })).toBeNull();
    expect(parseHostRequest({ type: 'shareBlob', id: 5, bytes: new ArrayBuffer(100) })).not.toBeNull();
    expect(
      parseHostRequest({ type: 'shareBlob', id: 5, bytes: new ArrayBuffer(MAX_BLOB_BYTES + 1) }),
    ).toBeNull();
    expect(parseHostRequest({ type: 'shareBlob', id: 5, bytes: 'text' })).toBeNull();
    expect(parseHostRequest(null)).toBeNull();
    expect(
      parseHostRequest({ type: 'publish', id: 2, announce: new ArrayBuffer(10), frame: new ArrayBuffer(10) }),
    ).not.toBeNull();
    expect(
      parseHostRequest({
        type: 'publish',
        id: 2,
        announce: new ArrayBuffer(10),
        frame: new ArrayBuffer(MAX_FRAME_BYTES + 1),
      }),
    ).toBeNull();
    expect(
      parseHostRequest({ type: 'fetchParams', id: 3, paramHash: hash(), sizes: [['w', 4]] }),
    ).not.toBeNull();
    const dup = [
      ['w', 4],
      ['w', 4],
    ];
    expect(parseHostRequest({ type: 'fetchParams', id: 3, paramHash: hash(), sizes: dup })).toBeNull();
    expect(
      parseHostRequest({ type: 'fetchParams', id: 3, paramHash: hash(), sizes: [['w', 2 ** 30]] }),
    ).toBeNull();
    expect(
      parseHostRequest({ type: 'fetchParams', id: 3, paramHash: hash(), sizes: [['w', 1.5]] }),
    ).toBeNull();
    const share = {
      type: 'shareCheckpoint',
      id: 4,
      step: 1,
      epoch: 0,
      paramHash: hash(),
      names: ['a', 'b'],
      lengths: [2, 3],
      params: new ArrayBuffer(20),
    };
    expect(parseHostRequest(share)).not.toBeNull();
    expect(parseHostRequest({ ...share, params: new ArrayBuffer(16) })).toBeNull();
    expect(parseHostRequest({ ...share, lengths: [2] })).toBeNull();
    const peers = {
      type: 'peers',
      directory: { epochClients: [{ id: aliceId, p2p_id: '12D3Koo' }], members: [] },
    };
    expect(parseHostRequest(peers)).not.toBeNull();
    expect(
      parseHostRequest({
        type: 'peers',
        directory: { epochClients: [{ id: 'x', p2p_id: '' }], members: [] },
      }),
    ).toBeNull();
    expect(
      parseHostRequest({
        type: 'peers',
        directory: { epochClients: [{ id: aliceId, p2p_id: '/ip4/evil' }], members: [] },
      }),
    ).toBeNull();
  });

  it('accepts well-formed replies and refuses malformed ones', () => {
    const stats = {
      peersConnected: 2,
      peersWebRTC: 2,
      peersRelayed: 0,
      webrtcPeers: ['12D3KooWA', '12D3KooWB'],
      resultsFromPeers: 3,
      bytesFromPeers: 300,
      resultsDirect: 3,
      bytesDirect: 300,
      resultsRelayed: 0,
      bytesRelayed: 0,
      paramsFromPeers: 0,
      lastParamsPeers: 0,
      paramBytesFromPeers: 0,
    };
    expect(parseHostReply({ type: 'stats', stats })).toEqual({ type: 'stats', stats });
    expect(parseHostReply({ type: 'stats', stats: { ...stats, bytesDirect: Number.NaN } })).toBeNull();
    expect(parseHostReply({ type: 'stats', stats: { ...stats, peersWebRTC: -1 } })).toBeNull();
    expect(
      parseHostReply({ type: 'stats', stats: { ...stats, webrtcPeers: Array(65).fill('p') } }),
    ).toBeNull();
    expect(parseHostReply({ type: 'opened', peerId: '12D3KooWA' })).not.toBeNull();
    expect(parseHostReply({ type: 'opened', peerId: 'a b' })).toBeNull();
    expect(parseHostReply({ type: 'reply', id: 1, bytes: null })).toEqual({
      type: 'reply',
      id: 1,
      bytes: null,
    });
    expect(parseHostReply({ type: 'reply', id: 1, bytes: 'x' })).toBeNull();
    expect(parseHostReply({ type: 'reply', id: 1 })).toBeNull();
    expect(parseHostReply({ type: 'announce', announce: new ArrayBuffer(5000) })).toBeNull();
    expect(parseHostReply({ type: 'unavailable', reason: 'x'.repeat(2000), fallback: true })).toMatchObject({
      reason: 'x'.repeat(500),
    });
  });
});
