// A backend whose calls of one method are counted (and still made): which path an operation took.
import type { DistroBackend } from '../src/index.ts';

export function countCalls(
  be: DistroBackend,
  method: 'applyAggregated' | 'applyOuter',
): { spied: DistroBackend; calls: { n: number } } {
  const calls = { n: 0 };
  const original = be[method] as (...args: unknown[]) => void;
  const spied: DistroBackend = {
    ...be,
    [method]: (...args: unknown[]) => {
      calls.n++;
      original(...args);
    },
  };
  return { spied, calls };
}
