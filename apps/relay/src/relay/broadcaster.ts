// Fans each run's state changes out to its sessions: a joiner gets the state once (StateSnapshot), then only
// what changed (StateDelta: the transitions, coalesced per snapshot interval, one encoded frame for everyone);
// light sessions get LightDelta frames and summary snapshots instead. A ResyncRequest is answered from the
// recent frames when they still cover the gap, else with a snapshot.
import { encodeStateDelta } from '@meshtrain/core';
import type { ResyncRequest, SnapshotParamHash, WireLimits, WireTransition } from '@meshtrain/core';
import { LightFeed } from '../light-feed.ts';
import type { CommittedTransition, RunHost } from '../run-host.ts';
import type { SlicedQueue } from '../sliced-queue.ts';
import type { RelayLog, SessionHandle } from './types.ts';

/** Sessions a broadcast sends to per queued job (a few hundred microseconds of socket writes). */
const FAN_OUT_CHUNK = 64;
/** Transitions per StateDelta frame: a burst beyond this goes out as several frames. */
const DELTA_FRAME_TRANSITIONS = 4096;
/** Recent delta frames kept per run to answer a client's gap (older gaps get a snapshot). */
const RING_FRAMES = 256;
const RING_BYTES = 8 * 1024 * 1024;
/** How often a delta frame carries the state's hash (and always at a phase change). */
const HASH_INTERVAL_MS = 1000;
/** A client gets at most one snapshot per this long for its ResyncRequests (a snapshot can be megabytes). */
export const RESYNC_SNAPSHOT_INTERVAL_MS = 2000;

/** What the broadcaster keeps per run to feed its sessions. */
interface RunFeed {
  /** Transitions since the last broadcast, the first applying to seq `pendingFrom`. */
  pending: WireTransition[];
  pendingFrom: number;
  /** A phase changed since the last broadcast: its frame carries the state hash. */
  hashNow: boolean;
  lastHashAt: number;
  /** The parameter hash the previous frame (or a snapshot) advertised. */
  paramHash: SnapshotParamHash | undefined;
  ring: { from: number; to: number; frame: Uint8Array }[];
  ringBytes: number;
  /** Sessions waiting for a snapshot (joiners, resyncs): sent at the next broadcast, one encoding for all. */
  waiting: Set<SessionHandle>;
  /** The same run for light sessions. */
  light: LightFeed;
}

export interface BroadcasterOptions {
  limits: WireLimits;
  /** Least time between two broadcasts of one run. */
  snapshotIntervalMs: number;
  /** The relay's work queue: sends go through it, after the frames queued before them. */
  work: SlicedQueue;
  log: RelayLog;
  /** The run's live sessions. */
  sessionsOf: (runId: string) => SessionHandle[];
  /** Whether `host` is still the run the relay hosts (a broadcast for a replaced one is dropped). */
  isHosted: (host: RunHost) => boolean;
  /** A client replayed the run's deltas to another state hash than the relay's. */
  stateHashMismatch: (runId: string) => void;
}

export class Broadcaster {
  private readonly opts: BroadcasterOptions;
  private readonly feeds = new Map<string, RunFeed>();
  private readonly pendingBroadcasts = new Set<string>();
  /** performance.now() of each run's last broadcast (monotonic: independent of the injectable clock). */
  private readonly lastBroadcast = new Map<string, number>();
  /** The seq each session's state was last brought to (snapshot or delta); unset until its first snapshot. */
  private readonly sentSeq = new WeakMap<SessionHandle, number>();
  /** performance.now() of the last snapshot a session's ResyncRequest got. */
  private readonly resyncedAt = new WeakMap<SessionHandle, number>();

  constructor(opts: BroadcasterOptions) {
    this.opts = opts;
  }

  private feed(runId: string): RunFeed {
    let f = this.feeds.get(runId);
    if (!f) {
      f = {
        pending: [],
        pendingFrom: 0,
        hashNow: false,
        lastHashAt: -Infinity,
        paramHash: undefined,
        ring: [],
        ringBytes: 0,
        waiting: new Set(),
        light: new LightFeed(),
      };
      this.feeds.set(runId, f);
    }
    return f;
  }

  /** A committed transition of `host`: queued for the run's next broadcast. */
  changed(host: RunHost, t: CommittedTransition): void {
    const feed = this.feed(host.runId);
    if (feed.pending.length === 0) feed.pendingFrom = t.seq - 1;
    feed.pending.push(t.wire);
    const phaseChanged = t.effects.some((e) => e.type === 'RunStateChanged');
    if (phaseChanged) feed.hashNow = true;
    feed.light.push(t.seq, t.light, phaseChanged);
    this.scheduleBroadcast(host);
  }

  /** A session closed: it no longer waits for a snapshot. */
  forget(runId: string, session: SessionHandle): void {
    this.feeds.get(runId)?.waiting.delete(session);
  }

  /**
   * Broadcasts are throttled per run: at most one per snapshotIntervalMs, carrying every transition since the
   * last one in one StateDelta that is encoded once and sent to every session. A change after a quiet period
   * goes out right away (next event-loop turn); during a burst the trailing one carries the rest.
   */
  private scheduleBroadcast(host: RunHost): void {
    if (this.pendingBroadcasts.has(host.runId)) return;
    this.pendingBroadcasts.add(host.runId);
    const wait =
      (this.lastBroadcast.get(host.runId) ?? -Infinity) + this.opts.snapshotIntervalMs - performance.now();
    if (wait <= 0) setImmediate(() => this.flushBroadcast(host));
    else setTimeout(() => this.flushBroadcast(host), wait).unref();
  }

  private flushBroadcast(host: RunHost): void {
    this.pendingBroadcasts.delete(host.runId);
    this.lastBroadcast.set(host.runId, performance.now());
    if (!this.opts.isHosted(host)) return;
    const feed = this.feed(host.runId);
    try {
      if (feed.pending.length > 0) this.sendDeltas(host, feed);
      this.sendLightDelta(host, feed);
      if (feed.waiting.size > 0) {
        const to = [...feed.waiting];
        feed.waiting.clear();
        for (const s of to) this.sentSeq.set(s, host.seq);
        const light = to.filter((s) => s.light === true);
        const full = to.filter((s) => s.light !== true);
        if (full.length > 0) this.fanOut(host.snapshotFrame(), full);
        if (light.length > 0) this.fanOut(host.lightSnapshotFrame(), light);
      }
    } catch (e) {
      // A timer callback: an exception here would end the process. The next change broadcasts again.
      this.opts.log.warn(`run ${host.runId}: broadcast failed: ${(e as Error).stack ?? String(e)}`);
    }
  }

  /** The pending transitions as StateDelta frames, to every session that has its snapshot. */
  private sendDeltas(host: RunHost, feed: RunFeed): void {
    const pending = feed.pending;
    let from = feed.pendingFrom;
    feed.pending = [];
    const sessions = this.opts.sessionsOf(host.runId);
    for (let i = 0; i < pending.length; i += DELTA_FRAME_TRANSITIONS) {
      const transitions = pending.slice(i, i + DELTA_FRAME_TRANSITIONS);
      const to = from + transitions.length;
      const frame = this.deltaFrame(host, feed, from, transitions, to === host.seq);
      feed.ring.push({ from, to, frame });
      feed.ringBytes += frame.length;
      while (feed.ring.length > RING_FRAMES || feed.ringBytes > RING_BYTES)
        feed.ringBytes -= feed.ring.shift()!.frame.length;
      this.fanOut(frame, this.behind(sessions, false, to));
      from = to;
    }
  }

  /** One StateDelta frame; the last of a broadcast carries the state hash when due, and a new parameter hash. */
  private deltaFrame(
    host: RunHost,
    feed: RunFeed,
    from: number,
    transitions: WireTransition[],
    last: boolean,
  ): Uint8Array {
    const now = performance.now();
    const hashed = last && (feed.hashNow || now - feed.lastHashAt >= HASH_INTERVAL_MS);
    const paramHash = last && host.paramHash !== feed.paramHash ? host.paramHash : undefined;
    const frame = encodeStateDelta(
      {
        runId: host.runId,
        fromSeq: from,
        transitions,
        ...(hashed ? { stateHash: host.stateHash() } : {}),
        ...(paramHash ? { paramHash } : {}),
      },
      this.opts.limits,
    );
    if (hashed) {
      feed.hashNow = false;
      feed.lastHashAt = now;
    }
    if (last) feed.paramHash = host.paramHash;
    return frame;
  }

  /**
   * The sessions of one kind (light or full) that have their snapshot and are behind `to`; each is marked as
   * brought to `to`.
   */
  private behind(sessions: readonly SessionHandle[], light: boolean, to: number): SessionHandle[] {
    const targets: SessionHandle[] = [];
    for (const s of sessions) {
      if ((s.light === true) !== light) continue;
      const at = this.sentSeq.get(s);
      if (at === undefined || at >= to) continue;
      targets.push(s);
      this.sentSeq.set(s, to);
    }
    return targets;
  }

  /** The light sessions' frame for everything up to the run's seq, when they need one. */
  private sendLightDelta(host: RunHost, feed: RunFeed): void {
    const light = this.opts.sessionsOf(host.runId).filter((s) => s.light === true);
    if (light.length === 0 && ![...feed.waiting].some((s) => s.light === true)) {
      feed.light.skipTo(host.seq);
      return;
    }
    const f = feed.light.flush(
      host.runId,
      host.seq,
      host.paramHash,
      () => host.lightStateHash(),
      this.opts.limits,
    );
    if (!f) return;
    this.fanOut(f.frame, this.behind(light, true, f.to));
  }

  /** Sends `frame` to `targets` through the work queue, a chunk per job (after everything queued before). */
  private fanOut(frame: Uint8Array, targets: readonly SessionHandle[]): void {
    for (let i = 0; i < targets.length; i += FAN_OUT_CHUNK) {
      const chunk = targets.slice(i, i + FAN_OUT_CHUNK);
      this.opts.work.push(() => {
        for (const s of chunk) s.send(frame);
      });
    }
  }

  /** Sends the run's current state to a session (its join): at the next broadcast, with everyone else's. */
  queueSnapshot(session: SessionHandle, host: RunHost): void {
    this.feed(host.runId).waiting.add(session);
    this.scheduleBroadcast(host);
  }

  /**
   * A session's ResyncRequest: the delta frames after its seq from the ring when the ring still covers them,
   * else (and for a mismatch, always) a snapshot — at most one per RESYNC_SNAPSHOT_INTERVAL_MS per session.
   * 'too_soon' when that snapshot would come too early (the client asks again later).
   */
  resync(session: SessionHandle, host: RunHost, q: ResyncRequest): 'deltas' | 'snapshot' | 'too_soon' {
    if (q.reason === 'gap' && q.seq <= host.seq) {
      const frames = this.framesAfter(session, host, q.seq);
      if (frames) {
        // After the request's Ack, which the session sends when this returns.
        queueMicrotask(() => {
          for (const f of frames.frames) session.send(f);
        });
        this.sentSeq.set(session, Math.max(this.sentSeq.get(session) ?? -1, frames.to));
        return 'deltas';
      }
    }
    const now = performance.now();
    if (now - (this.resyncedAt.get(session) ?? -Infinity) < RESYNC_SNAPSHOT_INTERVAL_MS) return 'too_soon';
    this.resyncedAt.set(session, now);
    if (q.reason === 'mismatch') {
      this.opts.stateHashMismatch(host.runId);
      this.opts.log.warn(
        `run ${host.runId}: client ${session.identity.slice(0, 12)}… replayed seq ${q.seq} to another state hash; sending it a snapshot`,
      );
    }
    this.queueSnapshot(session, host);
    return 'snapshot';
  }

  /** The kept frames (light or full, as the session follows) after `seq`, or null when they do not reach it. */
  private framesAfter(
    session: SessionHandle,
    host: RunHost,
    seq: number,
  ): { frames: Uint8Array[]; to: number } | null {
    const feed = this.feed(host.runId);
    if (session.light === true) {
      const frames = feed.light.framesAfter(seq);
      return frames ? { frames: frames.map((f) => f.frame), to: frames.at(-1)?.to ?? seq } : null;
    }
    const i = feed.ring.findIndex((f) => f.to > seq);
    if (i < 0 || feed.ring[i]!.from > seq) return null;
    return { frames: feed.ring.slice(i).map((f) => f.frame), to: feed.ring.at(-1)!.to };
  }
}
