// `node-trainer train --adversary sybil|sybil-veto|sybil-idle` (TEST ONLY, see adversary.ts): one process
// joins many identities at once — keys are free — to see what the relay's limits (join proof of work,
// identities per address, the run's max_clients) and the protocol do with them. Each sybil joins through its
// own RelayLink and says it loaded the model in Warmup (so it costs the epoch nothing there); none has a model
// or ever rejoins once dropped. `sybil` and `sybil-veto` collude (@meshtrain/client/testing's Collusion:
// fabricated results every round, each other's witnesses and favourable verifiers, failing every honest
// result they verify; sybil-veto also withholds its witness votes from honest results); `sybil-idle` does
// nothing more. local-testnet derives the same keys (sybilSeed) to tell sybils from honest trainers.
import { RelayLink } from '@meshtrain/client';
import {
  bytesToHex,
  identityFromSeed,
  runResultSpec,
  taggedHash,
  type CoordinatorState,
} from '@meshtrain/core';
import { modelConfigForRun, parameterSpecs } from '@meshtrain/model';
import { CliError } from '../command.ts';
import { peerIdOf } from '../identity/index.ts';
import type { SybilKind } from './adversary.ts';
import type { Output, TrainOptions } from './options.ts';
import { fetchRun, loadIdentity } from './setup.ts';

/** Stop joining after this many refusals in a row: the relay has made its point. */
const GIVE_UP_AFTER_REFUSALS = 3;

/** The i-th sybil's identity seed, derived from the process's own seed. */
export function sybilSeed(seed: Uint8Array, i: number): Uint8Array {
  const n = new Uint8Array(4);
  new DataView(n.buffer).setUint32(0, i, true);
  return taggedHash('meshtrain/testnet-sybil', seed, n);
}

interface Sybil {
  link: RelayLink;
  secretKey: Uint8Array;
  /** Epochs it already sent warmup_witness for. */
  warmed: Set<number>;
}

/** Joins up to `count` identities one after the other; stops at the relay's repeated refusal. */
async function joinAll(o: TrainOptions, seed: Uint8Array, count: number, io: Output): Promise<Sybil[]> {
  const joined: Sybil[] = [];
  let refused = 0;
  let inARow = 0;
  let attempted = 0;
  let lastRefusal: string | null = null;
  for (let i = 0; i < count && inARow < GIVE_UP_AFTER_REFUSALS; i++) {
    const id = identityFromSeed(sybilSeed(seed, i));
    const link = new RelayLink({
      relayUrl: o.relay,
      runId: o.runId,
      secretKey: id.secretKey,
      p2pPeerId: peerIdOf(id.publicKey),
      deviceKind: 'sybil',
    });
    attempted++;
    try {
      await link.connect();
      joined.push({ link, secretKey: id.secretKey, warmed: new Set() });
      inARow = 0;
    } catch (e) {
      link.close();
      refused++;
      inARow++;
      lastRefusal = (e as Error).message;
    }
  }
  io.say(
    `sybil: ${joined.length} of ${count} identities joined, ${refused} refused` +
      (lastRefusal ? ` (last: ${lastRefusal})` : ''),
  );
  io.out({
    type: 'sybils',
    wanted: count,
    attempted,
    joined: joined.length,
    refused,
    last_refusal: lastRefusal,
  });
  return joined;
}

/** In Warmup, a Healthy epoch client says it loaded the model (once per epoch); otherwise it does nothing. */
function behave(s: Sybil, state: CoordinatorState): void {
  if (state.run_state !== 'Warmup' || s.warmed.has(state.progress.epoch)) return;
  const me = state.epoch.clients.find((c) => c.id === s.link.clientId);
  if (me?.state !== 'Healthy') return;
  s.warmed.add(state.progress.epoch);
  s.link.submitWarmupWitness(state.progress.epoch).catch(() => {});
}

/**
 * The colluders' coordinator (testing's Collusion) for the run's result shape; loaded only here, like the other
 * attack simulations, so an honest trainer never runs that code.
 */
async function collusionFor(o: TrainOptions, kind: SybilKind, io: Output) {
  const testing = await import('@meshtrain/client/testing');
  const { run } = await fetchRun(o.relay, o.runId);
  const spec = runResultSpec(
    parameterSpecs(modelConfigForRun(run)),
    run.model.LLM.optimizer,
    run.config.verification_percent,
  );
  if (!spec) throw new CliError(`--adversary ${kind}: the run's optimizer exchanges no results`);
  return new testing.Collusion({
    runId: o.runId,
    spec,
    vetoHonest: kind === 'sybil-veto',
    onError: (message) => io.out({ type: 'warning', message }),
    onFabricated: (commitment) => io.out({ type: 'fabricated', commitment: bytesToHex(commitment) }),
  });
}

/** Runs the sybils until the run finishes or a signal stops them; resolves to the exit code. */
export async function runSybils(
  o: TrainOptions,
  kind: SybilKind,
  count: number,
  io: Output,
): Promise<number> {
  const identity = await loadIdentity(o.identityPath);
  io.say(`ADVERSARY (test only): joining ${count} ${kind} identities from one process`);
  io.out({ type: 'adversary', kind, identities: count });
  const collusion = kind === 'sybil-idle' ? null : await collusionFor(o, kind, io);
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const sybils = await joinAll(o, identity.secretKey, count, io);
  for (const s of sybils) collusion?.add(s.link, s.secretKey);
  for (const s of sybils)
    s.link.onState((state) => {
      behave(s, state);
      if (state.run_state === 'Finished') finish();
    });
  process.once('SIGINT', finish);
  process.once('SIGTERM', finish);
  if (sybils.length === 0) finish();
  await finished;
  for (const s of sybils) s.link.close();
  io.out({
    type: 'done',
    phase: 'Stopped',
    sybils: sybils.length,
    ...(collusion ? { sent: collusion.counts } : {}),
  });
  return 0;
}
