// What bench/relay.ts and bench/relay-joins.ts share: the run they create, the real relay bin they start, its
// /metrics as numbers, /proc accounting of the relay process, /healthz timing, and the client processes.
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fastRunToml } from '../../apps/relay/test/helpers/relay-fixtures.ts';
import { spawnRelay, type RelayProcess } from '../../apps/relay/test/helpers/relay-process.ts';
import type { BenchClientConfig, BenchClientStats } from './relay-bench-client.ts';

export const RUN_ID = 'bench';

/**
 * The tiny preset's default run, sized for `clients` sessions: every client trains one sample per round,
 * witnesses are min(32, clients), rounds end when the witnesses are in; `rounds` training rounds (then the
 * two drain rounds of the epoch's end).
 */
export function benchRunToml(o: {
  clients: number;
  rounds: number;
  verificationPercent: number;
  initMinClients?: number;
}): string {
  return fastRunToml(RUN_ID, {
    warmup_time: 120,
    cooldown_time: 2,
    epoch_time: 100_000,
    max_round_train_time: 120,
    round_witness_time: 1,
    waiting_for_members_extra_time: 2,
    min_clients: 1,
    init_min_clients: o.initMinClients ?? o.clients,
    max_clients: Math.max(1024, o.clients + 64),
    verification_percent: o.verificationPercent,
    global_batch_size_start: o.clients,
    global_batch_size_end: o.clients,
    total_steps: o.rounds + 1,
  });
}

/** Parsed Prometheus text: `name{labels}` → value (label sets as written). */
/**
 * The relay bin on `toml`, in a fresh temporary directory (`prefix`…, with run.toml and the data dir): no p2p,
 * the join puzzle off, and `identities` sessions allowed from loopback, where every bench client runs.
 */
export async function startBenchRelay(
  prefix: string,
  toml: string,
  identities: number,
): Promise<{ dir: string; relay: RelayProcess }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(join(dir, 'run.toml'), toml);
  const relay = await spawnRelay([
    '--config',
    join(dir, 'run.toml'),
    '--data-dir',
    join(dir, 'data'),
    '--no-p2p',
    '--join-pow-bits',
    '0',
    '--max-identities-per-address',
    String(identities),
  ]);
  return { dir, relay };
}

export type Scrape = Map<string, number>;

export async function scrape(url: string): Promise<Scrape> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out: Scrape = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

export function metric(s: Scrape, key: string): number {
  return s.get(key) ?? 0;
}

export interface Lag {
  samples: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

/**
 * The relay's event-loop lag between two scrapes (p50/p99/max as bucket upper bounds, in ms): `lag` as timers
 * saw it, `own` the part the relay's thread spent on the CPU (the rest is other processes on a busy machine).
 */
export function lagBetween(a: Scrape, b: Scrape): { lag: Lag; own: Lag } {
  return {
    lag: histogramBetween(a, b, 'meshtrain_event_loop_delay_seconds'),
    own: histogramBetween(a, b, 'meshtrain_event_loop_busy_delay_seconds'),
  };
}

function histogramBetween(a: Scrape, b: Scrape, LAG: string): Lag {
  const buckets: { le: number; n: number }[] = [];
  for (const [k, v] of b) {
    const m = new RegExp(`^${LAG}_bucket\\{le="([^"]+)"\\}$`).exec(k);
    if (!m) continue;
    const le = m[1] === '+Inf' ? Infinity : Number(m[1]);
    buckets.push({ le, n: v - metric(a, k) });
  }
  buckets.sort((x, y) => x.le - y.le);
  const total = buckets.at(-1)?.n ?? 0;
  const at = (q: number): number => {
    const b = buckets.find((x) => x.n >= q * total);
    return b === undefined ? NaN : b.le * 1000;
  };
  let max = 0;
  let below = 0;
  for (const x of buckets) {
    if (x.n > below) max = x.le * 1000;
    below = x.n;
  }
  return { samples: total, p50_ms: at(0.5), p99_ms: at(0.99), max_ms: max };
}

/** Bytes the process caused to be written to storage (Linux /proc/PID/io `write_bytes`). */
export function writeBytes(pid: number): number {
  const m = /write_bytes:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
  return Number(m?.[1] ?? 0);
}

export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) * 1024;
}

/** /healthz round trips, sampled every `everyMs` until stopped. */
export class HealthzProbe {
  readonly ms: number[] = [];
  private stopped = false;
  private readonly done: Promise<void>;
  constructor(url: string, everyMs = 100) {
    this.done = (async () => {
      while (!this.stopped) {
        const t = performance.now();
        try {
          await (await fetch(`${url}/healthz`)).arrayBuffer();
          this.ms.push(performance.now() - t);
        } catch {
          this.ms.push(Infinity);
        }
        await new Promise((r) => setTimeout(r, everyMs));
      }
    })();
  }
  /** p50/p99/max of the samples taken from index `from` on. */
  summary(from = 0): { n: number; p50_ms: number; p99_ms: number; max_ms: number } {
    const s = this.ms.slice(from).sort((a, b) => a - b);
    const at = (q: number) => Number((s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0).toFixed(1));
    return { n: s.length, p50_ms: at(0.5), p99_ms: at(0.99), max_ms: Number((s.at(-1) ?? 0).toFixed(1)) };
  }
  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

const CLIENT = fileURLToPath(new URL('./relay-bench-client.ts', import.meta.url));

/** The client processes: `clients` sessions over `processes` children. */
export class ClientFleet {
  readonly children: ChildProcess[] = [];
  readonly latest: BenchClientStats[] = [];

  constructor(o: {
    url: string;
    toml: string;
    clients: number;
    processes: number;
    trainMs: number;
    first?: number;
    /** Sessions follow the run as light replicas (relay-bench-client.ts BenchClientConfig.light). */
    light?: boolean;
  }) {
    const per = Math.ceil(o.clients / o.processes);
    for (let p = 0; p < o.processes; p++) {
      const first = (o.first ?? 1) + p * per;
      const count = Math.max(0, Math.min(per, o.clients - p * per));
      const cfg: BenchClientConfig = {
        url: o.url,
        runId: RUN_ID,
        toml: o.toml,
        first,
        count,
        trainMs: o.trainMs,
        maxPendingJoins: Math.max(1, Math.floor(200 / o.processes)),
        light: o.light === true,
        fleet: { first: o.first ?? 1, count: o.clients },
      };
      const child = fork(CLIENT, [JSON.stringify(cfg)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      const i = this.children.length;
      child.on('message', (m: BenchClientStats) => {
        if (m.type === 'stats') this.latest[i] = m;
      });
      this.children.push(child);
    }
  }

  /** Asks every child for fresh stats and waits for them. */
  async refresh(): Promise<BenchClientStats[]> {
    const asked = this.children.map(
      (c, i) =>
        new Promise<void>((resolve) => {
          const on = (m: BenchClientStats) => {
            if (m.type !== 'stats') return;
            this.latest[i] = m;
            c.off('message', on);
            resolve();
          };
          c.on('message', on);
          c.send({ type: 'stats' });
        }),
    );
    await Promise.all(asked);
    return this.latest;
  }

  joined(): number {
    return this.latest.reduce((a, s) => a + (s?.joined ?? 0), 0);
  }

  send(i: number, m: object): void {
    this.children[i]?.send(m);
  }

  broadcast(m: object): void {
    for (const c of this.children) c.send(m);
  }

  async exit(): Promise<void> {
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.send({ type: 'exit' });
            setTimeout(() => c.kill('SIGKILL'), 5000).unref();
          }),
      ),
    );
  }
}

/** Sums a per-process record of numbers. */
export function sumRecords(rs: readonly Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rs) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v;
  return out;
}

export function loadAverage(): number[] {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
