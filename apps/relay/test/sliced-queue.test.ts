// The relay's work queue: FIFO, at most one slice of work per event-loop turn, so timers run between slices
// of a burst; a failing job is reported and the rest go on.
import { describe, expect, it } from 'vitest';
import { SlicedQueue } from '../src/sliced-queue.ts';

describe('SlicedQueue', () => {
  it('runs jobs in order, yielding to timers between slices of a burst', async () => {
    const errors: unknown[] = [];
    const q = new SlicedQueue(5, (e) => errors.push(e));
    const done: number[] = [];
    let timerFiredAfter = -1;
    setTimeout(() => (timerFiredAfter = done.length), 0);
    for (let i = 0; i < 200; i++)
      q.push(() => {
        const until = performance.now() + 0.5;
        while (performance.now() < until) {
          // half a millisecond of work per job: 100 ms in all
        }
        done.push(i);
      });
    q.push(() => {
      throw new Error('boom');
    });
    q.push(() => done.push(200));
    expect(q.length).toBe(202);
    await new Promise<void>((res) => {
      const check = () => (q.length === 0 ? res() : setTimeout(check, 5));
      check();
    });
    expect(done).toEqual(Array.from({ length: 201 }, (_, i) => i));
    expect(errors).toHaveLength(1);
    // The timer ran while the burst was still being worked through, not after it.
    expect(timerFiredAfter).toBeGreaterThan(0);
    expect(timerFiredAfter).toBeLessThan(150);
  });
});
