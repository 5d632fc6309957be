// The testnet's JSON summary, from the trainers' JSON event lines (losses, result sizes, per-epoch parameter
// hashes, held-out evaluations) and the relay's HTTP API (round history with witness quorum, agreed hashes).
import { parameterCount, PRESETS, type PresetName } from '@meshtrain/model';
import { dataAccounting, type DataAccounting, type RoundHistoryRow } from './accounting.ts';
import type { TrainerEvent } from './processes.ts';

export interface TestnetResult extends DataAccounting {
  completed: boolean;
  run_state: string;
  steps_completed: number;
  training_rounds: number;
  clients: number;
  preset: string;
  parameters: number;
  loss_first: number | null;
  loss_last: number | null;
  train_loss_first: number | null;
  train_loss_last: number | null;
  epochs: number;
  param_hash_reports: number;
  param_hash_mismatches: number;
  quorum_failures: number;
  rounds_observed: number;
  bytes_sent_per_step: number;
  ratio_vs_fp32: number;
  kills: number;
  restarts: number;
  rejoined_with_checkpoint: number;
  /** Of those, how many got the parameters from peers (the rest from the relay's store). */
  rejoined_from_peers: number;
  /** Result bytes trainers fetched from peers instead of the relay (trainers that ran to the end). */
  result_bytes_from_peers: number;
  resyncs: number;
  errors: number;
  seconds: number;
  logs: string | null;
}

/** What GET /api/runs/:id says at the end (the parts the summary reads). */
export interface RunDetail {
  rounds?: RoundHistoryRow[];
  param_hashes?: {
    epoch: number;
    step: number;
    majority: string | null;
    reports: number;
    mismatched: string[];
  }[];
}

export type Events = readonly { trainer: number; e: TrainerEvent }[];

/**
 * Hashes: every trainer's own report per epoch-end step, against the hash the relay's coordinator agreed on
 * for that step (core's verdict). A step without an agreed hash counts every report that is not the same as
 * all the others: replicas that should be identical are not.
 */
export function hashAgreement(
  events: Events,
  detail: RunDetail,
): { epochs: number; reports: number; mismatches: number } {
  const hashes = new Map<number, Map<number, string>>();
  for (const x of events) {
    if (x.e.type !== 'paramHash') continue;
    const m = hashes.get(Number(x.e.step)) ?? new Map<number, string>();
    m.set(x.trainer, String(x.e.hash));
    hashes.set(Number(x.e.step), m);
  }
  const agreed = new Map((detail.param_hashes ?? []).map((e) => [e.step, e.majority]));
  let mismatches = 0;
  let reports = 0;
  for (const [step, m] of hashes) {
    const values = [...m.values()];
    reports += values.length;
    const want = agreed.get(step) ?? null;
    if (want !== null) mismatches += values.filter((h) => h !== want).length;
    else if (new Set(values).size > 1) mismatches += values.length;
  }
  const relayMismatches = (detail.param_hashes ?? []).reduce((n, e) => n + e.mismatched.length, 0);
  return { epochs: hashes.size, reports, mismatches: Math.max(mismatches, relayMismatches) };
}

/** Losses, sizes and counts the trainers' events carry. */
function fromEvents(events: Events, params: number) {
  const of = (type: string) => events.filter((x) => x.e.type === type);
  const byStep = (a: { e: TrainerEvent }, b: { e: TrainerEvent }) => Number(a.e.step) - Number(b.e.step);
  const evals = of('eval')
    .filter((x) => typeof x.e.val_loss === 'number')
    .sort(byStep);
  const trained = of('trained');
  const trainedSorted = [...trained].sort(byStep);
  const bytes = trained.map((x) => Number(x.e.bytes));
  const meanBytes = bytes.length ? bytes.reduce((a, b) => a + b, 0) / bytes.length : 0;
  const models = of('model').filter((x) => x.e.source === 'checkpoint');
  return {
    training_rounds: new Set(trained.map((x) => Number(x.e.step))).size,
    loss_first: evals.length ? Number(evals[0]!.e.val_loss) : null,
    loss_last: evals.length ? Number(evals.at(-1)!.e.val_loss) : null,
    train_loss_first: trainedSorted.length ? Number(trainedSorted[0]!.e.loss) : null,
    train_loss_last: trainedSorted.length ? Number(trainedSorted.at(-1)!.e.loss) : null,
    bytes_sent_per_step: Math.round(meanBytes),
    ratio_vs_fp32: meanBytes > 0 ? Number(((params * 4) / meanBytes).toFixed(1)) : 0,
    rejoined_with_checkpoint: models.length,
    rejoined_from_peers: models.filter((x) => x.e.via === 'peers').length,
    result_bytes_from_peers: of('done').reduce(
      (n, x) => n + Number((x.e.stats as { bytesFromPeers?: number } | undefined)?.bytesFromPeers ?? 0),
      0,
    ),
    resyncs: of('resync').length,
    errors: of('error').length,
  };
}

export interface SummaryInput {
  o: { numClients: number; steps: number; preset: PresetName; keep: boolean };
  runState: string;
  progressStep: number;
  events: Events;
  detail: RunDetail;
  kills: number;
  restarts: number;
  started: number;
  dir: string;
}

export function summarize(s: SummaryInput): TestnetResult {
  const { o, detail } = s;
  const rounds = detail.rounds ?? [];
  const params = parameterCount(PRESETS[o.preset]);
  const hashes = hashAgreement(s.events, detail);
  const ev = fromEvents(s.events, params);
  return {
    completed: s.runState === 'Finished' && s.progressStep - 1 >= o.steps,
    run_state: s.runState,
    // Coordinator steps (rounds) up to total_steps; the two drain rounds after it only apply the last results.
    steps_completed: Math.min(o.steps, Math.max(0, s.progressStep - 1)),
    training_rounds: ev.training_rounds,
    clients: o.numClients,
    preset: o.preset,
    parameters: params,
    loss_first: ev.loss_first,
    loss_last: ev.loss_last,
    train_loss_first: ev.train_loss_first,
    train_loss_last: ev.train_loss_last,
    epochs: hashes.epochs,
    param_hash_reports: hashes.reports,
    param_hash_mismatches: hashes.mismatches,
    quorum_failures: rounds.filter((r) => !r.quorum_reached).length,
    rounds_observed: rounds.length,
    ...dataAccounting(rounds),
    bytes_sent_per_step: ev.bytes_sent_per_step,
    ratio_vs_fp32: ev.ratio_vs_fp32,
    kills: s.kills,
    restarts: s.restarts,
    rejoined_with_checkpoint: ev.rejoined_with_checkpoint,
    rejoined_from_peers: ev.rejoined_from_peers,
    result_bytes_from_peers: ev.result_bytes_from_peers,
    resyncs: ev.resyncs,
    errors: ev.errors,
    seconds: Math.round((Date.now() - s.started) / 1000),
    logs: o.keep ? s.dir : null,
  };
}
