// Which processes a testnet starts, and in what order. Adversaries that must be the epoch's first voter
// (no-upload, poison-checkpoint) join before anyone else; then the trusted verifiers (`node-trainer verify`:
// they count in no init_min_clients, so only waiting for them puts them in the first epoch); then the honest
// trainers and the other adversaries. The run stays paused until all of those joined (`opened`), so the first
// epoch holds them all whatever init_min_clients. The sybil process starts once the run trains (every testnet
// process shares 127.0.0.1, and the relay takes only so many identities from one address: sybils first would
// lock the honest trainers out, which is the relay's limit working but not the attack the testnet shows), so
// its identities join at the second epoch; late joiners too, and come in with a checkpoint.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isSybilKind } from '../train/adversary.ts';
import { FIRST_VOTER_KINDS, idsOf, seedHex, type AdversarySpec } from './adversaries.ts';
import type { TrainerPool, TrainerSpec } from './processes.ts';
import type { RunWatcher } from './watch.ts';

type Phase = 'first' | 'anchor' | 'main' | 'sybil' | 'late';

interface Planned extends TrainerSpec {
  phase: Phase;
}

/** Every process of the testnet with its identity, role and launch phase. */
export function plan(o: {
  numClients: number;
  lateJoiners: number;
  adversaries: AdversarySpec[];
  /** How honest trainers follow the coordinator (`train --replica`). */
  replica?: 'full' | 'light';
  /** Verify-only processes whose keys the run lists as trusted (trustedVerifierIds). */
  trustedVerifiers?: number;
}): Planned[] {
  const out: Planned[] = [];
  const honest = (index: number, late: boolean): Planned => ({
    index,
    name: `trainer-${index}`,
    label: late ? `trainer ${index} (late)` : `trainer ${index}`,
    identity: '',
    role: 'honest',
    command: 'train',
    args: ['--replica', o.replica ?? 'light'],
    ids: idsOf(index),
    phase: late ? 'late' : 'main',
  });
  for (let i = 0; i < o.numClients; i++) out.push(honest(i, false));
  for (const a of o.adversaries) {
    const sybil = isSybilKind(a.kind);
    const copies = sybil ? 1 : a.count;
    const first = out.length;
    for (let k = 0; k < copies; k++) {
      const index = out.length;
      out.push({
        index,
        name: `adversary-${index}-${a.kind}`,
        label: `adversary ${index} (${a.kind})`,
        identity: '',
        role: 'adversary',
        command: 'train',
        args: ['--adversary', a.kind, ...(sybil ? ['--sybils', String(a.count)] : [])],
        ids: idsOf(index, sybil ? a.count : 0),
        phase: sybil ? 'sybil' : FIRST_VOTER_KINDS.includes(a.kind) ? 'first' : 'main',
      });
    }
    // Lying verifiers pass each other's results: one attacker knows all of its keys.
    if (a.kind === 'lying-verifier') {
      const fellows = out.slice(first).flatMap((p) => p.ids);
      for (const p of out.slice(first)) p.args.push('--colluders', fellows.join(','));
    }
  }
  // After the adversaries, so adding verifiers leaves every other process's index (and key) as it was.
  for (let i = 0; i < (o.trustedVerifiers ?? 0); i++) {
    const index = out.length;
    out.push({
      index,
      name: `verifier-${index}`,
      label: `verifier ${index}`,
      identity: '',
      role: 'verifier',
      command: 'verify',
      args: ['--replica', o.replica ?? 'light'],
      ids: idsOf(index),
      phase: 'anchor',
    });
  }
  for (let i = 0; i < o.lateJoiners; i++) out.push(honest(out.length, true));
  return out;
}

/** The keys of the planned trusted verifiers: the run config lists them before any process starts. */
export function trustedVerifierIds(planned: readonly Planned[]): string[] {
  return planned.filter((p) => p.role === 'verifier').flatMap((p) => p.ids);
}

/** Adversary processes that join the first epoch (the sybil process joins later, see above). */
export function extraClients(adversaries: AdversarySpec[]): number {
  return adversaries.filter((a) => !isSybilKind(a.kind)).reduce((n, a) => n + a.count, 0);
}

/**
 * Whether the run is past its first Warmup: in a round of either phase, or with a round on record. Not
 * `runState === 'RoundTrain'` alone: with a fast model that phase lasts a fraction of each round, and a
 * once-a-second poll can keep landing in RoundWitness for whole epochs.
 */
export function hasTrained(w: Pick<RunWatcher, 'runState' | 'history'>): boolean {
  return w.runState === 'RoundTrain' || w.runState === 'RoundWitness' || w.history().length > 0;
}

/** Starts the planned processes phase by phase; a phase that waits past `deadline` goes ahead anyway. */
export async function launchAll(
  planned: Planned[],
  o: {
    dir: string;
    pool: TrainerPool;
    watcher: RunWatcher;
    deadline: number;
    log: (line: string) => void;
    /** Called once every process of the first epoch joined (or the wait gave up): the run may start. */
    opened: () => Promise<void>;
  },
): Promise<void> {
  const start = async (phase: Phase) => {
    for (const p of planned.filter((x) => x.phase === phase)) {
      const identity = join(o.dir, `${p.name}.key`);
      await writeFile(identity, `${seedHex(p.index)}\n`, { mode: 0o600 });
      o.pool.add({ ...p, identity });
    }
  };
  const joined = (phases: Phase[]) => (w: RunWatcher) =>
    planned.filter((p) => phases.includes(p.phase)).every((p) => p.ids.every((id) => w.seen.has(id)));
  const wait = async (what: string, done: (w: RunWatcher) => boolean) => {
    if (!(await o.watcher.until(done, o.deadline))) o.log(`gave up waiting for ${what}`);
  };
  if (planned.some((p) => p.phase === 'first')) {
    await start('first');
    await wait('the first-voter adversaries to join', joined(['first']));
  }
  if (planned.some((p) => p.phase === 'anchor')) {
    await start('anchor');
    await wait('the trusted verifiers to join', joined(['first', 'anchor']));
  }
  await start('main');
  await wait('every trainer of the first epoch to join', joined(['first', 'anchor', 'main']));
  await o.opened();
  if (planned.some((p) => p.phase === 'sybil')) {
    // Once the first epoch trains, so the sybils join the second, as identities arriving at a running run do.
    await wait('the run to train before the sybils', hasTrained);
    await start('sybil');
  }
  if (planned.some((p) => p.phase === 'late')) {
    await wait('the run to train before the late joiners', hasTrained);
    await start('late');
  }
}
