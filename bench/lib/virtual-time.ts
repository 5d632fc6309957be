// Virtual time for an in-process run: the clients' clock and sleeps (ClientOptions.now/sleep) and the
// LocalHub's coordinator ticks move only when every client is idle. Real work (ONNX train steps, DisTrO)
// takes no virtual time, so no round times out because the four peers share one machine, and no real
// timer slows the run: a round lasts exactly as long as its compute.
import type { LocalHub } from '@meshtrain/client/testing';

interface Timer {
  at: number;
  resolve: () => void;
}

export class VirtualClock {
  private ms: number;
  private timers: Timer[] = [];
  private readonly hub: LocalHub;

  constructor(hub: LocalHub) {
    this.hub = hub;
    this.ms = hub.now * 1000;
  }

  /** Milliseconds on the hub's clock. */
  readonly now = (): number => this.ms;

  readonly sleep = (ms: number): Promise<void> =>
    new Promise<void>((resolve) => this.timers.push({ at: this.ms + Math.max(0, ms), resolve }));

  /** Virtual seconds since the hub started. */
  get seconds(): number {
    return this.ms / 1000;
  }

  /**
   * One step of time: fires timers already due, else moves to the earliest timer or the next whole second
   * (ticking the coordinator there), whichever comes first.
   */
  advance(): void {
    const due = this.timers.filter((t) => t.at <= this.ms);
    if (due.length === 0) {
      const nextSecond = (Math.floor(this.ms / 1000) + 1) * 1000;
      const nextTimer = this.timers.reduce((m, t) => Math.min(m, t.at), Infinity);
      this.ms = Math.min(nextSecond, nextTimer);
      if (this.ms === nextSecond) this.hub.advance(1);
    }
    const fire = this.timers.filter((t) => t.at <= this.ms);
    this.timers = this.timers.filter((t) => t.at > this.ms);
    for (const t of fire) t.resolve();
  }
}

const turn = () => new Promise<void>((r) => setImmediate(r));

/**
 * Resolves once nothing is running: `busy()` (the shared ONNX backend's queue) has settled and a few event
 * loop turns passed without new work. Everything else a client does between two awaits of real work is
 * promise continuations, which a turn drains.
 */
export async function quiesce(busy: () => Promise<void> | null, turns = 3): Promise<void> {
  for (let quiet = 0; quiet < turns;) {
    const pending = busy();
    if (pending) {
      await pending;
      quiet = 0;
      continue;
    }
    await turn();
    quiet = busy() ? 0 : quiet + 1;
  }
}
