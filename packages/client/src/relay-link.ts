// CoordinatorLink over the relay's WebSocket (apps/relay/PROTOCOL.md), plus the relay's HTTP routes for
// stored results. Isomorphic: the global WebSocket and fetch of browsers and Node ≥ 22.
//
// Requests: the relay numbers every frame a connection sends (1, 2, …) and answers each with an Ack or a
// ControlError carrying that number, so the link counts its own sends and matches replies by number.
//
// Connections: one supervising loop per link (`supervise`) owns the socket. It opens one connection at a
// time, waits for the Join's Ack, then for the socket to drop, and reconnects after a capped, jittered
// exponential backoff; nothing else ever opens a socket, so attempts never overlap or multiply (a relay
// restart used to make every failed attempt start a loop of its own: tens of thousands of connections per
// trainer). The relay keeps a dropped member's slot for a grace period, so a quick re-join keeps it.
//
// State: the relay sends the run's state once after the Join (StateSnapshot), then only the transitions it
// applies (StateDelta). The link replays them with core's `tick` (applyStateDelta) and hands its listeners a
// full CoordinatorState per frame, as if the relay had sent it; now and then a delta carries the relay's
// state hash, which the link checks. A gap (a delta that starts past its seq) or a replica that does not fit
// the deltas or hashes differently makes it ask for the missing frames or a snapshot (ResyncRequest, which
// also reports a mismatch to the relay), and it drops deltas until it has a state they apply to.
import {
  applyStateDelta,
  bytesToHex,
  canonicalStateBytes,
  decodeFrame,
  deltaEndSeq,
  encodeHealthCheck,
  encodeJoin,
  encodeLeave,
  encodeParamHash,
  encodeResyncRequest,
  encodeVerdict,
  encodeWarmupWitness,
  encodeWitness,
  publicKeyOf,
  signJoin,
  stateHash,
  type Announce,
  type CoordinatorState,
  type HealthCheck,
  type ResyncReason,
  type StateDelta,
  type StateSnapshot,
  type Verdict,
  type WitnessMessage,
} from '@meshtrain/core';
import type { CoordinatorLink } from './interfaces.ts';

export interface RelayLinkOptions {
  /** http(s)://host:port of the relay. */
  relayUrl: string;
  runId: string;
  secretKey: Uint8Array;
  p2pPeerId?: string;
  /** What this client runs on, e.g. "node-trainer cpu". */
  deviceKind: string;
  onLog?: (line: string) => void;
}

/** A refusal from the relay: `code` is its ControlError code (core's coordinator codes included). */
export class RelayRefusal extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.name = 'RelayRefusal';
    this.code = code;
  }
}

interface Pending {
  resolve: () => void;
  reject: (e: Error) => void;
}

/**
 * Reconnect backoff: the n-th consecutive failure waits about RECONNECT_BASE_MS · 2^(n−1), capped at
 * RECONNECT_MAX_MS, each wait drawn uniformly from its upper half ("equal jitter") so that the clients of a
 * restarted relay do not all come back in the same instant. 30 s keeps a long outage to a few attempts a
 * minute per client while the first retries (0.25 s, 0.5 s, 1 s…) still land within the relay's grace period.
 */
export const RECONNECT_BASE_MS = 250;
export const RECONNECT_MAX_MS = 30_000;
/** A connection that lasted this long was healthy: the next drop starts the backoff from the beginning. */
export const RECONNECT_STABLE_MS = 60_000;
/** An attempt that has not joined by then (no Challenge, no Ack) is abandoned and counts as failed. */
export const JOIN_ATTEMPT_TIMEOUT_MS = 30_000;
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

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The wait before the next attempt after `failures` consecutive failures (≥ 1), with `random` in [0, 1). */
export function reconnectDelay(failures: number, random: number = Math.random()): number {
  const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** Math.max(0, failures - 1));
  return ceiling / 2 + (random * ceiling) / 2;
}

/** A gate callers wait on: resolved while the link is joined, pending while it reconnects. */
interface Gate {
  promise: Promise<void>;
  resolve(): void;
  reject(e: Error): void;
  settled: boolean;
  /** Resolved (joined), as opposed to rejected. */
  open: boolean;
}

function gate(): Gate {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Nobody may be waiting when it is rejected: that must not be an unhandled rejection.
  promise.catch(() => {});
  const g: Gate = {
    promise,
    settled: false,
    open: false,
    resolve: () => {
      g.settled = true;
      g.open = true;
      resolve();
    },
    reject: (e) => {
      g.settled = true;
      reject(e);
    },
  };
  return g;
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
  };
  /** The latest StateSnapshot's majority parameter hash (hex), as the relay reports it. */
  majorityHash: { epoch: number; hash: string } | null = null;
  private readonly o: RelayLinkOptions;
  private ws: WebSocket | null = null;
  private sent = 0;
  private pending = new Map<number, Pending>();
  /** Resolved while joined; a new pending gate replaces it when the connection drops. */
  private ready: Gate = gate();
  /** The one supervising loop, while it runs. */
  private loop: Promise<void> | null = null;
  /** Ends the current backoff wait early (close, rejoin). */
  private wake: (() => void) | null = null;
  /** Reconnect without waiting: set by rejoin, which closes the socket on purpose. */
  private immediate = false;
  private seq = -1;
  /** The replica the deltas apply to (null until the first snapshot). */
  private state: CoordinatorState | null = null;
  /** The replica is known wrong: deltas are dropped until a snapshot replaces it. */
  private diverged = false;
  /** A ResyncRequest is out (or waits to be retried); no second one until it is answered. */
  private resyncing = false;
  /** Counts snapshots taken: a hash check that finishes after one is about a replica that is gone. */
  private generation = 0;
  private closed = false;
  private readonly stateListeners: ((s: CoordinatorState) => void)[] = [];
  private readonly announceListeners: ((a: Announce) => void)[] = [];
  /** Fires for unsolicited ControlErrors (requestId 0), e.g. param_hash_mismatch. */
  onNotice: ((code: string, message: string) => void) | null = null;

  constructor(o: RelayLinkOptions) {
    this.o = o;
    this.clientId = bytesToHex(publicKeyOf(o.secretKey));
  }

  private get httpBase(): string {
    return this.o.relayUrl.replace(/\/+$/, '');
  }

  /**
   * Starts the link (if it is not running) and resolves once the relay acknowledged the Join. If the very
   * first attempt fails, this rejects and the link stops (the caller decides what to do); once it has joined,
   * every later drop is retried by the link itself until close().
   */
  connect(): Promise<void> {
    this.closed = false;
    if (!this.loop) {
      this.ready = gate();
      this.loop = this.supervise().finally(() => {
        this.loop = null;
      });
    }
    return this.ready.promise;
  }

  /** True while the link is joined (a request would be sent now). */
  get isJoined(): boolean {
    return this.ready.open && this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  /** The supervising loop: one connection at a time, backoff between failures, until close(). */
  private async supervise(): Promise<void> {
    let failures = 0;
    let everJoined = false;
    while (!this.closed) {
      let dropped: Promise<void>;
      try {
        ({ dropped } = await this.attempt());
      } catch (e) {
        if (this.closed) break;
        if (!everJoined) {
          // Never joined since connect(): report to the caller instead of retrying behind its back.
          const failed = this.ready;
          this.ready = gate();
          failed.reject(e as Error);
          return;
        }
        failures++;
        this.o.onLog?.(`reconnect failed (${failures} in a row): ${(e as Error).message}`);
        if (this.immediate) this.immediate = false;
        else await this.backoff(failures);
        continue;
      }
      const upSince = Date.now();
      if (everJoined) this.o.onLog?.('reconnected to the relay');
      everJoined = true;
      this.ready.resolve();
      await dropped;
      if (this.ready.settled) this.ready = gate();
      if (this.closed) break;
      // A connection that dropped right after joining counts as a failure: a relay in a crash loop, or one
      // that refuses this client after its Join, is not hammered at the base rate.
      failures = Date.now() - upSince >= RECONNECT_STABLE_MS ? 1 : failures + 1;
      if (this.immediate) {
        this.immediate = false;
        failures = 0;
        continue;
      }
      this.o.onLog?.('connection to the relay lost; reconnecting');
      await this.backoff(failures);
    }
    if (!this.ready.settled) this.ready.reject(new Error('the relay link is closed'));
  }

  private backoff(failures: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(t);
        if (this.wake === done) this.wake = null;
        resolve();
      };
      const t = setTimeout(done, reconnectDelay(failures));
      this.wake = done;
    });
  }

  /**
   * One connection: resolves once its Join is acknowledged, with a promise of the socket's end; rejects if
   * it ends (or times out) before that. Its close handler only reports: it never opens anything.
   */
  private attempt(): Promise<{ dropped: Promise<void> }> {
    const url = `${this.httpBase.replace(/^http/, 'ws')}/ws/runs/${encodeURIComponent(this.o.runId)}`;
    // The end is wrapped: resolving with a bare promise would wait for it.
    return new Promise<{ dropped: Promise<void> }>((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      this.ws = ws;
      this.sent = 0;
      // A new connection gets a snapshot after its Join: nothing asked on the old one is still owed.
      this.resyncing = false;
      this.stats.connects++;
      let joinedOk = false;
      let ended!: () => void;
      const dropped = new Promise<void>((r) => (ended = r));
      const timer = setTimeout(() => {
        if (!joinedOk) ws.close();
      }, JOIN_ATTEMPT_TIMEOUT_MS);
      ws.onmessage = (ev) => {
        if (!(ev.data instanceof ArrayBuffer)) return;
        const bytes = new Uint8Array(ev.data);
        this.stats.bytesReceived += bytes.length;
        let m;
        try {
          m = decodeFrame(bytes);
        } catch (e) {
          this.o.onLog?.(`relay sent an undecodable frame: ${(e as Error).message}`);
          return;
        }
        switch (m.kind) {
          case 'challenge': {
            const bits = m.message.powBits;
            // A permissionless run asks each join for a proof of work (about a second at 20 bits).
            const started = Date.now();
            const join = signJoin(
              this.o.secretKey,
              {
                runId: this.o.runId,
                p2pPeerId: this.o.p2pPeerId ?? '',
                deviceKind: this.o.deviceKind,
                challenge: m.message.challenge,
              },
              bits,
            );
            if (bits > 0)
              this.o.onLog?.(`solved the relay's ${bits}-bit join puzzle in ${Date.now() - started} ms`);
            this.request(encodeJoin(join)).then(
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
            return;
          }
          case 'ack':
            this.settle(m.message.requestId, null);
            return;
          case 'error':
            if (m.message.requestId === 0) this.onNotice?.(m.message.code, m.message.message);
            else this.settle(m.message.requestId, new RelayRefusal(m.message.code, m.message.message));
            return;
          case 'stateSnapshot':
            this.onSnapshot(m.message);
            return;
          case 'stateDelta':
            this.onDelta(m.message);
            return;
          case 'announce':
            for (const f of this.announceListeners) f(m.message);
            return;
          default:
            return;
        }
      };
      ws.onclose = (ev) => {
        clearTimeout(timer);
        if (this.ws === ws) {
          for (const p of this.pending.values()) p.reject(new Error(`relay connection closed (${ev.code})`));
          this.pending.clear();
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

  private emit(state: CoordinatorState): void {
    for (const f of this.stateListeners) f(state);
  }

  private onSnapshot(s: StateSnapshot): void {
    if (s.paramHash) this.majorityHash = { epoch: s.paramHash.epoch, hash: bytesToHex(s.paramHash.hash) };
    // The relay's seq survives its restarts; an older snapshot is stale (unless this replica is known wrong).
    if (s.seq < this.seq && !this.diverged) return;
    this.stats.snapshots++;
    this.generation++;
    this.seq = s.seq;
    this.state = s.state;
    this.diverged = false;
    this.resyncing = false;
    this.emit(s.state);
  }

  private onDelta(d: StateDelta): void {
    if (d.paramHash) this.majorityHash = { epoch: d.paramHash.epoch, hash: bytesToHex(d.paramHash.hash) };
    const state = this.state;
    if (!state || this.diverged || deltaEndSeq(d) <= this.seq) return;
    let out;
    try {
      out = applyStateDelta(state, this.seq, d);
    } catch (e) {
      // A transition that names what this replica does not have: it is not the relay's state.
      this.o.onLog?.(`state delta does not fit this replica at seq ${this.seq}: ${(e as Error).message}`);
      void this.reportMismatch(state, this.seq);
      return;
    }
    if (out.gap) {
      this.o.onLog?.(`state delta starts at seq ${d.fromSeq}, this replica is at ${this.seq}: resync`);
      this.requestResync('gap');
      return;
    }
    this.stats.deltas++;
    this.state = out.state;
    this.seq = out.seq;
    this.resyncing = false;
    this.emit(out.state);
    if (d.stateHash) void this.checkHash(out.state, out.seq, d.stateHash);
  }

  private async checkHash(state: CoordinatorState, seq: number, expected: Uint8Array): Promise<void> {
    const generation = this.generation;
    const mine = await hashState(state);
    this.stats.hashChecks++;
    if (sameBytes(mine, expected)) return;
    // The replica descends from the wrong state unless a snapshot replaced it meanwhile.
    if (generation !== this.generation) return;
    this.o.onLog?.(
      `replayed state at seq ${seq} hashes to ${bytesToHex(mine).slice(0, 16)}…, not the relay's`,
    );
    this.stats.hashMismatches++;
    this.diverged = true;
    this.requestResync('mismatch', mine, seq);
  }

  private async reportMismatch(state: CoordinatorState, seq: number): Promise<void> {
    this.stats.hashMismatches++;
    this.diverged = true;
    this.requestResync('mismatch', await hashState(state), seq);
  }

  /** Asks the relay for what this replica lacks; a mismatch report also tells the relay (it logs and counts it). */
  private requestResync(reason: ResyncReason, hash?: Uint8Array, seq = this.seq): void {
    if (this.resyncing || this.closed) return;
    this.resyncing = true;
    this.stats.resyncs++;
    const frame = encodeResyncRequest({
      runId: this.o.runId,
      seq,
      reason,
      ...(reason === 'mismatch' && hash ? { stateHash: hash } : {}),
    });
    this.request(frame).catch((e: unknown) => {
      if (!(e instanceof RelayRefusal) || e.code !== 'resync_too_soon') {
        this.resyncing = false;
        return;
      }
      setTimeout(() => {
        this.resyncing = false;
        if (this.diverged && this.state) void this.reportMismatch(this.state, this.seq);
      }, RESYNC_RETRY_MS);
    });
  }

  private settle(id: number, err: Error | null): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (err) p.reject(err);
    else p.resolve();
  }

  private request(frame: Uint8Array): Promise<void> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN)
      return Promise.reject(new Error('not connected to the relay'));
    const id = ++this.sent;
    const p = new Promise<void>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    ws.send(frame as Uint8Array<ArrayBuffer>);
    this.stats.bytesSent += frame.length;
    return p;
  }

  /** Sends once the link is joined (waits through a reconnect). */
  private async send(frame: Uint8Array): Promise<void> {
    if (this.closed) throw new Error('the relay link is closed');
    await (this.loop ? this.ready.promise : this.connect());
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
    const res = await fetch(
      `${this.httpBase}/api/runs/${encodeURIComponent(this.o.runId)}/results/${bytesToHex(commitment)}`,
    );
    if (!res.ok) return null;
    const bytes = new Uint8Array(await res.arrayBuffer());
    this.stats.bytesReceived += bytes.length;
    return bytes;
  }

  /**
   * Leave (Withdrawn), then reconnect and join again: the relay treats a left connection as finished. The
   * supervising loop does the reconnecting, at once rather than after a backoff.
   */
  async rejoin(reason: string): Promise<void> {
    await this.send(encodeLeave({ runId: this.o.runId, reason: reason.slice(0, 200) })).catch(() => {});
    if (!this.loop) return this.connect();
    if (this.ready.settled) this.ready = gate();
    const next = this.ready.promise;
    this.immediate = true;
    this.wake?.();
    this.ws?.close(1000, 'rejoin');
    await next;
  }

  close(): void {
    this.closed = true;
    this.wake?.();
    this.ws?.close(1000, 'bye');
    if (!this.ready.settled) this.ready.reject(new Error('the relay link is closed'));
  }
}
