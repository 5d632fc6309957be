// Which session is each identity's live connection to a run, and the grace period a dropped one gets: after
// it, the identity leaves the run unless it reconnected by then.
import type { RelayLog, SessionHandle } from './types.ts';

export class SessionAttachments {
  /** runId → identity → the one live session of that identity. */
  private readonly sessions = new Map<string, Map<string, SessionHandle>>();
  /** `${runId} ${identity}` → pending disconnect-leave timer. */
  private readonly graceTimers = new Map<string, NodeJS.Timeout>();
  private readonly graceMs: number;
  private readonly log: RelayLog;
  /** Feeds `leave` for the identity to its run, if the run is still hosted. */
  private readonly leave: (runId: string, identity: string) => void;

  constructor(graceMs: number, log: RelayLog, leave: (runId: string, identity: string) => void) {
    this.graceMs = graceMs;
    this.log = log;
    this.leave = leave;
  }

  /** Registers `session` as the identity's live connection; returns the one it replaces, if any. */
  attach(runId: string, session: SessionHandle): SessionHandle | undefined {
    let m = this.sessions.get(runId);
    if (!m) {
      m = new Map();
      this.sessions.set(runId, m);
    }
    const old = m.get(session.identity);
    m.set(session.identity, session);
    this.cancelGrace(runId, session.identity);
    return old === session ? undefined : old;
  }

  /** A session's transport closed. If it was the live one, start the grace period before `leave`. */
  detach(runId: string, session: SessionHandle, left: boolean): void {
    const m = this.sessions.get(runId);
    if (!m || m.get(session.identity) !== session) return;
    m.delete(session.identity);
    if (left) return;
    this.scheduleLeave(runId, session.identity);
  }

  has(runId: string, identity: string): boolean {
    return this.sessions.get(runId)?.has(identity) ?? false;
  }

  /** After the grace period, `leave` for `identity` unless it has a live session again by then. */
  scheduleLeave(runId: string, identity: string): void {
    const key = `${runId} ${identity}`;
    this.cancelGrace(runId, identity);
    const t = setTimeout(() => {
      this.graceTimers.delete(key);
      if (this.has(runId, identity)) return;
      // UnknownClient (already left, ejected, epoch over) is fine: there is nothing to withdraw.
      try {
        this.leave(runId, identity);
      } catch (e) {
        this.log.warn(`run ${runId}: leave after disconnect failed: ${(e as Error).message}`);
      }
    }, this.graceMs);
    t.unref();
    this.graceTimers.set(key, t);
  }

  private cancelGrace(runId: string, identity: string): void {
    const key = `${runId} ${identity}`;
    const t = this.graceTimers.get(key);
    if (t) {
      clearTimeout(t);
      this.graceTimers.delete(key);
    }
  }

  sessionsOf(runId: string): SessionHandle[] {
    return [...(this.sessions.get(runId)?.values() ?? [])];
  }

  /** Stops every pending grace timer (the relay is stopping). */
  stop(): void {
    for (const t of this.graceTimers.values()) clearTimeout(t);
    this.graceTimers.clear();
  }

  /** Closes every session (e.g. at shutdown). */
  closeAll(code: number, reason: string): void {
    for (const m of this.sessions.values()) for (const s of [...m.values()]) s.close(code, reason);
  }
}
