// --random-kill-num K --random-kill-interval SEC: every SEC seconds, SIGKILL K random live honest trainers, wait a
// second, restart them with the same identity. Seeded, so a testnet run can be repeated.
import type { Trainer, TrainerPool } from './processes.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface Chaos {
  kills: number;
  restarts: number;
  /** Indices of the trainers it killed. */
  killed: Set<number>;
  /** Stops after the current kill or wait; resolves when the loop has ended. */
  stop(): Promise<void>;
}

export function startChaos(
  o: { randomKillNum: number; randomKillInterval: number; seed: number; log: (line: string) => void },
  pool: TrainerPool,
): Chaos {
  let stopping = false;
  let rng = o.seed * 2654435761 + 1;
  const random = () => {
    rng = (Math.imul(rng, 1664525) + 1013904223) >>> 0;
    return rng / 2 ** 32;
  };
  const chaos: Chaos = { kills: 0, restarts: 0, killed: new Set(), stop: async () => {} };
  const pick = (): Trainer[] => {
    const alive = pool.trainers.filter((t) => t.role === 'honest' && t.child && t.child.exitCode === null);
    const victims: Trainer[] = [];
    while (victims.length < Math.min(o.randomKillNum, alive.length)) {
      const v = alive[Math.floor(random() * alive.length)] as Trainer;
      if (!victims.includes(v)) victims.push(v);
    }
    return victims;
  };
  const loop = (async () => {
    if (o.randomKillNum <= 0) return;
    for (;;) {
      await sleep(o.randomKillInterval * 1000);
      if (stopping) return;
      const victims = pick();
      for (const v of victims) {
        o.log(`chaos: killing trainer ${v.index} (SIGKILL)`);
        v.child?.kill('SIGKILL');
        chaos.kills++;
        chaos.killed.add(v.index);
        await v.exited;
      }
      await sleep(1000);
      if (stopping) return;
      for (const v of victims) {
        o.log(`chaos: restarting trainer ${v.index}`);
        v.restarts++;
        chaos.restarts++;
        pool.start(v);
      }
    }
  })();
  chaos.stop = () => {
    stopping = true;
    return loop;
  };
  return chaos;
}
