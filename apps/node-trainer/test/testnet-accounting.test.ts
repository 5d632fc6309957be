// The local testnet's retried/lost figures, from round history rows like the relay's API returns.
import { describe, expect, it } from 'vitest';
import { cheaterAccounting } from '../src/testnet/accounting.ts';
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

describe('testnet cheater accounting', () => {
  const C = 'c'.repeat(64);
  const H = 'h'.repeat(64);
  /** A round of `epoch` at `height` whose accepted results came from these clients (null: none accepted). */
  const round = (step: number, epoch: number, height: number, from: (string | null)[]) => ({
    step,
    epoch,
    height,
    data_index: 0,
    training: true,
    quorum_reached: true,
    accepted: from.map((client, i) => ({
      batch: { start: 4 * i, end: 4 * i + 3 },
      client: client ?? H,
      commitment: client === null ? null : 'ab',
    })),
  });
  // Epoch 0: heights 0..5, the last two (4, 5) never applied.
  const epoch0 = [
    round(1, 0, 0, [C, H]),
    round(2, 0, 1, [C, H]),
    round(3, 0, 2, [null, H]),
    round(4, 0, 3, [H]),
    round(5, 0, 4, [C, H]),
    round(6, 0, 5, []),
  ];

  it("counts an adversary's accepted results of applied rounds, not of the last two", () => {
    expect(cheaterAccounting(epoch0, new Set([C]), [])).toEqual({ accepted: 2, applied: 2 });
    expect(cheaterAccounting(epoch0, new Set(), [])).toEqual({ accepted: 0, applied: 0 });
  });

  it('removes them when the cheat was confirmed in time for the replay, in that epoch only', () => {
    // Confirmed at height 3: the replay runs when round 2 is applied, rebuilding the epoch without them.
    expect(cheaterAccounting(epoch0, new Set([C]), [{ epoch: 0, id: C, height: 3 }])).toEqual({
      accepted: 2,
      applied: 0,
    });
    // Confirmed in the epoch's last round: the round before it is never applied, so no replay.
    expect(cheaterAccounting(epoch0, new Set([C]), [{ epoch: 0, id: C, height: 5 }]).applied).toBe(2);
    // A cheat of another epoch (or another identity) removes nothing here.
    expect(cheaterAccounting(epoch0, new Set([C]), [{ epoch: 1, id: C, height: 1 }]).applied).toBe(2);
    expect(cheaterAccounting(epoch0, new Set([C]), [{ epoch: 0, id: H, height: 1 }]).applied).toBe(2);
  });
});
