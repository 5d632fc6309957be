// What joins and leaves cost the relay, measured from outside (the real bin, real WebSocket sessions in client
// processes, /metrics): a burst of N joins (as fast as the relay admits them: it lets 256 connections from one
// address wait for their Ack at once), with /healthz sampled every 50 ms throughout; then, with N sessions,
// one more join and one leave: the relay's total bytes sent for each (the joiner's snapshot plus one delta to
// everyone; the leave's delta to everyone). The run stays in WaitingForMembers (its init_min_clients is above
// N). Join puzzle off (--join-pow-bits 0). Prints one JSON object on stdout.
//
// Usage: npm run -s bench:relay-joins -- [--clients 800] [--processes 4] [--relay-priority P]
// --relay-priority P sets the scheduling priority of the relay and of this process (which probes /healthz),
// so that on a shared machine the probe measures the relay rather than the OS's queue (as bench:relay).
import { rmSync } from 'node:fs';
import { cpus, setPriority } from 'node:os';
import {
  benchRunToml,
  ClientFleet,
  HealthzProbe,
  lagBetween,
  loadAverage,
  metric,
  RUN_ID,
  scrape,
  sleep,
  startBenchRelay,
} from './lib/relay-bench.ts';
import type { Scrape } from './lib/relay-bench.ts';

const flag = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const N = flag('clients', 800);
const PROCESSES = flag('processes', 4);
const PRIORITY = flag('relay-priority', 0);
const log = (m: string): void => void process.stderr.write(`bench:relay-joins: ${m}\n`);

const toml = benchRunToml({ clients: N, rounds: 2, verificationPercent: 10, initMinClients: N + 100 });
const loadBefore = loadAverage();
const { dir, relay } = await startBenchRelay('meshtrain-bench-joins-', toml, N + 100);
if (PRIORITY !== 0) {
  setPriority(relay.child.pid!, PRIORITY);
  setPriority(PRIORITY);
}
const bytesOut = (s: Scrape) => metric(s, 'meshtrain_bytes_out_total');
const members = (s: Scrape) => metric(s, `meshtrain_clients{run="${RUN_ID}",state="Waiting"}`);

/** Scrapes until the relay's bytes-out counter has not moved for `quietMs`. */
async function settled(quietMs = 1500): Promise<Scrape> {
  let last = await scrape(relay.url);
  let since = performance.now();
  for (;;) {
    await sleep(250);
    const s = await scrape(relay.url);
    if (bytesOut(s) !== bytesOut(last)) {
      last = s;
      since = performance.now();
    } else if (performance.now() - since >= quietMs) return s;
  }
}

const health = new HealthzProbe(relay.url, 50);
const before = await settled();
const t0 = performance.now();
const fleet = new ClientFleet({ url: relay.url, toml, clients: N, processes: PROCESSES, trainMs: 0 });
let s = before;
while (members(s) < N) {
  await sleep(200);
  s = await scrape(relay.url);
}
const burstSeconds = (performance.now() - t0) / 1000;
const afterBurst = await settled();
const burstHealth = health.summary();
log(`${N} joined in ${burstSeconds.toFixed(1)} s`);

// One more join.
const h1 = health.ms.length;
fleet.send(0, { type: 'join', count: 1, first: 1_000_000 });
let j = afterBurst;
while (members(j) < N + 1) {
  await sleep(100);
  j = await scrape(relay.url);
}
const afterJoin = await settled();
// One leave.
fleet.send(0, { type: 'leaveSome', count: 1 });
let l = afterJoin;
while (members(l) > N) {
  await sleep(100);
  l = await scrape(relay.url);
}
const afterLeave = await settled();
const oneHealth = health.summary(h1);
await health.stop();
await fleet.exit();
await relay.stop();
rmSync(dir, { recursive: true, force: true });

const MB = 1e6;
process.stdout.write(
  `${JSON.stringify({
    bench: 'relay-joins',
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      model: cpus()[0]?.model ?? '',
      load_before: loadBefore,
      load_after: loadAverage(),
    },
    clients: N,
    processes: PROCESSES,
    join_pow_bits: 0,
    relay_priority: PRIORITY,
    burst: {
      seconds: burstSeconds,
      relay_sent_mb: (bytesOut(afterBurst) - bytesOut(before)) / MB,
      healthz: burstHealth,
      event_loop: lagBetween(before, afterBurst),
    },
    one_more_join: { relay_sent_mb: (bytesOut(afterJoin) - bytesOut(afterBurst)) / MB },
    one_leave: { relay_sent_mb: (bytesOut(afterLeave) - bytesOut(afterJoin)) / MB },
    healthz_after_burst: oneHealth,
  })}\n`,
);
process.exit(0);
