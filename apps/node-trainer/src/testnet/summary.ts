// The testnet's JSON summary, from the trainers' JSON event lines (losses, result sizes, per-epoch parameter
// hashes, held-out evaluations) and the relay's HTTP API (round history with witness quorum, agreed hashes).
import type { ParamHashReport, RunSummary } from '@meshtrain/client/relay-api';
import { parameterCount, PRESETS, type PresetName } from '@meshtrain/model';
import {
  cheaterAccounting,
  dataAccounting,
  type DataAccounting,
  type RoundHistoryRow,
} from './accounting.ts';
import type { AdversarySpec } from './adversaries.ts';
import { fabricatedCommitments, integrityByEpoch, type EpochIntegrity } from './integrity.ts';
import type { Trainer, TrainerEvent, TrainerSpec } from './processes.ts';
import type { ObservedCheat, ObservedVerdict } from './watch.ts';

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
  /** Closed rounds' admitted lists light trainers got from peers and from the relay (those that ran to the end). */
  admitted_lists_from_peers: number;
  admitted_lists_from_relay: number;
  resyncs: number;
  errors: number;
  seconds: number;
  logs: string | null;
  // --- adversaries (--adversary KIND[:N]); the fields above count the honest trainers only -----------------
  adversaries: AdversarySpec[];
  /** Honest trainers started once the run trained (--late-joiners): they join the next epoch. */
  late_joiners: number;
  /** Identities the adversaries joined as (the sybil process's many included) and how many became members. */
  adversary_identities: number;
  adversaries_joined: number;
  /** Adversary identities the coordinator ejected (the relay's state: `ejected`, permanent). */
  cheaters_ejected: number;
  /** Adversary identities ever Dropped or Ejected from an epoch. */
  adversaries_dropped: number;
  /** Epoch ends whose designated checkpoint uploader (the first voter) was an adversary. */
  adversary_designated_uploads: number;
  /** Adversaries' results core accepted in rounds peers applied (accounting.ts cheaterAccounting). */
  cheater_results_accepted: number;
  /**
   * Of those, the ones still in the model at the end: not removed by the replay that follows a confirmed
   * cheat (verification of work). An adversary ejected otherwise (equivocation) keeps what was accepted
   * before; so does a cheat nobody's verification sampled. Must be 0 for the kinds verification catches.
   */
  cheater_results_applied: number;
  /** Honest trainers that were ever Dropped or Ejected (one chaos killed counts only if Ejected). */
  honest_dropped: number;
  /** Adversaries' parameter-hash reports that differ from the agreed hash (not counted above). */
  adversary_hash_mismatches: number;
  /** Refusal codes (and HTTP statuses, `http_409`) in the adversaries' error and warning events. */
  adversary_refusals: Record<string, number>;
  /** Whether the relay's advertised parameter hash is the honest trainers' hash of that epoch; null: none. */
  advertised_hash_honest: boolean | null;
  /** Checkpoints the relay stored for the run's epoch ends, and how many differ from the honest hash. */
  checkpoints_stored: number;
  checkpoints_dishonest: number;
  /** Per epoch: the attackers' share of applied results, garbage applied, honest drops, verdicts, strikes. */
  by_epoch: EpochIntegrity[];
  /** Fabricated results still applied at the end, over all epochs. */
  fabricated_applied: number;
  /** `node-trainer verify` processes whose keys the run listed as trusted (--trusted-verifiers). */
  trusted_verifiers: number;
  /** Trusted verifiers ever Dropped or Ejected. */
  trusted_verifiers_dropped: number;
  /**
   * The run-level warnings the relay gave while the run went on (core's trustWarning: no trusted verifier,
   * so the run may be attacker-controlled; or none taking part), distinct, first seen first; empty: none.
   */
  trust_warnings: string[];
  // --- how the honest trainers' processes ended, taken before the testnet ends what is left ----------------
  trainer_exits: TrainerExit[];
  /**
   * Honest trainers that reported `done` and did not end by themselves with status 0 within EXIT_GRACE_S of
   * it (still running, another status, or ended only by their own lingering check). Must be 0.
   */
  trainers_not_exited: number;
}

/** Seconds a trainer may take from its `done` event to its exit. */
export const EXIT_GRACE_S = 10;

/** How one honest trainer's (last) process ended. */
export interface TrainerExit {
  trainer: number;
  /** It reported `done` (its session ended and released everything). */
  done: boolean;
  /** Exit status and signal; both null while it still ran. */
  exit_code: number | null;
  signal: string | null;
  /** Seconds from its `done` event to its exit; null without both. */
  seconds_done_to_exit: number | null;
  /** It outlived its session and ended itself (node-trainer's `lingering` event). */
  lingered: boolean;
}

/** The honest trainers' exits as they are now. */
export function trainerExits(trainers: readonly Trainer[]): TrainerExit[] {
  return trainers.map((t) => ({
    trainer: t.index,
    done: t.doneAt !== null,
    exit_code: t.exit?.code ?? null,
    signal: t.exit?.signal ?? null,
    seconds_done_to_exit:
      t.doneAt !== null && t.exit ? Number(((t.exit.at - t.doneAt) / 1000).toFixed(2)) : null,
    lingered: t.lingered,
  }));
}

/** Whether a trainer that reported `done` failed to end by itself, with status 0, in time. */
export function exitedLate(x: TrainerExit): boolean {
  if (!x.done) return false;
  return (
    x.lingered ||
    x.exit_code !== 0 ||
    x.seconds_done_to_exit === null ||
    x.seconds_done_to_exit > EXIT_GRACE_S
  );
}

/** What GET /api/runs/:id says at the end (the parts the summary reads, typed as the API's). */
export interface RunDetail {
  run?: Pick<RunSummary, 'param_hash'>;
  rounds?: RoundHistoryRow[];
  param_hashes?: Pick<ParamHashReport, 'epoch' | 'step' | 'majority' | 'reports' | 'mismatched'>[];
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
  ids: ReadonlySet<string>,
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
  const relayMismatches = (detail.param_hashes ?? []).reduce(
    (n, e) => n + e.mismatched.filter((id) => ids.has(id)).length,
    0,
  );
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
  // Per optimizer step: a SparseLoCo result covers innerSteps of them (an fp32 gradient is sent for each).
  const bytes = trained.map((x) => Number(x.e.bytes) / Number(x.e.innerSteps ?? 1));
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
    admitted_lists_from_peers: sumLists(of('done'), 'from_peers'),
    admitted_lists_from_relay: sumLists(of('done'), 'from_relay'),
    resyncs: of('resync').length,
    errors: of('error').length,
  };
}

function sumLists(done: Events, key: 'from_peers' | 'from_relay'): number {
  return done.reduce(
    (n, x) => n + Number((x.e.admitted_lists as Record<string, number> | undefined)?.[key] ?? 0),
    0,
  );
}

/** The honest trainers' parameter hash at each epoch end they reported (the most reported one). */
export function honestHashes(events: Events): { byStep: Map<number, string>; byEpoch: Map<number, string> } {
  const counts = new Map<number, Map<string, number>>();
  const epochOf = new Map<number, number>();
  for (const x of events) {
    if (x.e.type !== 'paramHash') continue;
    const step = Number(x.e.step);
    const m = counts.get(step) ?? new Map<string, number>();
    m.set(String(x.e.hash), (m.get(String(x.e.hash)) ?? 0) + 1);
    counts.set(step, m);
    epochOf.set(step, Number(x.e.epoch));
  }
  const byStep = new Map<number, string>();
  const byEpoch = new Map<number, string>();
  for (const [step, m] of counts) {
    const top = [...m].sort((a, b) => b[1] - a[1])[0]![0];
    byStep.set(step, top);
    byEpoch.set(epochOf.get(step)!, top);
  }
  return { byStep, byEpoch };
}

/** Codes of the refusals an adversary's events mention (RelayRefusal codes, API error codes, HTTP statuses). */
function refusalCodes(events: Events): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of events) {
    if (x.e.type !== 'error' && x.e.type !== 'warning') continue;
    const text = String(x.e.message ?? '');
    // "RelayRefusal: bad_result: …" (WebSocket), "…: 409 param_hash_mismatch: …" or "HTTP 409 {"code":…}" (HTTP).
    const codes = [
      ...[...text.matchAll(/RelayRefusal: ([a-z_]+)/g)].map((m) => m[1]!),
      ...[...text.matchAll(/"code":"([a-z_]+)"/g)].map((m) => m[1]!),
      ...[...text.matchAll(/\b[45]\d\d ([a-z_]+):/g)].map((m) => m[1]!),
      ...[...text.matchAll(/\b(?:HTTP )?([45]\d\d)\b(?= [a-z_{])/g)].map((m) => `http_${m[1]!}`),
    ];
    for (const c of new Set(codes)) out[c] = (out[c] ?? 0) + 1;
  }
  return out;
}

export interface SummaryInput {
  o: {
    numClients: number;
    steps: number;
    preset: PresetName;
    keep: boolean;
    adversaries: AdversarySpec[];
    lateJoiners: number;
  };
  runState: string;
  progressStep: number;
  trainers: readonly TrainerSpec[];
  events: Events;
  /** The relay's final answer for the run. */
  detail: RunDetail;
  /** The round history merged across the whole run (watch.ts). */
  rows: RoundHistoryRow[];
  cheats: readonly ObservedCheat[];
  /** Ids ever seen Dropped or Ejected, ejected at the end, and ever seen as members or epoch clients. */
  dropped: ReadonlySet<string>;
  ejected: ReadonlySet<string>;
  seen: ReadonlySet<string>;
  /** Epoch → its designated checkpoint uploader (watch.ts). */
  uploaders: ReadonlyMap<number, string>;
  /** The run-level trust warnings the watcher saw. */
  trustWarnings: readonly string[];
  /** Every verdict the watcher saw, and the epoch each id was first Dropped/Ejected and ejected in. */
  verdicts: Iterable<ObservedVerdict>;
  droppedIn: ReadonlyMap<string, number>;
  ejectedIn: ReadonlyMap<string, number>;
  /** Indices of the trainers chaos killed. */
  killed: ReadonlySet<number>;
  /** How the honest trainers' processes ended (trainerExits, before the testnet's own kill). */
  exits: TrainerExit[];
  checkpoints: { stored: number; dishonest: number };
  kills: number;
  restarts: number;
  started: number;
  dir: string;
}

/** The adversary fields of the summary. */
function adversarySummary(s: SummaryInput, adversaryEvents: Events) {
  const honest = s.trainers.filter((t) => t.role === 'honest');
  const adversaryIds = new Set(s.trainers.filter((t) => t.role === 'adversary').flatMap((t) => t.ids));
  const cheaters = cheaterAccounting(s.rows, adversaryIds, s.cheats);
  const verifiers = s.trainers.filter((t) => t.role === 'verifier');
  const lost = (t: TrainerSpec) =>
    t.ids.some((id) => s.ejected.has(id) || (s.dropped.has(id) && !s.killed.has(t.index)));
  const advertised = s.detail.run?.param_hash ?? null;
  const honestHash = advertised ? honestHashes(s.events.filter((x) => isHonest(s, x.trainer))) : null;
  return {
    adversaries: s.o.adversaries,
    late_joiners: s.o.lateJoiners,
    adversary_identities: adversaryIds.size,
    adversaries_joined: [...adversaryIds].filter((id) => s.seen.has(id)).length,
    cheaters_ejected: [...adversaryIds].filter((id) => s.ejected.has(id)).length,
    adversaries_dropped: [...adversaryIds].filter((id) => s.dropped.has(id)).length,
    adversary_designated_uploads: [...s.uploaders.values()].filter((id) => adversaryIds.has(id)).length,
    cheater_results_accepted: cheaters.accepted,
    cheater_results_applied: cheaters.applied,
    honest_dropped: honest.filter(lost).length,
    adversary_hash_mismatches: hashAgreement(adversaryEvents, s.detail, adversaryIds).mismatches,
    adversary_refusals: refusalCodes(adversaryEvents),
    advertised_hash_honest:
      advertised && honestHash ? honestHash.byEpoch.get(advertised.epoch) === advertised.hash : null,
    checkpoints_stored: s.checkpoints.stored,
    checkpoints_dishonest: s.checkpoints.dishonest,
    trusted_verifiers: verifiers.length,
    trusted_verifiers_dropped: verifiers.filter(lost).length,
    trust_warnings: [...s.trustWarnings],
  };
}

/** The per-epoch hostile-majority figures (integrity.ts) from the run's history and the adversaries' events. */
function integritySummary(s: SummaryInput, adversaryEvents: Events) {
  const ids = (role: TrainerSpec['role']) =>
    new Set(s.trainers.filter((t) => t.role === role).flatMap((t) => t.ids));
  const byEpoch = integrityByEpoch({
    rows: s.rows,
    cheats: s.cheats,
    verdicts: s.verdicts,
    attackers: ids('adversary'),
    // A trusted verifier's drop or ejection is the attackers' doing as much as an honest trainer's.
    honest: new Set([...ids('honest'), ...ids('verifier')]),
    trusted: ids('verifier'),
    fabricated: fabricatedCommitments(adversaryEvents),
    droppedIn: s.droppedIn,
    ejectedIn: s.ejectedIn,
    killed: new Set(s.trainers.filter((t) => s.killed.has(t.index)).flatMap((t) => t.ids)),
  });
  return { by_epoch: byEpoch, fabricated_applied: byEpoch.reduce((n, e) => n + e.fabricated_applied, 0) };
}

function isHonest(s: SummaryInput, index: number): boolean {
  return s.trainers.find((t) => t.index === index)?.role !== 'adversary';
}

export function summarize(s: SummaryInput): TestnetResult {
  const { o, detail } = s;
  const rounds = s.rows;
  const params = parameterCount(PRESETS[o.preset]);
  const honestEvents = s.events.filter((x) => isHonest(s, x.trainer));
  const adversaryEvents = s.events.filter((x) => !isHonest(s, x.trainer));
  const honestIds = new Set(s.trainers.filter((t) => t.role === 'honest').flatMap((t) => t.ids));
  const hashes = hashAgreement(honestEvents, detail, honestIds);
  const ev = fromEvents(honestEvents, params);
  return {
    // The coordinator finishes when an epoch ends at or past total_steps: total_steps + 2 after the drain
    // rounds total_steps reached starts, or exactly total_steps when an epoch's time-out drain ends there.
    completed: s.runState === 'Finished' && s.progressStep >= o.steps,
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
    admitted_lists_from_peers: ev.admitted_lists_from_peers,
    admitted_lists_from_relay: ev.admitted_lists_from_relay,
    resyncs: ev.resyncs,
    errors: ev.errors,
    seconds: Math.round((Date.now() - s.started) / 1000),
    logs: o.keep ? s.dir : null,
    ...adversarySummary(s, adversaryEvents),
    trainer_exits: s.exits,
    trainers_not_exited: s.exits.filter(exitedLate).length,
    ...integritySummary(s, adversaryEvents),
  };
}
