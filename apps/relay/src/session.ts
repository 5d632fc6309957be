// One client's coordinator session on one WebSocket (apps/relay/PROTOCOL.md "Coordinator session"). It turns
// frames into coordinator events and stored results. It decides nothing itself: every frame goes through the
// codec (decodeFrame) and one of core's protocol rules (joinEvent, admitResult, admitAnnounce, witnessEvent,
// warmupWitnessEvent, healthCheckEvent, verdictEvent, leaveEvent, and the run host's admitParamHash), and the resulting
// event through core's tick. The transport is abstract so the same code serves any WebSocket library and tests.
import { randomBytes } from 'node:crypto';
import {
  decodeFrame,
  encodeAck,
  encodeChallenge,
  encodeControlError,
  healthCheckEvent,
  joinEvent,
  originTag,
  leaveEvent,
  verdictEvent,
  warmupWitnessEvent,
  WireError,
  witnessEvent,
} from '@meshtrain/core';
import type { CoordinatorEvent, Join, ResyncRequest, TickResult, WireMessage } from '@meshtrain/core';
import { RESYNC_SNAPSHOT_INTERVAL_MS } from './relay/broadcaster.ts';
import type { Relay, SessionHandle } from './relay.ts';
import { checkAnnounce, reportParamHash, storeSignedResult } from './session/frames.ts';
import { must, Refusal } from './session/refusal.ts';
import type { RunHost } from './run-host.ts';

export interface Transport {
  send(frame: Uint8Array): void;
  close(code: number, reason: string): void;
  /** The Join was accepted: the transport may lift what it limits before a Join (routes/ws.ts). */
  joined?(): void;
  /** The peer's address (what per-address limits count); '' when unknown. */
  readonly address?: string;
  /** Stop / start reading from the peer (its frames wait in the relay's work queue meanwhile). */
  pause?(): void;
  resume?(): void;
}

/** WebSocket close codes (PROTOCOL.md). */
export const CLOSE = {
  badFrames: 4000,
  replaced: 4001,
  joinTimeout: 4008,
  unknownRun: 4404,
  shutdown: 1001,
} as const;

/**
 * Hashes per second a slow client (a phone's JS) still manages on the join puzzle: the Join timeout grows by
 * the time such a client needs on average, so the puzzle never locks slow honest devices out.
 */
const SLOW_CLIENT_HASHES_PER_SECOND = 25_000;

function powAllowanceMs(bits: number): number {
  return bits > 0 ? Math.ceil((2 ** bits / SLOW_CLIENT_HASHES_PER_SECOND) * 1000) : 0;
}

/** How often an active session refreshes its client's last_seen in relay.db. */
const SEEN_WRITE_MS = 60_000;

/** Frames of one connection waiting in the relay's work queue before it stops reading from it, and resumes. */
const MAX_QUEUED_FRAMES = 32;
const RESUME_QUEUED_FRAMES = 8;

/** Consecutive bad frames that close the connection. */
export const MAX_BAD_FRAMES_IN_A_ROW = 3;
const U32_MAX = 0xffff_ffff;
/** Error messages are capped well under the codec's string limit. */
const MAX_MESSAGE_CHARS = 1000;

export class CoordinatorSession implements SessionHandle {
  private readonly relay: Relay;
  readonly runId: string;
  private readonly transport: Transport;
  private readonly challenge = new Uint8Array(randomBytes(32));
  /** The join puzzle this connection's challenge asks for (fixed when the challenge is sent). */
  private powBits = 0;
  private host: RunHost | undefined;
  private id = '';
  private frameNo = 0;
  /** Frames received and not yet processed (they wait in relay.work). */
  private queued = 0;
  private paused = false;
  /** When this session last wrote its client's last_seen (its Join did). */
  private seenWrittenAt = 0;
  private badInRow = 0;
  private joined = false;
  private left = false;
  private closed = false;
  private joinTimer: NodeJS.Timeout | undefined;
  /** Token bucket for frames (refilled at relay.maxFramesPerSecond, holding up to twice that). */
  private tokens: number;
  private tokensAt = performance.now();

  /** Follows the run as a light replica (LightDelta frames; the connection asked with `?replica=light`). */
  readonly light: boolean;

  constructor(relay: Relay, runId: string, transport: Transport, opts: { light?: boolean } = {}) {
    this.relay = relay;
    this.runId = runId;
    this.transport = transport;
    this.light = opts.light === true;
    this.tokens = 2 * relay.maxFramesPerSecond;
  }

  /** One frame's worth of budget. An honest client sends a handful of frames per round; a flood from one
   * connection must not starve the others on the relay's single thread. */
  private takeToken(): boolean {
    const now = performance.now();
    const rate = this.relay.maxFramesPerSecond;
    this.tokens = Math.min(2 * rate, this.tokens + ((now - this.tokensAt) / 1000) * rate);
    this.tokensAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  get identity(): string {
    return this.id;
  }

  /** Connection opened: send the Challenge (or refuse an unknown run and close). */
  open(): void {
    this.host = this.relay.run(this.runId);
    if (!this.host) {
      this.sendError(0, 'unknown_run', `no run '${this.runId}' on this relay; GET /api/runs lists them`);
      this.close(CLOSE.unknownRun, 'unknown run');
      return;
    }
    this.powBits = this.relay.joinPowBitsFor(this.host);
    this.send(
      encodeChallenge(
        {
          runId: this.runId,
          challenge: this.challenge,
          serverTime: this.relay.clock(),
          powBits: this.powBits,
        },
        this.relay.limits,
      ),
    );
    this.joinTimer = setTimeout(
      () => {
        if (!this.joined) this.close(CLOSE.joinTimeout, 'no Join in time');
      },
      this.relay.joinTimeoutMs + powAllowanceMs(this.powBits),
    );
    this.joinTimer.unref();
  }

  send(frame: Uint8Array): void {
    if (this.closed) return;
    try {
      this.transport.send(frame);
      this.relay.hooks.bytesOut(frame.length);
    } catch {
      // A socket that died between checks: its close event cleans up.
    }
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.transport.close(code, reason);
    } catch {
      // Already closed.
    }
    this.cleanup();
  }

  /** The transport closed (either side). */
  onClose(): void {
    this.closed = true;
    this.cleanup();
  }

  private cleanup(): void {
    if (this.joinTimer) clearTimeout(this.joinTimer);
    if (this.joined) {
      this.relay.detach(this.runId, this, this.left);
      this.joined = false;
    }
  }

  private sendError(requestId: number, code: string, message: string): void {
    const text = message.length > MAX_MESSAGE_CHARS ? `${message.slice(0, MAX_MESSAGE_CHARS)}…` : message;
    this.send(encodeControlError({ requestId, code, message: text }, this.relay.limits));
  }

  /**
   * One WebSocket message: `string` for text frames, bytes for binary ones. Queued in the relay's work queue
   * (processed in arrival order, in slices); a connection with MAX_QUEUED_FRAMES waiting is not read from
   * until they are down to RESUME_QUEUED_FRAMES.
   */
  onMessage(data: string | ArrayBuffer | Uint8Array): void {
    if (this.closed) return;
    this.queued++;
    if (this.queued >= MAX_QUEUED_FRAMES && !this.paused) {
      this.paused = true;
      this.transport.pause?.();
    }
    this.relay.work.push(() => {
      this.queued--;
      if (this.paused && this.queued <= RESUME_QUEUED_FRAMES) {
        this.paused = false;
        this.transport.resume?.();
      }
      this.process(data);
    });
  }

  private process(data: string | ArrayBuffer | Uint8Array): void {
    if (this.closed) return;
    this.frameNo++;
    const requestId = this.frameNo > U32_MAX ? 0 : this.frameNo;
    try {
      if (!this.takeToken())
        throw new Refusal(
          'rate_limited',
          `more than ${this.relay.maxFramesPerSecond} frames per second; slow down`,
        );
      if (typeof data === 'string')
        throw new Refusal(
          'text_frame',
          'text messages are not accepted; send binary frames of the core wire codec',
        );
      const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
      this.relay.hooks.bytesIn(bytes.length);
      const cap = this.host?.maxFrameBytes ?? this.relay.limits.maxFrameBytes;
      if (bytes.length > cap)
        throw new Refusal(
          'wire_oversized',
          `${bytes.length} bytes: no frame of this run is larger than ${cap}`,
        );
      let m: WireMessage;
      try {
        m = decodeFrame(bytes, this.relay.limits);
      } catch (e) {
        if (e instanceof WireError) throw new Refusal(`wire_${e.code}`, e.message);
        throw e;
      }
      this.handle(m, bytes);
      this.badInRow = 0;
      this.send(encodeAck({ requestId }, this.relay.limits));
    } catch (e) {
      if (e instanceof Refusal) {
        this.badInRow = e.bad ? this.badInRow + 1 : 0;
        this.sendError(requestId, e.code, e.message);
        if (this.badInRow >= MAX_BAD_FRAMES_IN_A_ROW)
          this.close(CLOSE.badFrames, `${MAX_BAD_FRAMES_IN_A_ROW} bad frames in a row`);
        return;
      }
      // A relay bug or a failed database write: the frame was not applied; say so and keep serving.
      this.relay.log.warn(
        `run ${this.runId}: internal error on a ${this.id.slice(0, 12) || 'new'} frame: ${(e as Error).stack ?? String(e)}`,
      );
      this.sendError(requestId, 'internal', 'the relay failed to process this frame; it was not applied');
    }
  }

  private handle(m: WireMessage, bytes: Uint8Array): void {
    const host = this.host;
    if (!host) throw new Refusal('unknown_run', `no run '${this.runId}'`);
    if (!this.joined) {
      if (m.kind !== 'join') throw new Refusal('not_joined', 'send a Join answering the Challenge first');
      this.join(host, m.message);
      return;
    }
    this.seen();
    switch (m.kind) {
      case 'signedResult':
        return storeSignedResult(this.relay, { runId: this.runId, id: this.id, host }, m.message, bytes);
      case 'announce':
        return checkAnnounce(this.relay, { runId: this.runId, id: this.id, host }, m.message);
      case 'witness': {
        const meta = m.message.metadata;
        // The measurements go into the witness's own transaction (one commit, not one per metric row).
        this.coordinator(
          host,
          witnessEvent(this.id, m.message),
          meta && ((r) => !r.error && host.recordWitnessMetadata(m.message.step, this.id, meta)),
        );
        if (meta && Number.isFinite(meta.loss)) this.relay.hooks.loss(this.runId, meta.loss);
        return;
      }
      case 'warmupWitness':
        return this.coordinator(host, must(warmupWitnessEvent(host.state, this.id, m.message)));
      case 'healthCheck':
        return this.coordinator(host, must(healthCheckEvent(host.state, this.id, m.message)));
      case 'verdict':
        return this.coordinator(host, must(verdictEvent(host.state, this.id, m.message)));
      case 'leave':
        // The connection stays open (replies, snapshots) but is done with the run: its close is not a
        // second leave, and joining again takes a new connection (a new challenge).
        this.coordinator(host, must(leaveEvent(host.state, this.id, m.message)));
        this.left = true;
        return;
      case 'paramHash':
        return reportParamHash(this.relay, { runId: this.runId, id: this.id, host }, m.message);
      case 'resyncRequest':
        return this.resync(host, m.message);
      default:
        throw new Refusal(
          'unexpected_frame',
          `clients do not send ${m.kind} frames${m.kind === 'join' ? ' twice' : ''}`,
        );
    }
  }

  /**
   * Records that the client is active (its clients row's last_seen, which orders the pruning of idle
   * identities): at most once per SEEN_WRITE_MS, not one SQLite transaction per frame.
   */
  private seen(): void {
    const now = this.relay.clock();
    if (now - this.seenWrittenAt < SEEN_WRITE_MS) return;
    this.seenWrittenAt = now;
    this.relay.store.sessions.seenClient(this.runId, this.id, now);
  }

  /** Feeds an event; a coordinator refusal is replied with core's code and does not count as a bad frame. */
  private coordinator(host: RunHost, event: CoordinatorEvent, inTransaction?: (r: TickResult) => void): void {
    const r = host.apply(event, inTransaction);
    if (r.error) throw new Refusal(r.error.code, r.error.message, false);
  }

  private join(host: RunHost, j: Join): void {
    // Where the join came from, as a salted tag of its network (never the address): core keeps it per client
    // so no identity verifies another of the same origin (docs/protocol.md "Trust").
    const origin = originTag(this.transport.address || undefined, this.relay.originSalt);
    const event = must(joinEvent(host.state, j, this.challenge, this.powBits, origin));
    const id = event.id;
    if (!this.relay.mayJoin(host, id))
      throw new Refusal(
        'not_authorized',
        "this run is permissioned and no active grant covers this key; ask the run's join authority",
      );
    if (!this.relay.identityLimits.admit(this.runId, this.transport.address ?? '', id))
      throw new Refusal(
        'too_many_identities',
        'this address already brought the most identities a run takes from one address',
      );
    const r = host.apply(event);
    // AlreadyMember is a reconnect: the client keeps its slot (and its epoch index).
    if (r.error && r.error.code !== 'AlreadyMember') throw new Refusal(r.error.code, r.error.message, false);
    this.id = id;
    this.joined = true;
    if (this.joinTimer) clearTimeout(this.joinTimer);
    this.transport.joined?.();
    this.seenWrittenAt = this.relay.clock();
    this.relay.store.sessions.touchClient(this.runId, id, j.deviceKind, j.p2pPeerId, this.seenWrittenAt);
    const old = this.relay.attach(this.runId, this);
    if (old) {
      old.send(
        encodeControlError(
          { requestId: 0, code: 'replaced', message: 'a newer connection joined with this identity' },
          this.relay.limits,
        ),
      );
      old.close(CLOSE.replaced, 'replaced by a newer connection');
    }
    // The state goes out with the run's next broadcast (one snapshot encoding for every joiner of that
    // moment), after the Ack: onMessage sends the Ack when handle returns. Results need no announces: the
    // state names every admitted commitment.
    this.relay.queueSnapshot(this, host);
  }

  /** A client's replica fell behind (gap) or replayed to another hash (mismatch): deltas or a snapshot. */
  private resync(host: RunHost, q: ResyncRequest): void {
    if (q.runId !== this.runId)
      throw new Refusal('wrong_run', `the request names run '${q.runId}', this is '${this.runId}'`);
    // What answers it (ring frames, or a snapshot with the next broadcast) goes out after the Ack.
    if (this.relay.resync(this, host, q) === 'too_soon')
      throw new Refusal(
        'resync_too_soon',
        `at most one snapshot per ${RESYNC_SNAPSHOT_INTERVAL_MS} ms for a connection; ask again later`,
        false,
      );
  }
}
