// What every local-testnet test asserts about how its honest trainers ended: each reported `done`, then ended
// by itself (not by the testnet's cleanup, not by its own lingering check) with status 0 within EXIT_GRACE_S.
import { expect } from 'vitest';
import { EXIT_GRACE_S, type TestnetResult } from '../src/testnet/index.ts';

export function expectExitedByThemselves(r: TestnetResult, trainers: number): void {
  expect(r.trainer_exits).toHaveLength(trainers);
  for (const x of r.trainer_exits) {
    expect(x, `trainer ${x.trainer}`).toMatchObject({
      done: true,
      exit_code: 0,
      signal: null,
      lingered: false,
    });
    expect(x.seconds_done_to_exit, `trainer ${x.trainer}`).toBeGreaterThanOrEqual(0);
    expect(x.seconds_done_to_exit, `trainer ${x.trainer}`).toBeLessThanOrEqual(EXIT_GRACE_S);
  }
  expect(r.trainers_not_exited).toBe(0);
}
