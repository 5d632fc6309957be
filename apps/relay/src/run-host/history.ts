// What a run's transitions leave in relay.db besides the transition itself: the round history, points,
// epoch ends and orphaned steps derived from core's effects, the witnesses' metric samples, and the label a
// transition has in the run's history.
import { acceptedCommitments, bytesToHex, epochEndOf, roundAtHeight } from '@meshtrain/core';
import type { CoordinatorEffect, CoordinatorEvent, CoordinatorState } from '@meshtrain/core';
import type { RelayStore } from '../store.ts';

/** A compact, JSON-safe description of an event for the transition history (attestations are summarised). */
export function eventLabel(event: CoordinatorEvent): Record<string, unknown> {
  switch (event.type) {
    case 'witness':
      return { type: event.type, id: event.id, step: event.step, index: event.proof?.index };
    case 'health_check':
      return { type: event.type, id: event.id, checks: event.checks.map((c) => c.id) };
    case 'update_config':
      return { type: event.type };
    case 'tick':
    case 'entropy':
      return { type: event.type };
    default:
      return { ...event };
  }
}

/** Round history rows from core's effects; accepted commitments as core decides them. */
export function recordEffects(
  store: RelayStore,
  runId: string,
  prev: CoordinatorState,
  next: CoordinatorState,
  effects: readonly CoordinatorEffect[],
  now: number,
): void {
  for (const e of effects) {
    if (e.type === 'RoundStarted') {
      store.rounds.roundStarted(runId, {
        step: e.step,
        epoch: e.epoch,
        height: e.height,
        random_seed: e.random_seed,
        data_index: e.data_index,
        batch_size: e.batch_size,
        training: e.training,
        clients: e.clients,
        started_at: now,
      });
      // Results older than the 4-round ring can no longer be applied by anyone; keep a margin.
      store.rounds.pruneResults(runId, e.step - 8);
      store.metrics.addMetric(runId, now * 1000, 'clients', e.clients);
    } else if (e.type === 'RoundEnded') {
      store.rounds.roundEnded(runId, e.step, now, e.witnesses, e.quorum, e.quorum_reached);
      store.metrics.addMetric(runId, now * 1000, 'witnesses', e.witnesses, {
        step: String(e.step),
      });
      // The round that just ended attests the one before it: its witnesses' attestations decide which
      // result of each batch everyone applies. `prev` still holds them (pruning happens on later rounds).
      recordAccepted(store, runId, prev, e.height - 1);
    } else if (e.type === 'CheatConfirmed') {
      store.sessions.zeroPoints(runId, e.id);
    } else if (e.type === 'RunStateChanged' && e.to === 'Cooldown') {
      // The epoch's end as the coordinator reached it: who may vote on its parameter hash (core's rule).
      const end = epochEndOf(next);
      if (end) store.checkpoints.recordEpochEnd(runId, end);
    } else if (e.type === 'EpochEnded') {
      // The epoch's parameters live only in its clients; with none left Healthy at its end (the last one
      // paused or crashed), no checkpoint for the next epoch's start step will ever be uploaded.
      const holders = prev.epoch.clients.filter((c) => c.state === 'Healthy').length;
      if (holders === 0 && next.progress.step > 1) store.checkpoints.markOrphaned(runId, next.progress.step);
    }
  }
}

function recordAccepted(store: RelayStore, runId: string, state: CoordinatorState, height: number): void {
  const round = roundAtHeight(state, height);
  const accepted = acceptedCommitments(state, height);
  if (!round || accepted === null) return;
  const rows = accepted.map((a) => ({
    batch: { start: a.batch.start, end: a.batch.end },
    client: state.epoch.clients[a.client_index]?.id ?? null,
    commitment: a.commitment === null ? null : bytesToHex(a.commitment),
    votes: a.votes,
  }));
  store.rounds.roundAccepted(runId, round.step, rows);
  for (const r of rows)
    if (r.commitment !== null && r.client !== null) store.sessions.addPoints(runId, r.client, 1);
}

/** Loss, throughput and bandwidth that witnesses report for a step: metric samples and the round's mean loss. */
export function recordWitnessMetadata(
  store: RelayStore,
  runId: string,
  at: number,
  step: number,
  client: string,
  m: { loss: number; tokensPerSec: number; bandwidth: number },
): void {
  const labels = { step: String(step), client };
  if (Number.isFinite(m.loss)) {
    store.metrics.addMetric(runId, at, 'loss', m.loss, labels);
    const losses = store.metrics
      .metrics(runId, 'loss', 200)
      .filter((s) => (s.labels as { step?: string }).step === String(step))
      .map((s) => s.value);
    if (losses.length > 0)
      store.rounds.roundLoss(runId, step, losses.reduce((a, b) => a + b, 0) / losses.length);
  }
  if (Number.isFinite(m.tokensPerSec))
    store.metrics.addMetric(runId, at, 'tokens_per_sec', m.tokensPerSec, labels);
  if (Number.isFinite(m.bandwidth)) store.metrics.addMetric(runId, at, 'bandwidth', m.bandwidth, labels);
}
