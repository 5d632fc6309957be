// node-trainer metrics: read a relay's /metrics (Prometheus text) and print a readable summary — bandwidth
// (two samples `--interval` seconds apart give rates), round progress and witness quorum state per run.
import { CliError, type Command } from '../command.ts';
import { parseFlags } from '../options/index.ts';
import { parsePrometheus, valueOf, type Sample } from '../net/prometheus.ts';

async function scrape(relay: string): Promise<Sample[]> {
  let res: Response;
  try {
    res = await fetch(`${relay.replace(/\/+$/, '')}/metrics`);
  } catch (e) {
    throw new CliError(`cannot reach the relay at ${relay}: ${(e as Error).message}`);
  }
  if (!res.ok) throw new CliError(`GET /metrics: HTTP ${res.status}`);
  return parsePrometheus(await res.text());
}

function human(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export interface MetricsSummary {
  bytes_in: number;
  bytes_out: number;
  bytes_in_per_s: number | null;
  bytes_out_per_s: number | null;
  runs: {
    run: string;
    state: string;
    epoch: number;
    step: number;
    round_height: number;
    witnesses: number;
    quorum: number;
    quorum_reached: boolean;
    clients: Record<string, number>;
    loss: number | null;
  }[];
}

export function summarize(samples: Sample[], before?: Sample[], seconds?: number): MetricsSummary {
  const bytesIn = valueOf(samples, 'meshtrain_bytes_in_total') ?? 0;
  const bytesOut = valueOf(samples, 'meshtrain_bytes_out_total') ?? 0;
  const rate = (now: number, name: string) =>
    before && seconds ? Math.max(0, now - (valueOf(before, name) ?? 0)) / seconds : null;
  const runs = [
    ...new Set(samples.filter((s) => s.labels.run !== undefined).map((s) => s.labels.run as string)),
  ].sort();
  return {
    bytes_in: bytesIn,
    bytes_out: bytesOut,
    bytes_in_per_s: rate(bytesIn, 'meshtrain_bytes_in_total'),
    bytes_out_per_s: rate(bytesOut, 'meshtrain_bytes_out_total'),
    runs: runs.map((run) => {
      const state =
        samples.find((s) => s.name === 'meshtrain_run_state' && s.labels.run === run && s.value === 1)?.labels
          .state ?? 'unknown';
      const clients: Record<string, number> = {};
      for (const s of samples)
        if (s.name === 'meshtrain_clients' && s.labels.run === run && s.labels.state)
          clients[s.labels.state] = s.value;
      const witnesses = valueOf(samples, 'meshtrain_witnesses', { run }) ?? 0;
      const quorum = valueOf(samples, 'meshtrain_quorum', { run }) ?? 0;
      return {
        run,
        state,
        epoch: valueOf(samples, 'meshtrain_epoch', { run }) ?? 0,
        step: valueOf(samples, 'meshtrain_step', { run }) ?? 0,
        round_height: valueOf(samples, 'meshtrain_round_height', { run }) ?? 0,
        witnesses,
        quorum,
        quorum_reached: quorum > 0 && witnesses >= quorum,
        clients,
        loss: valueOf(samples, 'meshtrain_loss', { run }) ?? null,
      };
    }),
  };
}

const command: Command = {
  summary: "summarise a relay's /metrics: bandwidth, round progress, witness quorum state",
  usage:
    '--relay URL [--interval SEC] [--json]\n\n' +
    '  --relay URL       the relay, e.g. http://127.0.0.1:8080\n' +
    '  --interval SEC    seconds between the two scrapes that give byte rates (default 2; 0 = one scrape)\n' +
    '  --json            one JSON object',
  async run(argv) {
    const { values } = parseFlags(argv, {
      relay: { type: 'string' },
      interval: { type: 'string' },
      json: { type: 'boolean' },
    });
    if (!values.relay) throw new CliError('--relay URL is required');
    const interval = values.interval === undefined ? 2 : Number(values.interval);
    if (!Number.isFinite(interval) || interval < 0) throw new CliError('--interval: seconds ≥ 0');
    const first = await scrape(values.relay);
    let summary: MetricsSummary;
    if (interval > 0) {
      const t0 = Date.now();
      await new Promise((r) => setTimeout(r, interval * 1000));
      const second = await scrape(values.relay);
      summary = summarize(second, first, (Date.now() - t0) / 1000);
    } else summary = summarize(first);
    if (values.json) {
      console.log(JSON.stringify(summary));
      return 0;
    }
    const rate = (r: number | null) => (r === null ? '' : ` (${human(r)}/s)`);
    console.log(
      `bandwidth  in ${human(summary.bytes_in)}${rate(summary.bytes_in_per_s)}, out ${human(summary.bytes_out)}${rate(summary.bytes_out_per_s)}`,
    );
    for (const r of summary.runs) {
      const clients = Object.entries(r.clients)
        .filter(([, n]) => n > 0)
        .map(([s, n]) => `${n} ${s}`)
        .join(', ');
      console.log(
        `run ${r.run}: ${r.state}, epoch ${r.epoch}, step ${r.step} (round ${r.round_height}); ` +
          `witnesses ${r.witnesses}/${r.quorum} needed${r.quorum > 0 ? (r.quorum_reached ? ' — quorum reached' : ' — waiting for quorum') : ''}; ` +
          `clients: ${clients || 'none'}${r.loss === null ? '' : `; loss ${r.loss.toFixed(4)}`}`,
      );
    }
    return 0;
  },
};

export default command;
