// `node-trainer train --adversary sybil` (TEST ONLY, see adversary.ts): one process joins many identities at
// once — keys are free — to see what the relay's limits (join proof of work, identities per address, the run's
// max_clients) and the protocol do with them. Each sybil joins through its own RelayLink, says it loaded the
// model in Warmup (so it costs the epoch nothing there), then idles: it never trains, never witnesses, never
// rejoins once dropped. local-testnet derives the same keys (sybilSeed) to tell sybils from honest trainers.
import { RelayLink } from '@meshtrain/client';
import { identityFromSeed, taggedHash, type CoordinatorState } from '@meshtrain/core';
import { peerIdOf } from '../identity/index.ts';
import type { Output, TrainOptions } from './options.ts';
import { loadIdentity } from './setup.ts';

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
      joined.push({ link, warmed: new Set() });
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

/** Runs the sybils until the run finishes or a signal stops them; resolves to the exit code. */
export async function runSybils(o: TrainOptions, count: number, io: Output): Promise<number> {
  const identity = await loadIdentity(o.identityPath);
  io.say(`ADVERSARY (test only): joining ${count} sybil identities from one process`);
  io.out({ type: 'adversary', kind: 'sybil', identities: count });
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const sybils = await joinAll(o, identity.secretKey, count, io);
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
  io.out({ type: 'done', phase: 'Stopped', sybils: sybils.length });
  return 0;
}
