// The relay under N real clients: the real `meshtrain-relay` bin in its own process (its event loop and CPU
// measured from inside it: /metrics), and N real WebSocket sessions in a few client processes
// (bench/lib/relay-bench-client.ts) doing the whole protocol with real frames — join (the run's join puzzle off:
// --join-pow-bits 0, the puzzle costs clients, not the relay), warmup witness, results that pass core's
// admission for the tiny preset (with the gradient fingerprint when the run verifies), witnesses with real
// attestations, verdicts, health checks, leave — with training replaced by a fixed wait. Results are not downloaded
// (all-to-all over the relay's HTTP route would be N² payloads on one machine): the bench measures the
// coordinator, which is what scales with N here.
//
// Per round (the training rounds after the first; the first carries the epoch's start): relay bytes sent per
// client (WebSocket frames, from the relay's counter, plus the admitted lists light clients fetched from its
// HTTP route) and what the clients received, relay CPU seconds,
// storage bytes the relay process wrote (/proc/PID/io), RSS; event-loop lag p50/p99/max over the rounds and
// over the joins; /healthz round trips; rounds completed with quorum. Prints one JSON object on stdout.
//
// Usage: npm run -s bench:relay -- --clients N --rounds R [--verification-percent 10] [--processes K]
//        [--train-ms 1500] [--relay-priority P] [--full] [--json]
// The clients follow the run as light replicas, as node-trainer and the tab do by default (docs/protocol.md
// "Round outcomes and light replicas": a summary of the state, LightDelta frames, each closed round's
// admitted list from the relay for the few clients drawn as its seeds and from peers for the rest); --full:
// full replicas that replay every event (--light, the default, is accepted too).
// --relay-priority sets the relay process's scheduling priority (os.setPriority; negative needs root): on a
// machine shared with other work it keeps the OS from handing the relay's core to others, so the lag
// measures the relay (the JSON says which priority it ran at).
import { rmSync, statSync } from 'node:fs';
import { cpus, setPriority } from 'node:os';
import { join } from 'node:path';
import { fetchRunInfo } from '../packages/client/src/relay-api/index.ts';
import {
  benchRunToml,
  ClientFleet,
  HealthzProbe,
  lagBetween,
  loadAverage,
  metric,
  rssBytes,
  RUN_ID,
  scrape,
  sleep,
  startBenchRelay,
  sumRecords,
  writeBytes,
} from './lib/relay-bench.ts';
import type { Scrape } from './lib/relay-bench.ts';

const flag = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : dflt;
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a non-negative number`);
  return v;
};
const CLIENTS = flag('clients', 100);
const ROUNDS = Math.max(2, flag('rounds', 5));
const VERIFY = flag('verification-percent', 10);
const PROCESSES = flag('processes', Math.min(4, Math.max(1, Math.ceil(CLIENTS / 250))));
const TRAIN_MS = flag('train-ms', 1500);
const LIGHT = !process.argv.includes('--full');
const PRIORITY = (() => {
  const i = process.argv.indexOf('--relay-priority');
  return i >= 0 ? Number(process.argv[i + 1]) : 0;
})();
const log = (m: string): void => void process.stderr.write(`bench:relay: ${m}\n`);

const toml = benchRunToml({ clients: CLIENTS, rounds: ROUNDS, verificationPercent: VERIFY });
const loadBefore = loadAverage();
const { dir, relay } = await startBenchRelay('meshtrain-bench-relay-', toml, CLIENTS + 100);
const pid = relay.child.pid!;
if (PRIORITY !== 0) setPriority(pid, PRIORITY);
const health = new HealthzProbe(relay.url, 200);

interface Mark {
  at: number;
  step: number;
  /** A round is open (RoundTrain or RoundWitness). */
  inRound: boolean;
  scrape: Scrape;
  written: number;
  rss: number;
}
async function mark(): Promise<Mark> {
  const s = await scrape(relay.url);
  const phase = (p: string) => metric(s, `meshtrain_run_state{run="${RUN_ID}",state="${p}"}`) === 1;
  return {
    at: performance.now(),
    step: metric(s, `meshtrain_step{run="${RUN_ID}"}`),
    inRound: phase('RoundTrain') || phase('RoundWitness'),
    scrape: s,
    written: writeBytes(pid),
    rss: rssBytes(pid),
  };
}

const start = await mark();
log(
  `relay ${relay.url} (pid ${pid}); ${CLIENTS} ${LIGHT ? 'light' : 'full'} clients in ${PROCESSES} processes`,
);
const fleet = new ClientFleet({
  url: relay.url,
  toml,
  clients: CLIENTS,
  processes: PROCESSES,
  trainMs: TRAIN_MS,
  light: LIGHT,
});

// Joins: until every session is acknowledged and the first round started.
let m = await mark();
const joinStart = m;
const deadline = performance.now() + 600_000 + CLIENTS * 200;
while (!m.inRound && performance.now() < deadline) {
  await sleep(500);
  m = await mark();
  await fleet.refresh();
}
const joined = fleet.joined();
const joinsDone = m;
log(`${joined} joined, round 1 started after ${((joinsDone.at - joinStart.at) / 1000).toFixed(1)} s`);

// Rounds: a mark at every step change (the relay's step gauge), until the last training round ended.
const marks: Mark[] = [m];
const roundDeadline = performance.now() + ROUNDS * (60_000 + CLIENTS * 100);
while (m.step <= ROUNDS && performance.now() < roundDeadline) {
  await sleep(250);
  const next = await mark();
  if (next.step !== m.step) {
    log(`round of step ${m.step}: ${((next.at - marks.at(-1)!.at) / 1000).toFixed(1)} s`);
    marks.push(next);
  }
  m = next;
}
const clientStats = await fleet.refresh();
const end = m;

// Leave, and let the relay see it.
fleet.broadcast({ type: 'leave' });
await sleep(2000);
const afterLeave = await mark();
await health.stop();
await fleet.exit();
const detail = await fetchRunInfo(relay.url, RUN_ID);
const quorumRounds = detail.rounds.filter((r) => r.step <= ROUNDS && r.quorum_reached === true).length;
const dbBytes = ['relay.db', 'relay.db-wal'].reduce((a, f) => {
  try {
    return a + statSync(join(dir, 'data', f)).size;
  } catch {
    return a;
  }
}, 0);
await relay.stop();
rmSync(dir, { recursive: true, force: true });

// Admitted lists light clients fetched from the relay's HTTP route, by the step they were seen in.
const perStepLists = sumRecords(clientStats.map((s) => s.listBytesByStep));
const listFetches = clientStats.reduce((a, s) => a + s.listFetches, 0);
const listBytes = Object.values(perStepLists).reduce((a, b) => a + b, 0);
// Per round: the steps between consecutive marks, skipping the first (it holds the epoch's start).
const rounds = marks.slice(1).map((b, i) => {
  const a = marks[i]!;
  const bytes = metric(b.scrape, 'meshtrain_bytes_out_total') - metric(a.scrape, 'meshtrain_bytes_out_total');
  const lists = perStepLists[a.step] ?? 0;
  return {
    step: a.step,
    seconds: (b.at - a.at) / 1000,
    bytes_out_per_client: (bytes + lists) / CLIENTS,
    ws_bytes_out_per_client: bytes / CLIENTS,
    list_bytes_out_per_client: lists / CLIENTS,
    cpu_seconds:
      metric(b.scrape, 'meshtrain_process_cpu_seconds') - metric(a.scrape, 'meshtrain_process_cpu_seconds'),
    written_bytes: b.written - a.written,
    rss_mb: b.rss / 1e6,
  };
});
const steady = rounds.slice(1);
const mean = (xs: number[]) => (xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length);
const perStep = sumRecords(clientStats.map((s) => s.bytesByStep));
const receivedPerClient = steady.map((r) => (perStep[r.step] ?? 0) / CLIENTS);
// What one client's state frames carried per round, by content (the first process's leader session).
const breakdown: Record<string, number> = {};
for (const r of steady)
  for (const [k, v] of Object.entries(clientStats[0]?.stateBytesByStep[r.step] ?? {}))
    breakdown[k] = (breakdown[k] ?? 0) + v / steady.length;
const out = {
  bench: 'relay',
  date: new Date().toISOString(),
  machine: {
    cpus: cpus().length,
    model: cpus()[0]?.model ?? '',
    load_before: loadBefore,
    load_after: loadAverage(),
  },
  config: {
    clients: CLIENTS,
    rounds: ROUNDS,
    verification_percent: VERIFY,
    processes: PROCESSES,
    train_ms: TRAIN_MS,
    replica: LIGHT ? 'light' : 'full',
    join_pow_bits: 0,
    relay_priority: PRIORITY,
  },
  joined,
  joins: {
    seconds: (joinsDone.at - joinStart.at) / 1000,
    bytes_out_total:
      metric(joinsDone.scrape, 'meshtrain_bytes_out_total') -
      metric(joinStart.scrape, 'meshtrain_bytes_out_total'),
    cpu_seconds:
      metric(joinsDone.scrape, 'meshtrain_process_cpu_seconds') -
      metric(joinStart.scrape, 'meshtrain_process_cpu_seconds'),
    event_loop: lagBetween(joinStart.scrape, joinsDone.scrape),
  },
  /** Training rounds that ended with their witness quorum. */
  rounds_completed: quorumRounds,
  per_round: {
    rounds_measured: steady.length,
    seconds: mean(steady.map((r) => r.seconds)),
    /** WebSocket frames plus admitted lists served over HTTP (the two rows below). */
    relay_bytes_out_per_client: mean(steady.map((r) => r.bytes_out_per_client)),
    relay_ws_bytes_out_per_client: mean(steady.map((r) => r.ws_bytes_out_per_client)),
    relay_list_bytes_out_per_client: mean(steady.map((r) => r.list_bytes_out_per_client)),
    client_bytes_received_per_client: mean(receivedPerClient),
    /** One client's state bytes per round by what they carried: event types, frame overhead. */
    state_bytes_per_client_by_content: breakdown,
    relay_cpu_seconds: mean(steady.map((r) => r.cpu_seconds)),
    sqlite_bytes_written: mean(steady.map((r) => r.written_bytes)),
  },
  rounds,
  event_loop: lagBetween(marks[0]!.scrape, end.scrape),
  healthz: health.summary(),
  rss_mb: { start: start.rss / 1e6, end: end.rss / 1e6, after_leave: afterLeave.rss / 1e6 },
  relay_db_bytes: dbBytes,
  clients: {
    sent: sumRecords(clientStats.map((s) => s.sent)),
    refusals: sumRecords(clientStats.map((s) => s.refusals)),
    hash_checks: clientStats.reduce((a, s) => a + s.hashChecks, 0),
    hash_mismatches: clientStats.reduce((a, s) => a + s.hashMismatches, 0),
    gaps: clientStats.reduce((a, s) => a + s.gaps, 0),
    closed_by_relay: clientStats.reduce((a, s) => a + s.closedByRelay, 0),
    /** Light: lists fetched from the relay (seeds), their mean size, bad ones, and lists left to peers. */
    list_fetches_from_relay: listFetches,
    admitted_list_bytes: listFetches > 0 ? listBytes / listFetches : 0,
    list_mismatches: clientStats.reduce((a, s) => a + s.listMismatches, 0),
    lists_from_peers: clientStats.reduce((a, s) => a + s.listsFromPeers, 0),
  },
};
process.stdout.write(`${JSON.stringify(out, null, process.argv.includes('--json') ? 0 : 2)}\n`);
process.exit(0);
