// CoordinatorLink over the relay's WebSocket (apps/relay/PROTOCOL.md), plus the relay's HTTP routes for
// stored results. Isomorphic: the global WebSocket and fetch of browsers and Node ≥ 22.
//
// Requests: the relay numbers every frame a connection sends (1, 2, …) and answers each with an Ack or a
// ControlError carrying that number, so the link counts its own sends and matches replies by number.
// A dropped socket reconnects with backoff and joins again: the relay keeps the slot for a grace period.
import {
  bytesToHex,
  decodeFrame,
  encodeAnnounce,
  encodeHealthCheck,
  encodeJoin,
  encodeLeave,
  encodeParamHash,
  encodeWarmupWitness,
  encodeWitness,
  publicKeyOf,
  signJoin,
  type Announce,
  type CoordinatorState,
  type HealthCheck,
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class RelayLink implements CoordinatorLink {
  readonly clientId: string;
  readonly stats = { bytesSent: 0, bytesReceived: 0, connects: 0 };
  /** The latest StateSnapshot's majority parameter hash (hex), as the relay reports it. */
  majorityHash: { epoch: number; hash: string } | null = null;
  private readonly o: RelayLinkOptions;
  private ws: WebSocket | null = null;
  private sent = 0;
  private pending = new Map<number, Pending>();
  private joined: Promise<void> | null = null;
  private seq = -1;
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

  /** Opens the socket and joins; resolves once the relay acknowledged the Join. */
  connect(): Promise<void> {
    this.closed = false;
    if (!this.joined) this.joined = this.open();
    return this.joined;
  }

  private open(): Promise<void> {
    const url = `${this.httpBase.replace(/^http/, 'ws')}/ws/runs/${encodeURIComponent(this.o.runId)}`;
    return new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      this.ws = ws;
      this.sent = 0;
      this.stats.connects++;
      let joinedOk = false;
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
            const join = signJoin(this.o.secretKey, {
              runId: this.o.runId,
              p2pPeerId: this.o.p2pPeerId ?? '',
              deviceKind: this.o.deviceKind,
              challenge: m.message.challenge,
            });
            this.request(encodeJoin(join)).then(
              () => {
                joinedOk = true;
                resolve();
              },
              (e: Error) => reject(e),
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
          case 'stateSnapshot': {
            const s = m.message;
            if (s.paramHash)
              this.majorityHash = { epoch: s.paramHash.epoch, hash: bytesToHex(s.paramHash.hash) };
            // After a reconnect the counter restarts from the relay's persisted seq; older ones are stale.
            if (s.seq < this.seq) return;
            this.seq = s.seq;
            for (const f of this.stateListeners) f(s.state);
            return;
          }
          case 'announce':
            for (const f of this.announceListeners) f(m.message);
            return;
          default:
            return;
        }
      };
      ws.onclose = (ev) => {
        for (const p of this.pending.values()) p.reject(new Error(`relay connection closed (${ev.code})`));
        this.pending.clear();
        if (!joinedOk) reject(new Error(`relay closed the connection: ${ev.code} ${ev.reason}`));
        if (this.ws === ws) this.ws = null;
        if (!this.closed) void this.reconnect();
      };
      ws.onerror = () => {
        // onclose follows and reports.
      };
    });
  }

  private async reconnect(): Promise<void> {
    this.joined = null;
    for (let attempt = 0; !this.closed; attempt++) {
      await sleep(Math.min(5000, 200 * 2 ** attempt));
      if (this.closed) return;
      try {
        this.joined = this.open();
        await this.joined;
        this.o.onLog?.('reconnected to the relay');
        return;
      } catch (e) {
        this.joined = null;
        this.o.onLog?.(`reconnect failed: ${(e as Error).message}`);
      }
    }
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
    if (!this.joined) void this.connect();
    await this.joined;
    return this.request(frame);
  }

  onState(listener: (state: CoordinatorState) => void): void {
    this.stateListeners.push(listener);
  }

  onAnnounce(listener: (announce: Announce) => void): void {
    this.announceListeners.push(listener);
  }

  async submitResult(signedResultFrame: Uint8Array, announce: Announce): Promise<void> {
    await this.send(signedResultFrame);
    await this.send(encodeAnnounce(announce));
  }

  submitWitness(witness: WitnessMessage): Promise<void> {
    return this.send(encodeWitness(witness));
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

  /** Leave (Withdrawn), then reconnect and join again: the relay treats a left connection as finished. */
  async rejoin(reason: string): Promise<void> {
    await this.send(encodeLeave({ runId: this.o.runId, reason: reason.slice(0, 200) })).catch(() => {});
    const ws = this.ws;
    this.joined = null;
    if (ws) {
      ws.onclose = null;
      ws.close(1000, 'rejoin');
      this.ws = null;
    }
    await this.connect();
  }

  close(): void {
    this.closed = true;
    this.ws?.close(1000, 'bye');
    this.ws = null;
    this.joined = null;
  }
}
