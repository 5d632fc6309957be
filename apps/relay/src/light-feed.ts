// What the relay sends light replicas of one run (docs/protocol.md "Round outcomes and light replicas"):
// LightDelta frames that carry only the transitions that change the summary of the state. Between two frames the relay may apply
// thousands of transitions (results, attestations, verdicts) that a light replica never sees; a frame still
// names the seq it leads to, so replicas, resyncs and the ring stay in the relay's one numbering.
import {
  encodeLightDelta,
  type LightTransition,
  type SnapshotParamHash,
  type WireLimits,
} from '@meshtrain/core';

/** Recent frames kept to answer a light session's gap (older gaps get a snapshot). */
const RING_FRAMES = 256;
const RING_BYTES = 4 * 1024 * 1024;
/** How often a frame carries the summary's hash (and always after a phase change). */
const HASH_INTERVAL_MS = 1000;

export interface LightFrame {
  from: number;
  to: number;
  frame: Uint8Array;
}

export class LightFeed {
  private pending: LightTransition[] = [];
  /** The seq the next frame starts from: where the previous one led (or the first change's seq − 1). */
  private from = -1;
  private hashNow = false;
  private lastHashAt = -Infinity;
  /** The parameter hash the previous frame advertised. */
  private paramHash: SnapshotParamHash | undefined;
  private readonly ring: LightFrame[] = [];
  private ringBytes = 0;

  /** Records the transition that led to `seq` (null: nothing a light replica holds changed). */
  push(seq: number, t: LightTransition | null, phaseChanged: boolean): void {
    if (this.from < 0) this.from = seq - 1;
    if (t) this.pending.push(t);
    if (phaseChanged) this.hashNow = true;
  }

  /**
   * The frame that brings light replicas to `toSeq`, or null when they need none (no light change and no new
   * parameter hash since the last frame). `hash` computes the summary's hash at `toSeq` when one is due.
   */
  flush(
    runId: string,
    toSeq: number,
    paramHash: SnapshotParamHash | undefined,
    hash: () => Uint8Array,
    limits: WireLimits,
  ): LightFrame | null {
    if (this.from < 0 || toSeq <= this.from) return null;
    const newParamHash = paramHash !== this.paramHash ? paramHash : undefined;
    if (this.pending.length === 0 && newParamHash === undefined) return null;
    const now = performance.now();
    const hashed = this.hashNow || now - this.lastHashAt >= HASH_INTERVAL_MS;
    const frame = encodeLightDelta(
      {
        runId,
        fromSeq: this.from,
        toSeq,
        transitions: this.pending,
        ...(hashed ? { stateHash: hash() } : {}),
        ...(newParamHash ? { paramHash: newParamHash } : {}),
      },
      limits,
    );
    if (hashed) {
      this.hashNow = false;
      this.lastHashAt = now;
    }
    this.paramHash = paramHash;
    const out = { from: this.from, to: toSeq, frame };
    this.pending = [];
    this.from = toSeq;
    this.ring.push(out);
    this.ringBytes += frame.length;
    while (this.ring.length > RING_FRAMES || this.ringBytes > RING_BYTES)
      this.ringBytes -= this.ring.shift()!.frame.length;
    return out;
  }

  /**
   * No light session follows the run: drop what is pending instead of encoding and hashing it. A session that
   * comes later starts from a snapshot; the ring's hole before `seq` sends an older gap to a snapshot too.
   */
  skipTo(seq: number): void {
    this.pending = [];
    if (seq > this.from) this.from = seq;
  }

  /** The ring's frames that bring a replica at `seq` up to date, or null when the ring no longer reaches it. */
  framesAfter(seq: number): LightFrame[] | null {
    const i = this.ring.findIndex((f) => f.to > seq);
    // Past every frame: the next flush (which starts where the last frame led) covers it.
    if (i < 0) return this.ring.length > 0 ? [] : null;
    return this.ring[i]!.from <= seq ? this.ring.slice(i) : null;
  }
}
