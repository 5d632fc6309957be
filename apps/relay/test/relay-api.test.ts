// @meshtrain/client/relay-api against the real relay server: the typed replies it documents, and every way a
// request can fail as a RelayApiError with its code (the relay's own, unreachable, not the relay's answer).
// Plus the witness-report aggregation behind the run detail's `reports` and each client's `report`.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fetchCheckpointSummary,
  fetchRunConfig,
  fetchRunInfo,
  fetchRunList,
  RelayApiError,
} from '@meshtrain/client/relay-api';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import { witnessReports } from '../src/routes/witness-reports.ts';
import { fastRunToml, hexKey, identity } from './helpers/relay-fixtures.ts';

let relay: RunningRelay;
let notRelay: Server;
let notRelayUrl = '';
const RUN = 'typed';

beforeAll(async () => {
  relay = await startRelayServer({ dataDir: ':memory:', tickMs: 100 });
  relay.relay.createRun({ toml: fastRunToml(RUN), mainAuthority: hexKey(identity(700)) });
  // Something else on a port: answers every request 200 with an HTML page.
  notRelay = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<p>hi</p>'),
  );
  await new Promise<void>((r) => notRelay.listen(0, '127.0.0.1', r));
  notRelayUrl = `http://127.0.0.1:${(notRelay.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await relay.close();
  await new Promise((r) => notRelay.close(r));
});

async function failure(p: Promise<unknown>): Promise<RelayApiError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(RelayApiError);
  return e as RelayApiError;
}

describe('typed relay API', () => {
  it('reads the run list and a run in detail, with its config parsed', async () => {
    const list = await fetchRunList(`${relay.url}/`);
    expect(list.runs.map((r) => r.run_id)).toEqual([RUN]);
    expect(list.p2p_multiaddrs).toEqual([]);
    const { detail, config } = await fetchRunConfig(relay.url, RUN);
    expect(detail.run).toMatchObject({ run_id: RUN, run_state: 'WaitingForMembers', step: 1 });
    expect(detail.config.parsed?.config.total_steps).toBe(config.config.total_steps);
    expect(detail.reports).toEqual([]);
    expect(detail.state).toBeUndefined();
    const withState = await fetchRunInfo(relay.url, RUN, { withState: true });
    expect(withState.state?.run_state).toBe('WaitingForMembers');
    expect(withState.state?.progress.step).toBe(1);
  });

  it("turns the relay's errors, an absent relay and a stranger's answer into typed errors", async () => {
    const unknown = await failure(fetchRunInfo(relay.url, 'nope'));
    expect(unknown).toMatchObject({ status: 404, code: 'unknown_run', request: 'GET /api/runs/nope' });
    expect(unknown.message).toContain("no run 'nope'");
    const absent = await failure(fetchRunInfo('http://127.0.0.1:1', RUN));
    expect(absent).toMatchObject({ status: 0, code: 'unreachable' });
    const stranger = await failure(fetchRunInfo(notRelayUrl, RUN));
    expect(stranger).toMatchObject({ status: 200, code: 'bad_response' });
    expect(stranger.message).toContain('reply is not an object');
    // A 404 without the relay's error body.
    const missing = await failure(fetchRunList(`${relay.url}/nothing-here`));
    expect(missing.status).toBe(404);
  });

  it('reports no checkpoint as null, and an aborted request as the AbortError', async () => {
    expect(await fetchCheckpointSummary(relay.url, RUN, 1)).toBeNull();
    const controller = new AbortController();
    controller.abort();
    await expect(fetchRunInfo(relay.url, RUN, { signal: controller.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
  });
});

describe('witness reports', () => {
  const sample = (step: number, client: string, value: number) => ({
    at: 0,
    value,
    labels: { step: String(step), client },
  });

  it('joins both figures per (step, client): means per step, each client at its newest step', () => {
    // Newest first, as the store returns them; b's step 4 bandwidth is missing, so that report is left out.
    const tokens = [sample(4, 'b', 900), sample(4, 'a', 100), sample(3, 'b', 300), sample(3, 'a', 200)];
    const bandwidth = [sample(4, 'a', 10), sample(3, 'b', 30), sample(3, 'a', 20)];
    const { steps, latest } = witnessReports(tokens, bandwidth);
    expect(steps).toEqual([
      { step: 4, reports: 1, tokens_per_sec: 100, bandwidth: 10 },
      { step: 3, reports: 2, tokens_per_sec: 250, bandwidth: 25 },
    ]);
    expect(latest.get('a')).toEqual({ step: 4, tokens_per_sec: 100, bandwidth: 10 });
    expect(latest.get('b')).toEqual({ step: 3, tokens_per_sec: 300, bandwidth: 30 });
  });

  it('ignores samples whose labels are not a step and a client, and repeated reports', () => {
    const odd = [
      { at: 0, value: 5, labels: null },
      { at: 0, value: 5, labels: { step: 'x', client: 'a' } },
      { at: 0, value: 5, labels: { step: '2' } },
    ];
    const tokens = [...odd, sample(2, 'a', 50), sample(2, 'a', 70)];
    const { steps } = witnessReports(tokens, [...odd, sample(2, 'a', 1)]);
    expect(steps).toEqual([{ step: 2, reports: 1, tokens_per_sec: 50, bandwidth: 1 }]);
  });
});
