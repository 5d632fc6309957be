// Public run routes under /api/runs: the list, one run in detail, and stored results by commitment (the
// guaranteed delivery path for results whose P2P download failed).
import { Hono } from 'hono';
import { currentRound, parseRunConfig, RUN_STATE_NAMES, trustWarning, isHex32 } from '@meshtrain/core';
import type { RunConfig } from '@meshtrain/core';
// Types only (erased at run time): the reply shapes every side reads, so a change here or there fails the
// type check (the module says why it is not Hono's typed client).
import type { RunDetail, RunList, RunSummary } from '@meshtrain/client/relay-api';
import type { Relay } from '../relay.ts';
import { PERMISSIONLESS, RelayError } from '../relay.ts';
import type { RunHost } from '../run-host.ts';
import { onRouteError } from './errors.ts';
import { REPORT_SAMPLES, witnessReports } from './witness-reports.ts';

/** What lists and admin replies show about a run. */
export function runSummary(relay: Relay, host: RunHost): RunSummary {
  const s = host.state;
  const round = currentRound(s);
  const permissionless = relay.store.sessions.grant(host.runId, PERMISSIONLESS);
  return {
    run_id: host.runId,
    run_state: s.run_state,
    run_state_index: RUN_STATE_NAMES.indexOf(s.run_state),
    pending_pause: s.pending_pause,
    epoch: s.progress.epoch,
    step: s.progress.step,
    total_steps: s.config.total_steps,
    round:
      round === null
        ? null
        : {
            height: round.height,
            step: round.step,
            witnesses: round.witnesses.length,
            witness_count: round.witness_count,
          },
    members: s.members.length,
    epoch_clients: s.epoch.clients.length,
    healthy_clients: s.epoch.clients.filter((c) => c.state === 'Healthy').length,
    connected: relay.sessionsOf(host.runId).length,
    permissioned: !(permissionless?.active ?? false),
    main_authority: host.row.main_authority,
    join_authority: host.row.join_authority,
    created_at: host.row.created_at,
    seq: host.seq,
    param_hash:
      host.paramHash === undefined
        ? null
        : { epoch: host.paramHash.epoch, hash: Buffer.from(host.paramHash.hash).toString('hex') },
    trusted_verifiers: [...(s.config.trusted_verifiers ?? [])],
    trust_warning: trustWarning(s),
  };
}

/** One run in detail: config, clients, recent rounds and reports, grants, hashes and transitions. */
function runDetail(relay: Relay, host: RunHost, withState: boolean): RunDetail {
  let parsed: RunConfig | null = null;
  try {
    parsed = parseRunConfig(host.toml).config;
  } catch {
    // Stored TOML always parsed when it was accepted; a core upgrade could change that. Show the text.
  }
  const connected = new Set(relay.sessionsOf(host.runId).map((s) => s.identity));
  const epochState = new Map(host.state.epoch.clients.map((cl) => [cl.id, cl.state]));
  const reports = witnessReports(
    relay.store.metrics.metrics(host.runId, 'tokens_per_sec', REPORT_SAMPLES),
    relay.store.metrics.metrics(host.runId, 'bandwidth', REPORT_SAMPLES),
  );
  return {
    run: runSummary(relay, host),
    p2p_multiaddrs: relay.p2pMultiaddrs,
    config: { toml: host.toml, parsed },
    clients: relay.store.sessions.clients(host.runId).map((cl) => ({
      ...cl,
      connected: connected.has(cl.id),
      member: host.state.members.some((m) => m.id === cl.id),
      epoch_state: epochState.get(cl.id) ?? null,
      report: reports.latest.get(cl.id) ?? null,
    })),
    rounds: relay.store.rounds.rounds(host.runId, 50),
    reports: reports.steps.slice(0, 50),
    grants: relay.store.sessions.grants(host.runId),
    param_hashes: host.paramHashReport(),
    transitions: relay.store.runs.transitions(host.runId, 20).map((t) => ({
      seq: t.seq,
      at: t.at,
      event: JSON.parse(t.event) as unknown,
      effects: JSON.parse(t.effects) as unknown,
    })),
    ...(withState ? { state: host.state } : {}),
  };
}

export function runsRoutes(relay: Relay): Hono {
  const app = new Hono();
  app.onError(onRouteError);

  app.get('/', (c) =>
    c.json({
      runs: relay.runList().map((h) => runSummary(relay, h)),
      p2p_multiaddrs: relay.p2pMultiaddrs,
    } satisfies RunList),
  );

  app.get('/:id', (c) => {
    const host = relay.mustRun(c.req.param('id'));
    return c.json(runDetail(relay, host, c.req.query('state') === '1'));
  });

  app.get('/:id/results/:commitment', (c) => {
    const host = relay.mustRun(c.req.param('id'));
    const commitment = c.req.param('commitment').toLowerCase();
    if (!isHex32(commitment)) throw new RelayError(400, 'bad_request', 'the commitment is 64 hex digits');
    const r = relay.store.rounds.result(host.runId, commitment);
    if (!r)
      throw new RelayError(404, 'unknown_result', `no stored result ${commitment.slice(0, 16)}… in this run`);
    return c.body(new Uint8Array(r.frame), 200, {
      'Content-Type': 'application/octet-stream',
      'Cache-Control': 'public, max-age=31536000, immutable',
    });
  });

  // A closed round's admitted list by its address (the round outcome's admitted_list): what a light replica
  // fetches when no peer served it, and checks against the address itself.
  app.get('/:id/admitted/:address', (c) => {
    const host = relay.mustRun(c.req.param('id'));
    const address = c.req.param('address').toLowerCase();
    if (!isHex32(address)) throw new RelayError(400, 'bad_request', 'the address is 64 hex digits');
    const frame = host.admittedListFrame(address);
    if (!frame)
      throw new RelayError(
        404,
        'unknown_round',
        `no round of this run's last four has admitted list ${address.slice(0, 16)}…`,
      );
    return c.body(new Uint8Array(frame), 200, {
      'Content-Type': 'application/octet-stream',
      'Cache-Control': 'public, max-age=31536000, immutable',
    });
  });

  return app;
}
