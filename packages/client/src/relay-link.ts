// CoordinatorLink over the relay's WebSocket (apps/relay/PROTOCOL.md), plus the relay's HTTP route for
// stored results. Isomorphic: the global WebSocket and fetch of browsers and Node ≥ 22.
//
// This module wires the parts together: one connection attempt (the Join handshake and the dispatch of the
// relay's frames) is here; the loop that reconnects with backoff is relay-link-reconnect.ts, the numbered
// requests and their answers relay-link-requests.ts, the state replica that replays StateDelta frames and
// resyncs relay-link-replica.ts, the HTTP fetches relay-api/stored-frames.ts.
import {
  bytesToHex,
  decodeFrame,
  encodeHealthCheck,
  encodeJoin,
  encodeLeave,
  encodeParamHash,
  encodeVerdict,
  encodeWarmupWitness,
  encodeWitness,
  publicKeyOf,
  signJoin,
  type Announce,
  type CoordinatorState,
  type HealthCheck,
  type Verdict,
  type WireMessage,
  type WitnessMessage,
} from '@meshtrain/core';
import type { BlobPeers, CoordinatorLink } from './interfaces.ts';
import { fetchAdmittedList, fetchStoredResult } from './relay-api/stored-frames.ts';
import { JOIN_ATTEMPT_TIMEOUT_MS, ReconnectLoop } from './relay-link-reconnect.ts';
import { StateReplica } from './relay-link-replica.ts';
import { PendingRequests, RelayRefusal } from './relay-link-requests.ts';

export {
  JOIN_ATTEMPT_TIMEOUT_MS,
  RECONNECT_BASE_MS,
  RECONNECT_MAX_MS,
  RECONNECT_STABLE_MS,
  reconnectDelay,
} from './relay-link-reconnect.ts';
export { RESYNC_RETRY_MS } from './relay-link-replica.ts';
export { RelayRefusal } from './relay-link-requests.ts';

export interface RelayLinkOptions {
  /** http(s)://host:port of the relay. */
  relayUrl: string;
  runId: string;
  secretKey: Uint8Array;
  p2pPeerId?: string;
  /** What this client runs on, e.g. "node-trainer cpu". */
  deviceKind: string;
  /**
   * 'light': follow the summary of the state (no admitted commitments, attestations or verdicts; LightDelta
   * frames, docs/protocol.md "Round outcomes and light replicas"). States are handed on once each closed
   * round's admitted list is fetched (from peers given to `usePeers`, else from the relay) and checked, with
   * the lists put back, so a training Client runs on them as on a full replica's; the open round's results
   * show up when it closes. 'full': every event, replayed and checked. Default 'full'.
   */
  replica?: 'full' | 'light';
  /**
   * Light replicas with peers: how many replicas of the run are expected to take each new admitted list from
   * the relay at once (LIST_SEEDS); the rest ask peers first. 0 never seeds (tests of the peer path).
   */
  listSeeds?: number;
  onLog?: (line: string) => void;
}

export class RelayLink implements CoordinatorLink {
  readonly clientId: string;
  readonly stats = {
    bytesSent: 0,
    bytesReceived: 0,
    connects: 0,
    /** StateSnapshot and StateDelta frames applied. */
    snapshots: 0,
    deltas: 0,
    /** State hashes checked, and those that differed from the relay's. */
    hashChecks: 0,
    hashMismatches: 0,
    /** ResyncRequests sent (gaps and mismatches). */
    resyncs: 0,
    /** Admitted lists (light replicas) from peers and from the relay, and the relay's bytes for them. */
    listsFromPeers: 0,
    listsFromRelay: 0,
    listBytesFromRelay: 0,
  };
  private peers: BlobPeers | null = null;
  private readonly o: RelayLinkOptions;
  private ws: WebSocket | null = null;
  private readonly requests = new PendingRequests();
  private readonly replica: StateReplica;
  private readonly reconnect: ReconnectLoop;
  private readonly stateListeners: ((s: CoordinatorState) => void)[] = [];
  private readonly announceListeners: ((a: Announce) => void)[] = [];
  /** Fires for unsolicited ControlErrors (requestId 0), e.g. param_hash_mismatch. */
  onNotice: ((code: string, message: string) => void) | null = null;

  constructor(o: RelayLinkOptions) {
    this.o = o;
    this.clientId = bytesToHex(publicKeyOf(o.secretKey));
    const log = (line: string): void => o.onLog?.(line);
    this.replica = new StateReplica(
      {
        runId: o.runId,
        stats: this.stats,
        log,
        emit: (state) => {
          for (const f of this.stateListeners) f(state);
        },
        request: (frame) => this.request(frame),
        closed: () => this.reconnect.closed,
        admittedList: (address) => fetchAdmittedList(o.relayUrl, o.runId, address),
        peers: () => this.peers,
      },
      { light: o.replica === 'light', ...(o.listSeeds !== undefined ? { listSeeds: o.listSeeds } : {}) },
    );
    this.reconnect = new ReconnectLoop(() => this.attempt(), log);
  }

  /**
   * Shares admitted lists with these peers: the replica serves every closed round's list it holds, and a
   * light one fetches new lists from them first (the relay is the fallback). Null stops both.
   */
  usePeers(peers: BlobPeers | null): void {
    this.peers = peers;
  }

  /** The latest StateSnapshot's or StateDelta's majority parameter hash (hex), as the relay reports it. */
  get majorityHash(): { epoch: number; hash: string } | null {
    return this.replica.majorityHash;
  }

  /**
   * Starts the link (if it is not running) and resolves once the relay acknowledged the Join. If the very
   * first attempt fails, this rejects and the link stops (the caller decides what to do); once it has joined,
   * every later drop is retried by the link itself until close().
   */
  connect(): Promise<void> {
    return this.reconnect.start();
  }

  /** True while the link is joined (a request would be sent now). */
  get isJoined(): boolean {
    return this.reconnect.joined && this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  /**
   * One connection: resolves once its Join is acknowledged, with a promise of the socket's end; rejects if
   * it ends (or times out) before that. Its close handler only reports: it never opens anything.
   */
  private attempt(): Promise<{ dropped: Promise<void> }> {
    const base = this.o.relayUrl.replace(/\/+$/, '');
    const query = this.o.replica === 'light' ? '?replica=light' : '';
    const url = `${base.replace(/^http/, 'ws')}/ws/runs/${encodeURIComponent(this.o.runId)}${query}`;
    // The end is wrapped: resolving with a bare promise would wait for it.
    return new Promise<{ dropped: Promise<void> }>((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      this.ws = ws;
      this.requests.restartNumbering();
      this.replica.onNewConnection();
      this.stats.connects++;
      let joinedOk = false;
      let ended!: () => void;
      const dropped = new Promise<void>((r) => (ended = r));
      const timer = setTimeout(() => {
        if (!joinedOk) ws.close();
      }, JOIN_ATTEMPT_TIMEOUT_MS);
      const join = (challenge: Uint8Array, powBits: number): void => {
        this.request(this.joinFrame(challenge, powBits)).then(
          () => {
            joinedOk = true;
            clearTimeout(timer);
            resolve({ dropped });
          },
          (e: Error) => {
            reject(e);
            ws.close();
          },
        );
      };
      ws.onmessage = (ev) => {
        if (ev.data instanceof ArrayBuffer) this.onFrame(new Uint8Array(ev.data), join);
      };
      ws.onclose = (ev) => {
        clearTimeout(timer);
        if (this.ws === ws) {
          this.requests.failAll(new Error(`relay connection closed (${ev.code})`));
          this.ws = null;
        }
        if (!joinedOk) reject(new Error(`relay closed the connection: ${ev.code} ${ev.reason}`));
        ended();
      };
      ws.onerror = () => {
        // onclose follows and reports.
      };
    });
  }

  /** The signed Join answering the relay's Challenge (with its proof of work when the run asks for one). */
  private joinFrame(challenge: Uint8Array, powBits: number): Uint8Array {
    // A permissionless run asks each join for a proof of work (about a second at 20 bits).
    const started = Date.now();
    const join = signJoin(
      this.o.secretKey,
      {
        runId: this.o.runId,
        p2pPeerId: this.o.p2pPeerId ?? '',
        deviceKind: this.o.deviceKind,
        challenge,
      },
      powBits,
    );
    if (powBits > 0)
      this.o.onLog?.(`solved the relay's ${powBits}-bit join puzzle in ${Date.now() - started} ms`);
    return encodeJoin(join);
  }

  /** One frame from the relay; a Challenge is answered by `join`. */
  private onFrame(bytes: Uint8Array, join: (challenge: Uint8Array, powBits: number) => void): void {
    this.stats.bytesReceived += bytes.length;
    let m: WireMessage;
    try {
      m = decodeFrame(bytes);
    } catch (e) {
      this.o.onLog?.(`relay sent an undecodable frame: ${(e as Error).message}`);
      return;
    }
    switch (m.kind) {
      case 'challenge':
        join(m.message.challenge, m.message.powBits);
        return;
      case 'ack':
        this.requests.settle(m.message.requestId, null);
        return;
      case 'error':
        if (m.message.requestId === 0) this.onNotice?.(m.message.code, m.message.message);
        else this.requests.settle(m.message.requestId, new RelayRefusal(m.message.code, m.message.message));
        return;
      case 'stateSnapshot':
        this.replica.onSnapshot(m.message);
        return;
      case 'stateDelta':
        this.replica.onDelta(m.message);
        return;
      case 'lightDelta':
        this.replica.onLightDelta(m.message);
        return;
      case 'announce':
        for (const f of this.announceListeners) f(m.message);
        return;
      default:
        return;
    }
  }

  private request(frame: Uint8Array): Promise<void> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN)
      return Promise.reject(new Error('not connected to the relay'));
    const p = this.requests.send(ws, frame);
    this.stats.bytesSent += frame.length;
    return p;
  }

  /** Sends once the link is joined (waits through a reconnect). */
  private async send(frame: Uint8Array): Promise<void> {
    if (this.reconnect.closed) throw new Error('the relay link is closed');
    await this.reconnect.whenJoined();
    return this.request(frame);
  }

  onState(listener: (state: CoordinatorState) => void): void {
    this.stateListeners.push(listener);
  }

  onAnnounce(listener: (announce: Announce) => void): void {
    this.announceListeners.push(listener);
  }

  /**
   * Only the SignedResult goes to the relay: the coordinator state names the admitted commitment, which is
   * all other clients need to fetch it. The announce is for peers (PeerNetwork.publish).
   */
  async submitResult(signedResultFrame: Uint8Array, _announce: Announce): Promise<void> {
    await this.send(signedResultFrame);
  }

  submitWitness(witness: WitnessMessage): Promise<void> {
    return this.send(encodeWitness(witness));
  }

  submitVerdict(verdict: Verdict): Promise<void> {
    return this.send(encodeVerdict(verdict));
  }

  submitWarmupWitness(epoch: number): Promise<void> {
    return this.send(encodeWarmupWitness({ runId: this.o.runId, epoch }));
  }

  submitHealthCheck(check: HealthCheck): Promise<void> {
    return this.send(encodeHealthCheck(check));
  }

  reportParamHash(epoch: number, step: number, hash: Uint8Array): Promise<void> {
    return this.send(encodeParamHash({ runId: this.o.runId, epoch, step, hash }));
  }

  async fetchResult(commitment: Uint8Array): Promise<Uint8Array | null> {
    const bytes = await fetchStoredResult(this.o.relayUrl, this.o.runId, commitment);
    if (bytes) this.stats.bytesReceived += bytes.length;
    return bytes;
  }

  /**
   * Leave (Withdrawn), then reconnect and join again: the relay treats a left connection as finished. The
   * reconnect loop does the reconnecting, at once rather than after a backoff.
   */
  async rejoin(reason: string): Promise<void> {
    await this.send(encodeLeave({ runId: this.o.runId, reason: reason.slice(0, 200) })).catch(() => {});
    await this.reconnect.restartNow(() => this.ws?.close(1000, 'rejoin'));
  }

  close(): void {
    this.reconnect.stop(() => this.ws?.close(1000, 'bye'));
  }
}
