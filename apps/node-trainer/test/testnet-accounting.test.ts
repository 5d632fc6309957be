// The local testnet's retried/lost figures, from round history rows like the relay's API returns.
import { describe, expect, it } from 'vitest';
import { dataAccounting } from '../src/testnet/index.ts';

const row = (
  step: number,
  epoch: number,
  height: number,
  data_index: number,
  accepted: [number, number, boolean][],
) => ({
  step,
  epoch,
  height,
  data_index,
  training: true,
  quorum_reached: true,
  accepted: accepted.map(([start, end, ok]) => ({ batch: { start, end }, commitment: ok ? 'ab' : null })),
});

describe('testnet data accounting', () => {
  it('counts a retried batch once and nothing lost; the last two rounds of an epoch are not applied', () => {
    const rows = [
      row(1, 0, 0, 0, [
        [0, 3, true],
        [4, 7, false],
      ]),
      row(2, 0, 1, 8, [
        [8, 11, true],
        [12, 15, true],
      ]),
      row(3, 0, 2, 16, [
        [4, 7, true],
        [16, 19, true],
      ]),
      // Last two rounds: rewound, never applied.
      row(4, 0, 3, 20, [[20, 23, true]]),
      row(5, 0, 4, 24, []),
      row(6, 1, 0, 20, [[20, 23, true]]),
      row(7, 1, 1, 24, []),
      row(8, 1, 2, 24, []),
    ];
    expect(dataAccounting(rows)).toEqual({ batches_retried: 1, batches_lost: 0, samples_applied_twice: 0 });
  });

  it('reports a batch never retried as lost, and unknown without the first round', () => {
    const rows = [row(1, 0, 0, 0, [[0, 3, false]]), row(2, 0, 1, 4, []), row(3, 0, 2, 4, [])];
    expect(dataAccounting(rows).batches_lost).toBe(1);
    expect(dataAccounting(rows.slice(1)).batches_lost).toBeNull();
  });
});
