// meshtrain's metrics and the /metrics route. The composition layer owns the numbers: it calls
// `observeCoordinator(state)` after every coordinator transition (all gauges below derive from the JSON
// CoordinatorState, so they can never disagree with what clients see), `countBytesIn/Out` on every frame
// and HTTP body, and `setLoss` when clients report losses. Series of a deleted run go with `forgetRun`.
import { Hono } from 'hono';
import {
  CLIENT_STATE_NAMES,
  currentRound,
  liveWitnessCount,
  quorum,
  RUN_STATE_NAMES,
  type CoordinatorState,
} from '@meshtrain/core';
import { MetricsRegistry, type Counter, type Gauge } from './registry.ts';

/** Client states reported by meshtrain_clients: the epoch's states plus members waiting for an epoch. */
export const CLIENT_STATES = [...CLIENT_STATE_NAMES, 'Waiting'] as const;

export class RelayMetrics {
  readonly registry: MetricsRegistry;
  readonly clients: Gauge;
  readonly roundHeight: Gauge;
  readonly step: Gauge;
  readonly epoch: Gauge;
  readonly runState: Gauge;
  readonly quorum: Gauge;
  readonly witnesses: Gauge;
  readonly loss: Gauge;
  readonly bytesIn: Counter;
  readonly bytesOut: Counter;

  constructor(registry = new MetricsRegistry()) {
    this.registry = registry;
    const r = registry;
    this.clients = r.gauge(
      'meshtrain_clients',
      'Clients of the run by state (epoch clients; Waiting = registered for the next epoch).',
      ['run', 'state'],
    );
    this.roundHeight = r.gauge('meshtrain_round_height', 'Height of the current round in its epoch.', [
      'run',
    ]);
    this.step = r.gauge('meshtrain_step', 'Coordinator progress.step (1-based round counter).', ['run']);
    this.epoch = r.gauge('meshtrain_epoch', 'Coordinator progress.epoch.', ['run']);
    this.runState = r.gauge('meshtrain_run_state', '1 for the run state the coordinator is in, else 0.', [
      'run',
      'state',
    ]);
    this.quorum = r.gauge(
      'meshtrain_quorum',
      'Witness proofs the current round needs (quorum of its witnesses that have not left before submitting).',
      ['run'],
    );
    this.witnesses = r.gauge('meshtrain_witnesses', 'Witness proofs received for the current round.', [
      'run',
    ]);
    this.loss = r.gauge('meshtrain_loss', 'Latest training loss reported for the run (nats/token).', ['run']);
    this.bytesIn = r.counter(
      'meshtrain_bytes_in_total',
      'Bytes received by the relay from clients (WebSocket frames and HTTP bodies).',
    );
    this.bytesOut = r.counter(
      'meshtrain_bytes_out_total',
      'Bytes sent by the relay to clients (WebSocket frames and HTTP bodies).',
    );
    // Counters exist from the start so a scrape shows 0 rather than nothing.
    this.bytesIn.inc({}, 0);
    this.bytesOut.inc({}, 0);
  }

  /** Sets every per-run gauge from the coordinator state (call after each transition). */
  observeCoordinator(state: CoordinatorState): void {
    const run = state.run_id;
    const counts = new Map<string, number>(CLIENT_STATES.map((s) => [s, 0]));
    const inEpoch = new Set<string>();
    for (const c of state.epoch.clients) {
      counts.set(c.state, (counts.get(c.state) ?? 0) + 1);
      inEpoch.add(c.id);
    }
    counts.set('Waiting', state.members.filter((m) => !inEpoch.has(m.id)).length);
    for (const [s, n] of counts) this.clients.set({ run, state: s }, n);
    for (const s of RUN_STATE_NAMES) this.runState.set({ run, state: s }, state.run_state === s ? 1 : 0);
    this.step.set({ run }, state.progress.step);
    this.epoch.set({ run }, state.progress.epoch);
    const round = currentRound(state);
    this.roundHeight.set({ run }, round?.height ?? 0);
    this.quorum.set({ run }, round === null ? 0 : quorum(liveWitnessCount(round)));
    this.witnesses.set({ run }, round?.witnesses.length ?? 0);
  }

  setLoss(runId: string, loss: number): void {
    this.loss.set({ run: runId }, loss);
  }

  countBytesIn(n: number): void {
    this.bytesIn.inc({}, n);
  }

  countBytesOut(n: number): void {
    this.bytesOut.inc({}, n);
  }

  /** Removes every series of a run (deleted runs must not linger in scrapes). */
  forgetRun(runId: string): void {
    for (const g of [
      this.clients,
      this.roundHeight,
      this.step,
      this.epoch,
      this.runState,
      this.quorum,
      this.witnesses,
      this.loss,
    ])
      g.remove({ run: runId });
  }
}

/**
 * `GET /metrics` in Prometheus text format. Mount: `app.route('/', metricsRoutes(metrics.registry))`.
 * `beforeScrape` lets the composition layer refresh gauges lazily (e.g. observe every run) per scrape.
 */
export function metricsRoutes(registry: MetricsRegistry, beforeScrape?: () => void | Promise<void>): Hono {
  const app = new Hono();
  app.get('/metrics', async (c) => {
    await beforeScrape?.();
    return c.body(registry.render(), 200, {
      'Content-Type': 'text/plain; version=0.0.4; charset=utf-8',
      'Cache-Control': 'no-store',
    });
  });
  return app;
}
