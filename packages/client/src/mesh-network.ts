// The peer-to-peer path of every client, browser tab and node-trainer alike (packages/p2p): results as content-addressed blobs and end-of-epoch
// parameters as pieced checkpoints, fetched from the peers that hold them, with the relay as the fallback.
//
// Addressing needs no extra announcements, because both addresses are hashes every peer already knows:
//   - a result is stored as `tag ‖ TrainingResult frame`, whose SHA-256 (the blob address) is exactly the
//     result's commitment (core: commitment = SHA-256(tag ‖ frame)), which peers learn from the state's admitted results;
//   - parameters are shared as a checkpoint (packages/p2p's checkpoint protocol) of their float32 LE bytes in
//     sorted-name order, whose SHA-256 is exactly the run's parameter hash, which the relay reports per epoch.
//     Every peer cuts them into PARAM_PIECE_BYTES pieces, so all honest holders serve the same manifest; a
//     joiner looks that manifest up by the parameter hash (the manifest's contentHash) and pulls pieces from
//     every peer that has it at once, each piece verified against the manifest and the whole against the hash.
// Peers are found from the coordinator state (each client's libp2p PeerId). Every peer is reachable through
// the relay's circuit whenever the relay is; in the background the node upgrades the run's peers to direct
// WebRTC links (packages/p2p direct-links.ts, signalled over that circuit), and fetches take a peer's direct
// link once it exists, so result bytes leave the relay as peers connect. Blob fetches verify the address, so
// no peer can hand over anything but the requested bytes.
//
// Isomorphic: it takes an already started MeshNode (createNodePeer in node-trainer, createBrowserPeer in the
// tab: on the page's main thread, which has RTCPeerConnection, or in the training worker as a circuit-only
// fallback) and imports packages/p2p for types only, so no Node-only module enters a browser bundle.
import { parameterHash, parameterOrder } from '@meshtrain/model';
import {
  bytesToHex,
  decodeSignedResult,
  domainTag,
  encodeTrainingResult,
  hexToBytes,
  type Announce,
  type CoordinatorState,
} from '@meshtrain/core';
import type { MeshNode, PeerLink, PeerServices, PeerTarget } from '@meshtrain/p2p/browser';
import type { Checkpoint, CheckpointSource, PeerNetwork } from './interfaces.ts';
import { zeroTransferCounters, type MeshNetworkStats } from './mesh-stats.ts';
import { fetchCheckpointSummary, type RelayCheckpoints } from './relay-api/sources.ts';

/** What MeshNetwork runs on: the node either factory returns (NodePeer and BrowserPeer are both this type). */
export type MeshPeer = MeshNode<PeerServices>;

const COMMITMENT_TAG = domainTag('meshtrain/v1/result-commitment');

/**
 * Piece size of shared parameters. Fixed for the whole network: the manifest, and so its root, depends on it,
 * and peers can only serve pieces of one checkpoint together when they cut it the same way. 256 KiB rather
 * than the package's 1 MiB default so that small models (the micro preset is ~400 KB) still split into
 * pieces that several peers can serve at once; a 1 GB model is then ~4,000 pieces and a 128 KiB manifest.
 */
export const PARAM_PIECE_BYTES = 256 * 1024;

/** Peers one shared-blob fetch asks (each answers NOT_FOUND at once when it lacks the blob), and its limits. */
export const BLOB_FANOUT = 3;
const BLOB_TIMEOUT_MS = 2_000;
/** An admitted list is 33 B per result plus a header: 16 MiB is far above any run the wire limits allow. */
const MAX_SHARED_BLOB_BYTES = 16 * 1024 * 1024;

/** Which libp2p peer belongs to which client: what MeshNetwork needs of the coordinator state. */
export interface PeerDirectory {
  /** The epoch's clients (its committee), then the run's other members. */
  epochClients: readonly { id: string; p2p_id: string }[];
  members: readonly { id: string; p2p_id: string }[];
}

export function peerDirectoryOf(state: CoordinatorState): PeerDirectory {
  const pick = (c: { id: string; p2p_id: string }) => ({ id: c.id, p2p_id: c.p2p_id });
  return { epochClients: state.epoch.clients.map(pick), members: state.members.map(pick) };
}

/** Parameters by their hash from peers: what peerFirstCheckpoints needs of a network. */
export interface PeerParams {
  fetchParams(
    paramHash: Uint8Array,
    sizes: ReadonlyMap<string, number>,
  ): Promise<Map<string, Float32Array> | null>;
}

export class MeshNetwork implements PeerNetwork, PeerParams {
  readonly node: MeshPeer;
  readonly stats: MeshNetworkStats;
  private peers: PeerDirectory | null = null;
  private readonly log: (line: string) => void;
  /** Checkpoint roots of the parameters this peer shares, newest last; older ones are unshared. */
  private shared: Uint8Array[] = [];

  /**
   * `node` must be started and connected to the run's relay(s) (the factories do both); MeshNetwork never
   * stops it before `stop()`.
   */
  constructor(node: MeshPeer, log: (line: string) => void = () => {}) {
    this.node = node;
    this.log = log;
    const count = (link: PeerLink) => [...node.peerLinks().values()].filter((l) => l === link).length;
    this.stats = {
      get peersConnected() {
        return node.connectedPeers().length;
      },
      get peersWebRTC() {
        return count('webrtc');
      },
      get peersRelayed() {
        return count('relayed');
      },
      ...zeroTransferCounters(),
    };
    node.directLinks.onEvent((e) =>
      log(
        e.type === 'linked'
          ? `p2p: direct WebRTC link to ${e.peer} (${e.ms} ms)`
          : `p2p: no direct link to ${e.peer} (${e.error}); the relay's circuit carries its data, ` +
              `next try in ${Math.round(e.retryInMs / 1000)} s`,
      ),
    );
  }

  /** This node's PeerId (what the client announces in its Join). */
  get peerId(): string {
    return this.node.peerId;
  }

  /** Follow the coordinator: it says which PeerIds belong to which clients. */
  setState(state: CoordinatorState): void {
    this.setPeers(peerDirectoryOf(state));
  }

  /**
   * The run's peers (from the coordinator state, or from a page that follows it for this node): fetches ask
   * them, and the node keeps direct WebRTC links to them, the epoch's clients first.
   */
  setPeers(peers: PeerDirectory): void {
    this.peers = peers;
    const self = this.node.peerId;
    const ids = [...peers.epochClients, ...peers.members].map((c) => c.p2p_id);
    this.node.directLinks.want(ids.filter((p) => p !== '' && p !== self));
  }

  /** How each connected peer is reached now (direct WebRTC, other direct, or through the relay). */
  peerLinks(): Record<string, PeerLink> {
    return Object.fromEntries(this.node.peerLinks());
  }

  /** Routes to the given clients' peers (others of the epoch after them), never our own. */
  private targets(clientIds: readonly string[]): PeerTarget[] {
    const d = this.peers;
    if (!d) return [];
    const self = this.node.peerId;
    const byId = new Map<string, string>();
    for (const c of [...d.epochClients, ...d.members]) byId.set(c.id, c.p2p_id);
    const order = [...clientIds, ...d.epochClients.map((c) => c.id)];
    const peers = [...new Set(order.map((id) => byId.get(id)).filter((p): p is string => !!p && p !== self))];
    return this.routes(peers);
  }

  /**
   * Routes to every other peer of the run (members, then the epoch's clients): a joiner's parameter
   * download asks all of them at once, and those without the checkpoint just answer NOT_FOUND.
   */
  private runPeers(): PeerTarget[] {
    const d = this.peers;
    if (!d) return [];
    const self = this.node.peerId;
    const ids = [...d.members, ...d.epochClients].map((c) => c.p2p_id).filter((p) => !!p && p !== self);
    return this.routes([...new Set(ids)]);
  }

  /** A peer's direct connection when there is one, else its circuit address through our relay. */
  private routes(peerIds: readonly string[]): PeerTarget[] {
    return peerIds.map((p) => this.node.routeTo(p)).filter((t): t is PeerTarget => t !== undefined);
  }

  async publish(_announce: Announce, signedResultFrame: Uint8Array): Promise<void> {
    const frame = encodeTrainingResult(decodeSignedResult(signedResultFrame).result);
    const blob = new Uint8Array(COMMITMENT_TAG.length + frame.length);
    blob.set(COMMITMENT_TAG);
    blob.set(frame, COMMITMENT_TAG.length);
    await this.node.putBlob(blob);
  }

  async fetch(commitment: Uint8Array, hintClientIds: readonly string[]): Promise<Uint8Array | null> {
    const targets = this.targets(hintClientIds).slice(0, 3);
    if (targets.length === 0) return null;
    try {
      const got = await this.node.fetchBlob(commitment, targets, {
        timeoutMs: 3_000,
        maxBytes: 64 * 1024 * 1024,
      });
      this.stats.resultsFromPeers++;
      this.stats.bytesFromPeers += got.bytes.length;
      if (got.peer !== 'local') {
        if (got.limited) {
          this.stats.resultsRelayed++;
          this.stats.bytesRelayed += got.bytes.length;
        } else {
          this.stats.resultsDirect++;
          this.stats.bytesDirect += got.bytes.length;
        }
      }
      return got.bytes.subarray(COMMITMENT_TAG.length);
    } catch {
      return null;
    }
  }

  async shareBlob(bytes: Uint8Array): Promise<void> {
    await this.node.putBlob(bytes);
  }

  /**
   * A blob by its SHA-256 from BLOB_FANOUT of the run's peers picked at random, so that the peers a whole
   * run asks for the same blob at once share the load; null when none delivers.
   */
  async fetchBlob(address: Uint8Array): Promise<Uint8Array | null> {
    const peers = this.runPeers();
    for (let i = peers.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [peers[i], peers[j]] = [peers[j] as PeerTarget, peers[i] as PeerTarget];
    }
    try {
      const got = await this.node.fetchBlob(address, peers.slice(0, BLOB_FANOUT), {
        timeoutMs: BLOB_TIMEOUT_MS,
        maxBytes: MAX_SHARED_BLOB_BYTES,
      });
      return got.bytes;
    } catch {
      return null;
    }
  }

  async shareCheckpoint(ck: Checkpoint): Promise<void> {
    const names = parameterOrder(ck.params.keys());
    let n = 0;
    for (const name of names) n += (ck.params.get(name) as Float32Array).byteLength;
    const blob = new Uint8Array(n);
    let o = 0;
    for (const name of names) {
      const t = ck.params.get(name) as Float32Array;
      blob.set(new Uint8Array(t.buffer, t.byteOffset, t.byteLength), o);
      o += t.byteLength;
    }
    const root = this.shareParams(blob);
    const contentHash = this.node.checkpoints.manifestOf(root)?.contentHash;
    if (contentHash !== undefined && bytesToHex(contentHash) !== bytesToHex(ck.paramHash))
      this.log(`p2p: shared parameters hash to ${bytesToHex(contentHash)}, not ${bytesToHex(ck.paramHash)}`);
  }

  /** Serves `bytes` (parameters in wire order) as a checkpoint; returns its root. */
  private shareParams(bytes: Uint8Array): Uint8Array {
    const root = this.node.shareCheckpoint(bytes, PARAM_PIECE_BYTES);
    if (this.shared.some((r) => bytesToHex(r) === bytesToHex(root))) return root;
    this.shared.push(root);
    // Keep the two newest epochs: a joiner asks for the latest, a slow one for the one before.
    while (this.shared.length > 2) this.node.checkpoints.unshare(this.shared.shift() as Uint8Array);
    return root;
  }

  /**
   * Parameters whose hash is `paramHash`, pieces pulled from every peer of the run that holds them at once;
   * null if the peers could not deliver them all (the caller then falls back to the relay).
   */
  async fetchParams(
    paramHash: Uint8Array,
    sizes: ReadonlyMap<string, number>,
  ): Promise<Map<string, Float32Array> | null> {
    const targets = this.runPeers();
    if (targets.length === 0) return null;
    let bytes: Uint8Array;
    try {
      const got = await this.node.downloadCheckpointByContent(paramHash, targets, {
        maxBytes: 4 * 1024 ** 3,
        pieceTimeoutMs: 30_000,
      });
      bytes = got.bytes;
      const contributors = [...got.piecesByPeer.values()].filter((n) => n > 0).length;
      this.stats.lastParamsPeers = contributors;
      this.stats.paramBytesFromPeers += bytes.length;
      this.log(
        `p2p: parameters ${bytesToHex(paramHash).slice(0, 16)}… (${got.manifest.pieceHashes.length} pieces) ` +
          `from ${contributors} of ${targets.length} peers` +
          (got.failures.length > 0
            ? `; ${got.failures.length} requests failed (peer without it, or retried)`
            : ''),
      );
    } catch (e) {
      this.log(
        `p2p: parameters ${bytesToHex(paramHash).slice(0, 16)}… not available from peers: ${(e as Error).message}`,
      );
      return null;
    }
    const out = new Map<string, Float32Array>();
    let o = 0;
    for (const name of parameterOrder(sizes.keys())) {
      const count = sizes.get(name) as number;
      if (o + 4 * count > bytes.length) return null;
      out.set(name, new Float32Array(bytes.slice(o, o + 4 * count).buffer));
      o += 4 * count;
    }
    if (o !== bytes.length) return null;
    // Verified against the parameter hash: serve them on at once, so the next joiner has one more source
    // (until this peer finishes an epoch of its own, it holds nothing else to share).
    this.shareParams(bytes);
    this.stats.paramsFromPeers++;
    return out;
  }

  async stop(): Promise<void> {
    await this.node.stop();
  }
}

/**
 * Checkpoints from peers first: the relay says which parameter hash the step has (a small JSON answer),
 * peers deliver the bytes with that hash; the relay's files are the fallback (for the summary already fetched).
 */
export function peerFirstCheckpoints(o: {
  relay: RelayCheckpoints;
  relayUrl: string;
  runId: string;
  network: PeerParams | null;
  sizes: ReadonlyMap<string, number>;
  log?: (line: string) => void;
}): CheckpointSource {
  const source: CheckpointSource = {
    async load(step) {
      if (!o.network) return withVia(await o.relay.load(step));
      // undefined: the summary could not be read; the relay's own load asks again and reports why.
      const summary = await fetchCheckpointSummary(o.relayUrl, o.runId, step).catch(() => undefined);
      if (summary === undefined) return withVia(await o.relay.load(step));
      if (summary === null) return null;
      let hash: Uint8Array | null = null;
      try {
        hash = hexToBytes(summary.paramHash, 32);
      } catch {
        o.log?.(`the relay's parameter hash for step ${step} is not 32 bytes of hex; using its files`);
      }
      const params = hash ? await o.network.fetchParams(hash, o.sizes) : null;
      if (hash && params && bytesToHex(parameterHash(params)) === summary.paramHash) {
        o.log?.(`loaded the parameters of step ${step} from peers (hash ${summary.paramHash.slice(0, 16)}…)`);
        return {
          step: summary.step,
          epoch: summary.epoch,
          paramHash: hash,
          params,
          via: 'peers',
          ...(summary.rolledBackFrom !== undefined ? { rolledBackFrom: summary.rolledBackFrom } : {}),
        };
      }
      return withVia(await o.relay.loadSummary(summary));
    },
  };
  if (o.relay.upload) source.upload = (ck) => (o.relay.upload as (c: Checkpoint) => Promise<void>)(ck);
  if (o.relay.has) source.has = (step) => (o.relay.has as (s: number) => Promise<boolean>)(step);
  return source;
}

function withVia(ck: Checkpoint | null): Checkpoint | null {
  return ck ? { ...ck, via: 'relay' } : null;
}
