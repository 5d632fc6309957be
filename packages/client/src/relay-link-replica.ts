// The relay link's replica of the coordinator state. The relay sends the run's state once after the Join
// (StateSnapshot), then only the transitions it applies (StateDelta; LightDelta for a light replica, which
// holds the state's summary). Core's Follower replays them and judges the relay's state hashes; this shell
// hands on a full CoordinatorState per frame, as if the relay had sent it, hashes states (natively where it
// can) and sends the requests: a gap (a delta that starts past its seq) or a replica that does not fit the
// deltas or hashes differently makes it ask for the missing frames or a snapshot (ResyncRequest, which also
// reports a mismatch to the relay).
//
// Admitted lists travel peer to peer. Every replica serves the lists of the closed rounds it holds to its
// peers as blobs addressed by the round's `admitted_list` (a full replica from its state, a light one once it
// fetched them). A light replica asks a few random peers for each new list, and the relay only as a fallback:
// at a round's end nobody but the relay has the list yet, so about LIST_SEEDS replicas of the run, drawn by
// chance, go to the relay at once and seed it; the rest retry peers for up to LIST_PEER_WINDOW_MS while it
// spreads (each wave reaches about BLOB_FANOUT + 1 times as many), then fall back to the relay. The relay
// serves a handful of lists per round whatever the run's size.
import {
  bytesToHex,
  canonicalStateBytes,
  checkAdmittedList,
  encodeResyncRequest,
  Follower,
  heldAdmittedLists,
  hexToBytes,
  hydrateState,
  listAddresses,
  missingAdmittedLists,
  stateHash,
  type AdmittedList,
  type AdmittedListRef,
  type CoordinatorState,
  type FollowStep,
  type LightDelta,
  type ResyncReason,
  type StateDelta,
  type StateSnapshot,
} from '@meshtrain/core';
import type { BlobPeers } from './interfaces.ts';
import { RelayRefusal } from './relay-link-requests.ts';

/** After the relay answered `resync_too_soon`, ask again this much later. */
export const RESYNC_RETRY_MS = 2500;

/** SHA-256 of the state's canonical bytes: WebCrypto where there is one (fast, native), else core's. */
async function hashState(state: CoordinatorState): Promise<Uint8Array> {
  const subtle = (globalThis.crypto as Crypto | undefined)?.subtle;
  if (!subtle) return stateHash(state);
  return new Uint8Array(
    await subtle.digest('SHA-256', canonicalStateBytes(state) as Uint8Array<ArrayBuffer>),
  );
}

/** The counters the replica keeps (fields of RelayLink.stats). */
export interface ReplicaStats {
  /** StateSnapshot and StateDelta frames applied. */
  snapshots: number;
  deltas: number;
  /** State hashes checked, and those that differed from the relay's. */
  hashChecks: number;
  hashMismatches: number;
  /** ResyncRequests sent (gaps and mismatches). */
  resyncs: number;
  /** Admitted lists a light replica got from peers and from the relay, and the relay's bytes for them. */
  listsFromPeers: number;
  listsFromRelay: number;
  listBytesFromRelay: number;
}

/** What the replica needs of its link. */
export interface ReplicaHost {
  readonly runId: string;
  readonly stats: ReplicaStats;
  log(line: string): void;
  /** Hands a state on to the link's listeners. */
  emit(state: CoordinatorState): void;
  /** Sends a request frame on the current connection (rejects with RelayRefusal when refused). */
  request(frame: Uint8Array): Promise<void>;
  /** True once the link is closed: nothing more is asked. */
  closed(): boolean;
  /**
   * Light replicas only: the AdmittedList frame of a closed round from the relay, by its admitted_list (null:
   * not available). The replica checks it against the address before it uses it.
   */
  admittedList?(address: string): Promise<Uint8Array | null>;
  /** The peers admitted lists are shared with and fetched from, when this client has a peer network. */
  peers?(): BlobPeers | null;
}

/** How long a light replica waits before it asks again for an admitted list it could not get. */
export const ADMITTED_RETRY_MS = 1000;
/** Replicas of a run that fetch a new admitted list from the relay at once, in expectation. */
export const LIST_SEEDS = 4;
/** How long the others keep asking peers, and how often, before they fall back to the relay. */
export const LIST_PEER_WINDOW_MS = 2_000;
export const LIST_PEER_RETRY_MS = 200;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface StateReplicaOptions {
  /** A light replica (the link asked for `?replica=light`). */
  light?: boolean;
  /** Default LIST_SEEDS. */
  listSeeds?: number;
  /** Default LIST_PEER_WINDOW_MS. */
  listPeerWindowMs?: number;
  /** Milliseconds now, for the peer window (default Date.now). */
  now?: () => number;
  /** A uniform draw in [0, 1), for whether this replica seeds a list (default Math.random). */
  random?: () => number;
}

export class StateReplica {
  /** The latest majority parameter hash (hex) the relay reported, with its epoch. */
  majorityHash: { epoch: number; hash: string } | null = null;
  private readonly follower = new Follower();
  /** A ResyncRequest is out (or waits to be retried); no second one until it is answered. */
  private resyncing = false;

  private readonly host: ReplicaHost;
  /**
   * A light replica (the link asked for `?replica=light`): it holds the summary of the state, and hands on a
   * view with each closed round's admitted list put back (core's hydrateState), fetched and checked against
   * the round's admitted_list, so the client's witnessing, verification and apply run on it unchanged.
   */
  private readonly light: boolean;
  /** Checked admitted lists by address: only those of rounds the latest state still holds are kept. */
  private readonly lists = new Map<string, AdmittedList>();
  /** The newest state not yet handed on (light replicas, while lists are fetched). */
  private latest: CoordinatorState | null = null;
  private hydrating = false;
  /** Addresses of the admitted lists this replica serves its peers (those of the rounds it holds). */
  private readonly shared = new Set<string>();

  private readonly listSeeds: number;
  private readonly listPeerWindowMs: number;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(host: ReplicaHost, opts: StateReplicaOptions = {}) {
    this.host = host;
    this.light = opts.light === true;
    this.listSeeds = opts.listSeeds ?? LIST_SEEDS;
    this.listPeerWindowMs = opts.listPeerWindowMs ?? LIST_PEER_WINDOW_MS;
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
  }

  /** Hands a state on: at once for a full replica; for a light one once every closed round's list is in. */
  private publish(state: CoordinatorState): void {
    if (!this.light) {
      this.host.emit(state);
      this.shareLists(state);
      return;
    }
    this.latest = state;
    if (!this.hydrating) void this.hydrate();
  }

  /**
   * Hands on `latest` (and whatever replaces it meanwhile) once hydrated. The flag is cleared inside, not in
   * a .finally() on the promise: when nothing has to be fetched this runs to its end synchronously, and two
   * frames delivered in one task must find it cleared, or the second state would wait for a third frame.
   */
  private async hydrate(): Promise<void> {
    this.hydrating = true;
    try {
      // Awaits only while fetching: without a list to fetch, the whole loop and the finally run now.
      while (this.latest && !this.host.closed()) {
        const state = this.latest;
        let complete = true;
        for (const ref of missingAdmittedLists(state, this.lists)) {
          const list = await this.fetchList(ref, state.epoch.clients.length);
          if (list) this.lists.set(ref.address, list);
          else complete = false;
        }
        if (!complete) {
          await new Promise((r) => setTimeout(r, ADMITTED_RETRY_MS));
          continue;
        }
        const held = listAddresses(state);
        for (const address of [...this.lists.keys()]) if (!held.has(address)) this.lists.delete(address);
        if (this.latest === state) this.latest = null;
        const view = hydrateState(state, this.lists);
        this.host.emit(view);
        this.shareLists(view);
      }
    } finally {
      this.hydrating = false;
    }
  }

  /** Serves the admitted lists `state` holds that this replica does not serve yet, and forgets older ones. */
  private shareLists(state: CoordinatorState): void {
    const peers = this.host.peers?.();
    if (!peers) return;
    for (const { address, frame } of heldAdmittedLists(state, this.shared)) this.serve(peers, address, frame);
    const held = listAddresses(state);
    for (const address of [...this.shared]) if (!held.has(address)) this.shared.delete(address);
  }

  /** Serves a checked list under its address (null: a fetch from peers already stored it to serve on). */
  private serve(peers: BlobPeers, address: string, frame: Uint8Array | null): void {
    this.shared.add(address);
    if (frame)
      peers.shareBlob(frame).catch((e: unknown) => {
        this.host.log(`p2p: could not share an admitted list: ${(e as Error).message}`);
      });
  }

  /**
   * A closed round's list, checked: from peers unless this replica is one of the run's seeds (or has no
   * peers), else from the relay. `clients`: the epoch's size, which sets the chance of seeding.
   */
  private async fetchList(ref: AdmittedListRef, clients: number): Promise<AdmittedList | null> {
    const { address, step } = ref;
    const stats = this.host.stats;
    try {
      const want = hexToBytes(address, 32);
      const peers = this.host.peers?.();
      let bytes: Uint8Array | null = null;
      let fromPeers = false;
      if (peers && this.random() >= this.listSeeds / Math.max(1, clients)) {
        const until = this.now() + this.listPeerWindowMs;
        while (!this.host.closed()) {
          bytes = await peers.fetchBlob(want);
          if (bytes || this.now() + LIST_PEER_RETRY_MS > until) break;
          await sleep(LIST_PEER_RETRY_MS);
        }
        fromPeers = bytes !== null;
        if (fromPeers) stats.listsFromPeers++;
      }
      if (!bytes) {
        bytes = (await this.host.admittedList?.(address)) ?? null;
        if (!bytes) {
          this.host.log(`no admitted list for round ${step} (${address.slice(0, 12)}…) yet`);
          return null;
        }
        stats.listsFromRelay++;
        stats.listBytesFromRelay += bytes.length;
      }
      // Whatever the source: the relay's bytes are checked nowhere else.
      const list = checkAdmittedList(bytes, this.host.runId, ref);
      // Served on as fetched, not rebuilt from the hydrated state and hashed again by shareLists.
      if (peers && !this.shared.has(address)) this.serve(peers, address, fromPeers ? null : bytes);
      return list;
    } catch (e) {
      this.host.log(`admitted list of round ${step} refused: ${(e as Error).message}`);
      return null;
    }
  }

  /** A new connection gets a snapshot after its Join: nothing asked on the old one is still owed. */
  onNewConnection(): void {
    this.resyncing = false;
  }

  onSnapshot(s: StateSnapshot): void {
    if (s.paramHash) this.majorityHash = { epoch: s.paramHash.epoch, hash: bytesToHex(s.paramHash.hash) };
    if (!this.follower.takeSnapshot(s)) return;
    this.host.stats.snapshots++;
    this.resyncing = false;
    this.publish(s.state);
  }

  onDelta(d: StateDelta): void {
    this.onFrame(d, this.follower.applyDelta(d));
  }

  /** A light replica's frame (the link asked for `?replica=light`): the same bookkeeping, light events. */
  onLightDelta(d: LightDelta): void {
    this.onFrame(d, this.follower.applyLightDelta(d));
  }

  private onFrame(d: StateDelta | LightDelta, step: FollowStep): void {
    if (d.paramHash) this.majorityHash = { epoch: d.paramHash.epoch, hash: bytesToHex(d.paramHash.hash) };
    switch (step.kind) {
      case 'ignored':
        return;
      case 'unfit':
        this.host.log(`state delta does not fit this replica at seq ${step.seq}: ${step.reason}`);
        void this.reportMismatch(step.state, step.seq);
        return;
      case 'gap':
        this.host.log(
          `state delta starts at seq ${step.fromSeq}, this replica is at ${this.follower.seq}: resync`,
        );
        this.requestResync('gap');
        return;
      case 'applied':
        this.host.stats.deltas++;
        this.resyncing = false;
        this.publish(step.state);
        if (step.stateHash) void this.checkHash(step.state, step.seq, step.stateHash);
    }
  }

  private async checkHash(state: CoordinatorState, seq: number, expected: Uint8Array): Promise<void> {
    const generation = this.follower.generation;
    const mine = await hashState(state);
    this.host.stats.hashChecks++;
    if (this.follower.checkHash(generation, mine, expected) !== 'mismatch') return;
    this.host.log(
      `replayed state at seq ${seq} hashes to ${bytesToHex(mine).slice(0, 16)}…, not the relay's`,
    );
    this.host.stats.hashMismatches++;
    this.requestResync('mismatch', mine, seq);
  }

  private async reportMismatch(state: CoordinatorState, seq: number): Promise<void> {
    this.host.stats.hashMismatches++;
    this.follower.diverge();
    this.requestResync('mismatch', await hashState(state), seq);
  }

  /** Asks the relay for what this replica lacks; a mismatch report also tells the relay (it logs and counts it). */
  private requestResync(reason: ResyncReason, hash?: Uint8Array, seq = this.follower.seq): void {
    if (this.resyncing || this.host.closed()) return;
    this.resyncing = true;
    this.host.stats.resyncs++;
    const frame = encodeResyncRequest({
      runId: this.host.runId,
      seq,
      reason,
      ...(reason === 'mismatch' && hash ? { stateHash: hash } : {}),
    });
    this.host.request(frame).catch((e: unknown) => {
      if (!(e instanceof RelayRefusal) || e.code !== 'resync_too_soon') {
        this.resyncing = false;
        return;
      }
      setTimeout(() => {
        this.resyncing = false;
        const { diverged, state, seq: at } = this.follower;
        if (diverged && state) void this.reportMismatch(state, at);
      }, RESYNC_RETRY_MS);
    });
  }
}
