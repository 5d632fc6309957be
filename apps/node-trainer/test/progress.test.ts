import { describe, expect, it } from 'vitest';
import { Progress } from '../src/progress/index.ts';

function sink(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, stream: { isTTY, columns: 80, write: (s: string) => (writes.push(s), true) } };
}

describe('Progress', () => {
  it('redraws one bar in place on a terminal', () => {
    const { writes, stream } = sink(true);
    const p = new Progress('work', 10, { stream });
    p.update(5);
    p.finish('done');
    expect(writes.every((w) => w === '\n' || w.startsWith('\r'))).toBe(true);
    expect(writes.at(-2)).toMatch(/work \[#+\] 100% 10\/10 .*done/);
    expect(writes.at(-1)).toBe('\n');
  });

  it('prints plain, rate-limited lines when not a terminal', () => {
    const { writes, stream } = sink(false);
    const p = new Progress('work', 1000, { stream, intervalMs: 60_000 });
    for (let i = 1; i <= 1000; i++) p.update(i);
    p.finish();
    expect(writes.length).toBe(2); // the first update and the final line
    expect(writes.every((w) => w.endsWith('\n') && !w.includes('\r'))).toBe(true);
    expect(writes[1]).toMatch(/^work: 100% 1000\/1000/);
  });
});
