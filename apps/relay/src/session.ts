// One client's coordinator session on one WebSocket (apps/relay/PROTOCOL.md "Coordinator session"). It turns
// frames into coordinator events and stored results; every check it makes is either the codec's
// (decodeFrame, verifyJoin, verifySignedResult, verifyAnnounce) or a core query (roundAssignments). The
// transport is abstract so the same code serves any WebSocket library and tests.
import { randomBytes } from 'node:crypto';
import {
  bytesToHex,
  COMMITMENT_BYTES,
  decodeFrame,
  encodeAck,
  encodeChallenge,
  encodeControlError,
  PUBLIC_KEY_BYTES,
  roundAssignments,
  SIGNATURE_BYTES,
  verifyAnnounce,
  verifyJoin,
  verifySignedResult,
  WireError,
} from '@meshtrain/core';
import type {
  Announce,
  CoordinatorEvent,
  HealthCheck,
  Join,
  ParamHash,
  SignedResult,
  WireMessage,
  WitnessMessage,
} from '@meshtrain/core';
import type { Relay, SessionHandle } from './relay.ts';
import type { RunHost } from './run-host.ts';

export interface Transport {
  send(frame: Uint8Array): void;
  close(code: number, reason: string): void;
}

/** WebSocket close codes (PROTOCOL.md). */
export const CLOSE = {
  badFrames: 4000,
  replaced: 4001,
  joinTimeout: 4008,
  unknownRun: 4404,
  shutdown: 1001,
} as const;

/** Consecutive bad frames that close the connection. */
export const MAX_BAD_FRAMES_IN_A_ROW = 3;
/** Bytes a SignedResult frame has beyond the TrainingResult frame it wraps (from, commitment, signature). */
const ENVELOPE_BYTES = PUBLIC_KEY_BYTES + COMMITMENT_BYTES + SIGNATURE_BYTES;
const U32_MAX = 0xffff_ffff;
/** Error messages are capped well under the codec's string limit. */
const MAX_MESSAGE_CHARS = 1000;

/** A refusal the session replies with; `bad` ones count toward the bad-frames-in-a-row limit. */
class Refusal extends Error {
  readonly code: string;
  readonly bad: boolean;
  constructor(code: string, message: string, bad = true) {
    super(message);
    this.code = code;
    this.bad = bad;
  }
}

export class CoordinatorSession implements SessionHandle {
  private readonly relay: Relay;
  readonly runId: string;
  private readonly transport: Transport;
  private readonly challenge = new Uint8Array(randomBytes(32));
  private host: RunHost | undefined;
  private id = '';
  private frameNo = 0;
  private badInRow = 0;
  private joined = false;
  private left = false;
  private closed = false;
  private joinTimer: NodeJS.Timeout | undefined;
  /** Token bucket for frames (refilled at relay.maxFramesPerSecond, holding up to twice that). */
  private tokens: number;
  private tokensAt = performance.now();

  constructor(relay: Relay, runId: string, transport: Transport) {
    this.relay = relay;
    this.runId = runId;
    this.transport = transport;
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
    this.send(
      encodeChallenge(
        { runId: this.runId, challenge: this.challenge, serverTime: this.relay.clock() },
        this.relay.limits,
      ),
    );
    this.joinTimer = setTimeout(() => {
      if (!this.joined) this.close(CLOSE.joinTimeout, 'no Join in time');
    }, this.relay.joinTimeoutMs);
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

  /** One WebSocket message: `string` for text frames, bytes for binary ones. */
  onMessage(data: string | ArrayBuffer | Uint8Array): void {
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
    this.relay.store.seenClient(this.runId, this.id, this.relay.clock());
    switch (m.kind) {
      case 'signedResult':
        return this.signedResult(host, m.message, bytes);
      case 'announce':
        return this.announce(m.message, bytes);
      case 'witness':
        return this.witness(host, m.message);
      case 'healthCheck':
        return this.healthCheck(host, m.message);
      case 'leave':
        // The connection stays open (replies, snapshots) but is done with the run: its close is not a
        // second leave, and joining again takes a new connection (a new challenge).
        this.checkRun(m.message.runId);
        this.coordinator(host, { type: 'leave', id: this.id });
        this.left = true;
        return;
      case 'paramHash':
        return this.paramHash(host, m.message);
      default:
        throw new Refusal(
          'unexpected_frame',
          `clients do not send ${m.kind} frames${m.kind === 'join' ? ' twice' : ''}`,
        );
    }
  }

  private checkRun(runId: string): void {
    if (runId !== this.runId)
      throw new Refusal(
        'wrong_run',
        `the frame names run '${runId}', this connection is for '${this.runId}'`,
      );
  }

  /** Feeds an event; a coordinator refusal is replied with core's code and does not count as a bad frame. */
  private coordinator(host: RunHost, event: CoordinatorEvent): void {
    const r = host.apply(event);
    if (r.error) throw new Refusal(r.error.code, r.error.message, false);
  }

  private join(host: RunHost, j: Join): void {
    this.checkRun(j.runId);
    try {
      verifyJoin(j, this.challenge);
    } catch (e) {
      if (e instanceof WireError) throw new Refusal('bad_signature', e.message);
      throw e;
    }
    const id = bytesToHex(j.pubkey);
    if (!this.relay.mayJoin(host, id))
      throw new Refusal(
        'not_authorized',
        "this run is permissioned and no active grant covers this key; ask the run's join authority",
      );
    const r = host.apply({ type: 'join', id, p2p_id: j.p2pPeerId === '' ? id : j.p2pPeerId });
    // AlreadyMember is a reconnect: the client keeps its slot (and its epoch index).
    if (r.error && r.error.code !== 'AlreadyMember') throw new Refusal(r.error.code, r.error.message, false);
    this.id = id;
    this.joined = true;
    if (this.joinTimer) clearTimeout(this.joinTimer);
    this.relay.store.touchClient(this.runId, id, j.deviceKind, j.p2pPeerId, this.relay.clock());
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
    // The Ack goes out first (onMessage sends it after handle returns), then the state: queue them after it.
    queueMicrotask(() => {
      if (this.closed) return;
      this.relay.sendSnapshot(this, host);
      for (const r of this.relay.store.resultsForSteps(this.runId, host.storedRoundSteps()))
        if (r.announce !== null && r.sender !== this.id) this.send(r.announce);
    });
  }

  private signedResult(host: RunHost, s: SignedResult, bytes: Uint8Array): void {
    const { envelope, result } = s;
    this.checkRun(result.runId);
    if (bytesToHex(envelope.from) !== this.id)
      throw new Refusal('bad_signature', 'envelope.from is not the identity that joined this connection');
    let commitment: Uint8Array;
    try {
      commitment = verifySignedResult(envelope, result, this.relay.limits);
    } catch (e) {
      if (e instanceof WireError) throw new Refusal('bad_signature', e.message);
      throw e;
    }
    const round = host.state.epoch.rounds.find((r) => r.step === result.step);
    if (!round)
      throw new Refusal(
        'unknown_round',
        `no stored round has step ${result.step} (the coordinator keeps the last 4)`,
      );
    const mine = roundAssignments(host.state, round).some(
      (a) => a.id === this.id && a.batch.start === result.batch.start && a.batch.end === result.batch.end,
    );
    if (!mine)
      throw new Refusal(
        'not_assignee',
        `batch ${result.batch.start}..${result.batch.end} of step ${result.step} is not assigned to this client`,
      );
    this.relay.store.insertResult(
      this.runId,
      {
        commitment: bytesToHex(commitment),
        step: result.step,
        batch_start: result.batch.start,
        batch_end: result.batch.end,
        sender: this.id,
        frame: bytes,
      },
      this.relay.clock(),
    );
  }

  private announce(a: Announce, bytes: Uint8Array): void {
    this.checkRun(a.runId);
    try {
      verifyAnnounce(a);
    } catch (e) {
      if (e instanceof WireError) throw new Refusal('bad_signature', e.message);
      throw e;
    }
    if (bytesToHex(a.from) !== this.id)
      throw new Refusal('bad_signature', 'announce.from is not the identity that joined this connection');
    const commitment = bytesToHex(a.commitment);
    const stored = this.relay.store.result(this.runId, commitment);
    if (!stored || stored.sender !== this.id)
      throw new Refusal('unknown_result', 'send the SignedResult of this commitment before announcing it');
    if (
      stored.step !== a.step ||
      stored.batch_start !== a.batch.start ||
      stored.batch_end !== a.batch.end ||
      stored.frame.length - ENVELOPE_BYTES !== a.size
    )
      throw new Refusal(
        'bad_signature',
        'the announce claims a step, batch or size the stored result does not have',
      );
    // Forward once: a repeated announce (client retry) is acknowledged but not re-broadcast.
    if (stored.announce !== null) return;
    this.relay.store.setAnnounce(this.runId, commitment, bytes);
    this.relay.broadcast(this.runId, bytes, this);
  }

  private witness(host: RunHost, w: WitnessMessage): void {
    if (host.state.run_state === 'Warmup') {
      // No round is open in Warmup: a Witness frame is the client's warmup_witness (PROTOCOL.md).
      this.coordinator(host, { type: 'warmup_witness', id: this.id });
      return;
    }
    this.coordinator(host, {
      type: 'witness',
      id: this.id,
      step: w.step,
      proof: w.proof,
      participant_bloom: w.participantBloom,
      broadcast_bloom: w.broadcastBloom,
      broadcast_merkle: bytesToHex(w.broadcastMerkle),
    });
    if (w.metadata) {
      host.recordWitnessMetadata(w.step, this.id, w.metadata);
      if (Number.isFinite(w.metadata.loss)) this.relay.hooks.loss(this.runId, w.metadata.loss);
    }
  }

  private healthCheck(host: RunHost, h: HealthCheck): void {
    // HealthReport.clientIndex indexes the epoch's client list; core checks the proof names that client.
    const clients = host.state.epoch.clients;
    const checks = h.reports.map((r) => ({ id: clients[r.clientIndex]?.id ?? '', proof: r.committeeProof }));
    this.coordinator(host, { type: 'health_check', id: this.id, checks });
  }

  private paramHash(host: RunHost, p: ParamHash): void {
    this.checkRun(p.runId);
    const hash = bytesToHex(p.hash);
    const before = new Set(host.paramHashReport().find((e) => e.epoch === p.epoch)?.mismatched ?? []);
    const out = host.reportParamHash(this.id, p.epoch, p.step, hash);
    this.relay.hooks.paramHash(this.runId, p.epoch, out.reports, out.mismatched.length);
    // Tell clients that just became the minority (not this one: it gets the reply below).
    for (const client of out.mismatched) {
      if (client === this.id || before.has(client)) continue;
      for (const s of this.relay.sessionsOf(this.runId))
        if (s.identity === client)
          s.send(
            encodeControlError(
              { requestId: 0, code: 'param_hash_mismatch', message: mismatchMessage(p.epoch, out.majority) },
              this.relay.limits,
            ),
          );
    }
    if (out.majority !== undefined && out.majority !== hash)
      throw new Refusal('param_hash_mismatch', mismatchMessage(p.epoch, out.majority), false);
  }
}

function mismatchMessage(epoch: number, majority: string | undefined): string {
  return `your parameters differ from the majority of epoch ${epoch} (${majority?.slice(0, 16) ?? '?'}…); re-sync from the checkpoint or peers`;
}
