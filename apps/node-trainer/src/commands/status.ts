// node-trainer status: a run's state from the relay's HTTP API — round progress, witness quorum of recent
// rounds, clients, what the witnesses measured, and the epoch parameter hashes (majority and mismatching
// clients).
import { fetchRunInfo, fetchRunList, RelayApiError, type RunDetail } from '@meshtrain/client/relay-api';
import { CliError, type Command } from '../command.ts';
import { parseFlags } from '../options/index.ts';

/** The relay's typed replies; its errors (unknown run, unreachable, not a relay) as the CLI's. */
async function fromRelay<T>(request: Promise<T>): Promise<T> {
  try {
    return await request;
  } catch (e) {
    if (e instanceof RelayApiError)
      throw new CliError(
        e.code === 'unknown_run' ? `${e.message} (GET /api/runs lists the runs)` : e.message,
      );
    throw e;
  }
}

function describe(d: RunDetail): string[] {
  const r = d.run;
  const lines: string[] = [];
  const pct = r.total_steps > 0 ? Math.min(100, ((r.step - 1) / r.total_steps) * 100) : 0;
  lines.push(
    `run ${r.run_id}: ${r.run_state}, epoch ${r.epoch}, step ${r.step}/${r.total_steps} (${pct.toFixed(0)}%)`,
  );
  if (r.round)
    lines.push(
      `  round ${r.round.height} (step ${r.round.step}): ${r.round.witnesses} of ${r.round.witness_count} witnesses submitted`,
    );
  lines.push(
    `  clients: ${r.healthy_clients} healthy of ${r.epoch_clients} in the epoch, ${r.members} registered, ${r.connected} connected`,
  );
  // Older relays send neither field.
  const trusted = r.trusted_verifiers ?? [];
  lines.push(
    trusted.length > 0
      ? `  trusted verifiers: ${trusted.map((k) => `${k.slice(0, 12)}…`).join(', ')}`
      : '  trusted verifiers: none',
  );
  if (r.trust_warning) lines.push(`  WARNING: the run may be attacker-controlled: ${r.trust_warning}`);
  const rounds = d.rounds;
  if (rounds.length > 0) {
    const done = rounds.filter((x) => x.quorum_reached !== null);
    const failed = done.filter((x) => x.quorum_reached === false);
    lines.push(
      `  witness quorum: ${done.length - failed.length}/${done.length} recent rounds reached it` +
        (failed.length ? ` (missed at steps ${failed.map((x) => x.step).join(', ')})` : ''),
    );
    const withLoss = rounds.filter((x) => typeof x.loss === 'number');
    if (withLoss.length)
      lines.push(
        `  latest reported loss ${(withLoss[0]?.loss as number).toFixed(4)} (step ${withLoss[0]?.step})`,
      );
  }
  const reported = d.reports[0];
  if (reported)
    lines.push(
      `  witnesses measured ${reported.tokens_per_sec.toFixed(0)} tokens/s and ${(reported.bandwidth / 1024).toFixed(1)} KiB/s per client (mean of ${reported.reports} at step ${reported.step})`,
    );
  for (const h of d.param_hashes)
    lines.push(
      `  epoch ${h.epoch} parameter hash ${h.majority?.slice(0, 16) ?? '—'}… from ${h.reports} reports` +
        (h.mismatched.length
          ? `; MISMATCHED: ${h.mismatched.map((m) => m.slice(0, 12)).join(', ')}`
          : ', all equal'),
    );
  return lines;
}

const command: Command = {
  summary: "show a relay's runs: round progress, witness quorum, clients, parameter hashes",
  usage: '--relay URL [--run-id ID] [--json]',
  async run(argv) {
    const { values } = parseFlags(argv, {
      relay: { type: 'string' },
      'run-id': { type: 'string' },
      json: { type: 'boolean' },
    });
    if (!values.relay) throw new CliError('--relay URL is required');
    const relay = values.relay;
    const ids = values['run-id']
      ? [values['run-id']]
      : (await fromRelay(fetchRunList(relay))).runs.map((r) => r.run_id);
    const details = await Promise.all(ids.map((id) => fromRelay(fetchRunInfo(relay, id))));
    if (values.json) {
      console.log(
        JSON.stringify({
          runs: details.map((d) => ({
            ...d.run,
            rounds: d.rounds,
            reports: d.reports,
            param_hashes: d.param_hashes,
          })),
        }),
      );
      return 0;
    }
    if (details.length === 0) console.log('no runs on this relay');
    for (const d of details) console.log(describe(d).join('\n'));
    return 0;
  },
};

export default command;
