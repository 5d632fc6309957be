// Simulator benchmark: drives the real coordinator state machine with N simulated clients — drop-outs,
// late joiners, witnesses that go silent, witnesses that lie — checks invariants after every tick, and
// prints exactly one JSON object on stdout:
//   {"clients":N,"rounds_completed":R,"invariant_violations":0,"tick_ms_p50":…,"tick_ms_p99":…,
//    "attestation_bytes":…}
// Usage: npm run -s bench:coordinator -- --clients 10000 --rounds 20 [--seed 1]
// `attestation_bytes` is the largest witness attestation seen (one bit per result slot of a round).
import {
  acceptedCommitments,
  attestationOf,
  createCoordinator,
  currentRound,
  roundAssignments,
  roundAtHeight,
  roundSelection,
  tick,
  type CoordinatorConfig,
  type CoordinatorEvent,
  type CoordinatorState,
  type TickResult,
} from '../packages/core/src/index.ts';
import {
  clientId,
  fakeCommitment,
  honestAdmissionEvents,
  observedSlots,
  witnessEvent,
} from './lib/honest-client.ts';
import { InvariantChecker } from './lib/invariants.ts';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isSafeInteger(v) || v <= 0) {
    process.stderr.write(`--${name} must be a positive integer\n`);
    process.exit(2);
  }
  return v;
}

const N = arg('clients', 1000);
const ROUNDS = arg('rounds', 20);
const SEED = arg('seed', 1);

// mulberry32: the bench's own seeded randomness (core has none).
let rngState = SEED >>> 0;
function random(): number {
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

type Kind = 'honest' | 'dropper' | 'silent' | 'liar-proof' | 'liar-attestation' | 'liar-content';
interface SimClient {
  id: string;
  kind: Kind;
  /** Step from which the client is gone (no results, no witnessing); Infinity = stays. */
  deadFrom: number;
  joinAt: number;
  disconnectReported: boolean;
}

const config: CoordinatorConfig = {
  warmup_time: 3,
  cooldown_time: 2,
  epoch_time: 25,
  max_round_train_time: 4,
  round_witness_time: 1,
  min_clients: Math.max(1, Math.floor(N * 0.3)),
  init_min_clients: Math.max(1, Math.floor(N * 0.6)),
  verification_percent: 0,
  witness_nodes: Math.min(32, Math.max(1, Math.floor(N * 0.3))),
  global_batch_size_start: Math.max(1, Math.floor(N / 2)),
  global_batch_size_end: N,
  global_batch_size_warmup_tokens: N * 64 * 4,
  total_steps: 1_000_000,
  waiting_for_members_extra_time: 1,
  max_clients: N * 2,
  max_witnesses: 32,
  max_seq_len: 64,
  cold_start_warmup_steps: 0,
};

const T0 = 1_700_000_000;
const clients: SimClient[] = Array.from({ length: N }, (_, i) => {
  const r = random();
  const kind: Kind =
    r < 0.05
      ? 'dropper'
      : r < 0.07
        ? 'silent'
        : r < 0.075
          ? 'liar-proof'
          : r < 0.08
            ? 'liar-attestation'
            : r < 0.085
              ? 'liar-content'
              : 'honest';
  return {
    id: clientId(i),
    kind,
    deadFrom: kind === 'dropper' ? 3 + Math.floor(random() * ROUNDS * 1.5) : Infinity,
    // ~8 % join late, spread over the run.
    joinAt: random() < 0.08 ? T0 + 5 + Math.floor(random() * ROUNDS * 2) : T0,
    disconnectReported: false,
  };
});
const byId = new Map(clients.map((c) => [c.id, c]));
const liars = new Set(
  clients.filter((c) => c.kind === 'liar-proof' || c.kind === 'liar-attestation').map((c) => c.id),
);

let state: CoordinatorState = createCoordinator({
  run_id: 'bench',
  run_seed: '5e'.repeat(32),
  config,
  now: T0,
});
let now = T0;
const checker = new InvariantChecker();
const tickMs: number[] = [];
let roundsCompleted = 0;
let refusedLies = 0;
let acceptedLies = 0;
let wrongConsensus = 0;
let attestationBytes = 0;

function send(event: CoordinatorEvent): TickResult {
  const t = performance.now();
  const r = tick(state, event, now);
  tickMs.push(performance.now() - t);
  checker.check(state, event, r);
  for (const e of r.effects) if (e.type === 'RoundEnded' && e.quorum_reached) roundsCompleted++;
  if (event.type === 'witness' && liars.has(event.id)) {
    if (r.error) refusedLies++;
    else acceptedLies++;
  }
  state = r.state;
  return r;
}

const alive = (id: string) => {
  const c = byId.get(id);
  return !!c && c.kind !== 'silent' && state.progress.step < c.deadFrom;
};
// A result of round `step` exists iff its trainer was alive during that round.
const producedResult = (id: string, step: number) => {
  const c = byId.get(id);
  return !!c && c.kind !== 'silent' && step < c.deadFrom;
};

const done = new Set<string>();
function witnessRound(): void {
  const round = currentRound(state)!;
  const key = `${state.progress.epoch}:${round.height}`;
  if (done.has(key)) return;
  done.add(key);
  const observed = observedSlots(state, (id) => producedResult(id, round.step - 1));
  attestationBytes = Math.max(attestationBytes, observed.length);
  const sel = roundSelection(round);
  for (const i of sel.witnesses()) {
    const c = byId.get(state.epoch.clients[round.roster[i]!]!.id)!;
    if (!alive(c.id) || state.epoch.clients[round.roster[i]!]!.state !== 'Healthy') continue;
    const honest = witnessEvent(state, round, i, observed) as Extract<CoordinatorEvent, { type: 'witness' }>;
    if (c.kind === 'liar-proof') {
      send({ ...honest, proof: { ...honest.proof, position: honest.proof.position + 1 } });
    } else if (c.kind === 'liar-attestation') {
      // Malformed: one byte more than the round's slots need (a strike every time).
      send({ ...honest, attested: new Uint8Array(honest.attested.length + 1).fill(0xff) });
    } else if (c.kind === 'liar-content') {
      // Claims every result slot, including results it never saw: well-formed, so accepted, but it can only
      // vote for what the host admitted (checkConsensus) and alone keeps no dead trainer alive.
      const slots = roundAtHeight(state, round.height - 1)
        ? roundAssignments(state, roundAtHeight(state, round.height - 1)!).length
        : 0;
      send({ ...honest, attested: attestationOf(slots, () => true) });
    } else {
      send(honest);
    }
  }
  // Non-witness liars also try to pass themselves off as witnesses: refused (and ejected after 3 tries).
  for (const i of round.roster.slice(0, 64)) {
    const c = byId.get(state.epoch.clients[i]!.id)!;
    if (c.kind !== 'liar-proof' || state.epoch.clients[i]!.state !== 'Healthy') continue;
    const ri = round.roster.indexOf(i);
    if (sel.isWitness(ri)) continue;
    const base = witnessEvent(state, round, ri, observed) as Extract<CoordinatorEvent, { type: 'witness' }>;
    send({ ...base, proof: { ...base.proof, witness: true } });
  }
  // The host admits the open round's results of the trainers alive during it: the record the next round's
  // witnesses vote on (without it no commitment could reach consensus).
  for (const e of honestAdmissionEvents(state, (id) => producedResult(id, round.step))) send(e);
  healthCheck(round);
  checkConsensus(round);
}

/** An honest witness reports trainers of round h-2 whose results nobody saw. */
function healthCheck(round: NonNullable<ReturnType<typeof currentRound>>): void {
  if (round.height < 2) return;
  const judged = roundAtHeight(state, round.height - 2);
  if (!judged) return;
  const reporter = state.epoch.clients.find(
    (c) => c.state === 'Healthy' && alive(c.id) && byId.get(c.id)?.kind === 'honest',
  );
  if (!reporter) return;
  const sel = roundSelection(judged);
  const checks = roundAssignments(state, judged)
    .filter(
      (a) => !producedResult(a.id, judged.step) && state.epoch.clients[a.client_index]!.state === 'Healthy',
    )
    .map((a) => ({ id: a.id, proof: sel.committeeProof(a.index) }));
  if (checks.length > 0) send({ type: 'health_check', id: reporter.id, checks });
}

/** Peers apply, for round h-2, the commitment the witnesses of h-1 agree on: it must be the real one. */
function checkConsensus(round: NonNullable<ReturnType<typeof currentRound>>): void {
  if (round.height < 2) return;
  const judgedHeight = round.height - 2;
  const judged = roundAtHeight(state, judgedHeight)!;
  const stride = Math.max(1, Math.floor(roundAssignments(state, judged).length / 64));
  let seen = 0;
  // Peers hold candidates for every batch; the bench samples every stride-th batch to stay O(1) per round.
  const accepted = acceptedCommitments(state, judgedHeight, (batch, ci) => {
    if (seen++ % stride !== 0) return [];
    const id = state.epoch.clients[ci]!.id;
    const real = producedResult(id, judged.step)
      ? [fakeCommitment(judged.step, batch.start, batch.end, id)]
      : [];
    return [...real, fakeCommitment(-1, batch.start, batch.start, 'x')];
  });
  if (!accepted) return;
  // Checking a sample keeps this O(1) per round at 10,000 clients.
  for (let k = 0; k < accepted.length; k += stride) {
    const a = accepted[k]!;
    const id = state.epoch.clients[a.client_index]!.id;
    const expected = producedResult(id, judged.step)
      ? fakeCommitment(judged.step, a.batch.start, a.batch.end, id)
      : null;
    const same =
      expected === null
        ? a.commitment === null
        : a.commitment !== null && a.commitment.every((x, j) => x === expected[j]);
    if (!same) wrongConsensus++;
  }
}

const started = performance.now();
for (const c of clients) if (c.joinAt === T0) send({ type: 'join', id: c.id, p2p_id: c.id.slice(0, 16) });
process.stderr.write(
  `${N} clients, joined ${state.members.length} at start; ${(performance.now() - started).toFixed(0)} ms\n`,
);

let iterations = 0;
let jsonChecked = false;
while (roundsCompleted < ROUNDS && iterations < ROUNDS * 200) {
  iterations++;
  // Late joiners and clients that rejoin after being dropped (live clients keep asking while waiting).
  for (const c of clients) {
    if (c.joinAt <= now && c.joinAt > now - 1) send({ type: 'join', id: c.id, p2p_id: c.id.slice(0, 16) });
  }
  // Half of the drop-outs are noticed by the relay as disconnects; the rest must be caught by health checks.
  for (const c of clients) {
    if (!c.disconnectReported && state.progress.step >= c.deadFrom && c.id.charCodeAt(0) % 2 === 0) {
      c.disconnectReported = true;
      if (
        state.members.some((m) => m.id === c.id) ||
        state.epoch.clients.some((x) => x.id === c.id && x.state === 'Healthy')
      )
        send({ type: 'leave', id: c.id });
    }
  }
  if (state.run_state === 'Warmup') {
    for (const c of state.epoch.clients)
      if (state.run_state === 'Warmup' && alive(c.id)) send({ type: 'warmup_witness', id: c.id });
  }
  if (state.run_state === 'RoundTrain') witnessRound();
  if (state.run_state === 'Paused') send({ type: 'resume' });
  now += 1;
  const r = send({
    type: 'tick',
    entropy: Math.floor(random() * 2 ** 32)
      .toString(16)
      .padStart(8, '0'),
  });
  for (const e of r.effects) {
    if (e.type === 'RoundStarted')
      process.stderr.write(
        `epoch ${e.epoch} step ${e.step} h${e.height} clients ${e.clients} batch ${e.batch_size} retries ${e.retries}${e.training ? '' : ' (drain)'}\n`,
      );
    if (e.type === 'EpochEnded') {
      process.stderr.write(
        `epoch ${e.epoch} ended (${e.success ? 'ok' : 'aborted'}); completed rounds ${roundsCompleted}\n`,
      );
      if (!jsonChecked) {
        jsonChecked = true;
        const copy = JSON.parse(JSON.stringify(state)) as CoordinatorState;
        if (JSON.stringify(copy) !== JSON.stringify(state))
          checker.violations.push('state is not JSON round-trip stable');
      }
    }
  }
}

if (acceptedLies > 0) checker.violations.push(`${acceptedLies} invalid witness submissions accepted`);
if (wrongConsensus > 0)
  checker.violations.push(`${wrongConsensus} batches with a wrong consensus commitment`);
for (const v of checker.violations) process.stderr.write(`VIOLATION: ${v}\n`);
const sorted = tickMs.slice().sort((a, b) => a - b);
const pct = (p: number) =>
  Number((sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0).toFixed(4));
process.stderr.write(
  `${tickMs.length} events in ${((performance.now() - started) / 1000).toFixed(1)} s; refused lies ${refusedLies}; ejected ${state.ejected.length}\n`,
);
process.stdout.write(
  JSON.stringify({
    clients: N,
    rounds_completed: roundsCompleted,
    invariant_violations: checker.violations.length,
    tick_ms_p50: pct(0.5),
    tick_ms_p99: pct(0.99),
    attestation_bytes: attestationBytes,
  }) + '\n',
);
