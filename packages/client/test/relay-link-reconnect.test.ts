// The relay link's reconnect loop on its own, with scripted connection attempts in place of sockets (the real
// relay behind it: apps/relay/test/relay-link-reconnect.test.ts, restart.test.ts).
import { describe, expect, it } from 'vitest';
import {
  ReconnectLoop,
  reconnectDelay,
  RECONNECT_BASE_MS,
  RECONNECT_MAX_MS,
} from '../src/relay-link-reconnect.ts';

/** Attempts that fail or join as scripted; a joined attempt's connection ends when `drop()` is called. */
function scripted(outcomes: ('fail' | 'join')[]) {
  const calls: number[] = [];
  let endCurrent: (() => void) | null = null;
  const attempt = (): Promise<{ dropped: Promise<void> }> => {
    calls.push(Date.now());
    const outcome = outcomes.shift() ?? 'fail';
    if (outcome === 'fail') return Promise.reject(new Error('refused'));
    const dropped = new Promise<void>((r) => (endCurrent = r));
    return Promise.resolve({ dropped });
  };
  const drop = (): void => {
    const end = endCurrent;
    endCurrent = null;
    end?.();
  };
  return { attempt, calls, drop };
}

const until = async (cond: () => boolean, ms = 5000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('ReconnectLoop', () => {
  it('reports a first failure to the caller and does not retry it', async () => {
    const s = scripted(['fail', 'join']);
    const loop = new ReconnectLoop(s.attempt, () => {});
    await expect(loop.start()).rejects.toThrow('refused');
    await new Promise((r) => setTimeout(r, 300));
    expect(s.calls).toHaveLength(1);
    expect(loop.joined).toBe(false);
  });

  it('after a join, a drop and failed attempts are retried with growing waits until it joins again', async () => {
    const s = scripted(['join', 'fail', 'fail', 'join']);
    const lines: string[] = [];
    const loop = new ReconnectLoop(s.attempt, (l) => lines.push(l));
    await loop.start();
    expect(loop.joined).toBe(true);
    s.drop();
    await until(() => s.calls.length === 4 && loop.joined);
    // Waits after 1, 2, 3 failures in a row: at least half of 250, 500, 1000 ms.
    const waits = s.calls.slice(1).map((t, i) => t - s.calls[i]!);
    expect(waits[0]).toBeGreaterThanOrEqual(RECONNECT_BASE_MS / 2 - 5);
    expect(waits[1]).toBeGreaterThanOrEqual(RECONNECT_BASE_MS - 5);
    expect(waits[2]).toBeGreaterThanOrEqual(RECONNECT_BASE_MS * 2 - 5);
    expect(lines).toContain('reconnected to the relay');
    await loop.whenJoined();
    loop.stop(s.drop);
  });

  it('restartNow reconnects at once, without a backoff; stop ends the loop', async () => {
    const s = scripted(['join', 'join']);
    const loop = new ReconnectLoop(s.attempt, () => {});
    await loop.start();
    const t0 = Date.now();
    await loop.restartNow(s.drop);
    expect(s.calls).toHaveLength(2);
    expect(Date.now() - t0).toBeLessThan(RECONNECT_BASE_MS / 2);
    loop.stop(s.drop);
    expect(loop.closed).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(s.calls).toHaveLength(2);
  });

  it('reconnectDelay: equal jitter in the upper half of a capped doubling', () => {
    expect(reconnectDelay(1, 0)).toBe(RECONNECT_BASE_MS / 2);
    expect(reconnectDelay(1, 0.999)).toBeLessThan(RECONNECT_BASE_MS);
    expect(reconnectDelay(3, 0)).toBe(RECONNECT_BASE_MS * 2);
    expect(reconnectDelay(40, 0.5)).toBe(RECONNECT_MAX_MS * 0.75);
  });
});
