// The relay link's connection supervisor: one loop per link owns the connecting. It opens one connection at a
// time, waits for the Join's Ack, then for the socket to drop, and reconnects after a capped, jittered
// exponential backoff; nothing else ever opens a socket, so attempts never overlap or multiply (a relay
// restart used to make every failed attempt start a loop of its own: tens of thousands of connections per
// trainer). The relay keeps a dropped member's slot for a grace period, so a quick re-join keeps it.

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

/** One connection attempt: resolves once joined, with a promise of the connection's end. */
export type ConnectAttempt = () => Promise<{ dropped: Promise<void> }>;

const CLOSED = 'the relay link is closed';

/** Runs `attempt` again and again until stop(), with the backoff above between failures. */
export class ReconnectLoop {
  /** Set by stop(), cleared by start(). */
  closed = false;
  /** Resolved while joined; a new pending gate replaces it when the connection drops. */
  private ready: Gate = gate();
  /** The one loop, while it runs. */
  private loop: Promise<void> | null = null;
  /** Ends the current backoff wait early (stop, restartNow). */
  private wake: (() => void) | null = null;
  /** Reconnect without waiting: set by restartNow, whose caller closes the socket on purpose. */
  private immediate = false;

  private readonly attempt: ConnectAttempt;
  private readonly log: (line: string) => void;

  constructor(attempt: ConnectAttempt, log: (line: string) => void) {
    this.attempt = attempt;
    this.log = log;
  }

  /**
   * Starts the loop (if it is not running) and resolves once joined. If the very first attempt fails, this
   * rejects and the loop stops (the caller decides what to do); once it has joined, every later drop is
   * retried here until stop().
   */
  start(): Promise<void> {
    this.closed = false;
    if (!this.loop) {
      this.ready = gate();
      this.loop = this.run().finally(() => {
        this.loop = null;
      });
    }
    return this.ready.promise;
  }

  /** True while the latest attempt is joined and its connection has not dropped. */
  get joined(): boolean {
    return this.ready.open;
  }

  /** Resolves once joined: waits through a reconnect, or starts the loop if it is not running. */
  whenJoined(): Promise<void> {
    return this.loop ? this.ready.promise : this.start();
  }

  /** Reconnects at once after `drop` ended the current connection; resolves when joined again. */
  async restartNow(drop: () => void): Promise<void> {
    if (!this.loop) return this.start();
    if (this.ready.settled) this.ready = gate();
    const next = this.ready.promise;
    this.immediate = true;
    this.wake?.();
    drop();
    await next;
  }

  /** Ends the loop; `drop` ends the current connection. */
  stop(drop: () => void): void {
    this.closed = true;
    this.wake?.();
    drop();
    if (!this.ready.settled) this.ready.reject(new Error(CLOSED));
  }

  private async run(): Promise<void> {
    let failures = 0;
    let everJoined = false;
    while (!this.closed) {
      let dropped: Promise<void>;
      try {
        ({ dropped } = await this.attempt());
      } catch (e) {
        if (this.closed) break;
        if (!everJoined) {
          // Never joined since start(): report to the caller instead of retrying behind its back.
          const failed = this.ready;
          this.ready = gate();
          failed.reject(e as Error);
          return;
        }
        failures++;
        this.log(`reconnect failed (${failures} in a row): ${(e as Error).message}`);
        if (this.immediate) this.immediate = false;
        else await this.backoff(failures);
        continue;
      }
      const upSince = Date.now();
      if (everJoined) this.log('reconnected to the relay');
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
      this.log('connection to the relay lost; reconnecting');
      await this.backoff(failures);
    }
    if (!this.ready.settled) this.ready.reject(new Error(CLOSED));
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
}
