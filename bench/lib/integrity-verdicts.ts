// What bench:integrity makes of the verifiers' reports: every `verified` event of every client, labelled with
// who trained the result (honest peer or which cheater), whether that result was fabricated, and on which
// device each side ran; then detection and false-positive rates, agreement ranges per device pair, and the
// chance that sampling catches a cheater within a run.
import type { NetPeer } from './in-process-network.ts';
import type { FabricatedKind } from './integrity-config.ts';
import type { SentResult } from './integrity-cheaters.ts';
import { CONFIRMING_STRIKES } from '@meshtrain/core';
import { paramsBefore, type ParamLoad } from './param-log.ts';

export type Role = 'honest' | FabricatedKind;
export type Device = 'cpu' | 'webgpu';

export interface Member {
  peer: NetPeer;
  role: Role;
  device: Device;
  /** Cheaters: every result sent, in order. */
  sent: SentResult[];
  /** Every parameter set its train steps ran at (param-log.ts). */
  loads: ParamLoad[];
}

export interface VerdictRecord {
  step: number;
  verifier: Member;
  trainer: Member;
  /** Whether the verified result was fabricated (false for honest peers' results). */
  fabricated: boolean;
  pass: boolean;
  fingerprintAgreement: number;
  updateAgreement: number;
  /** Sequences the verified result was trained on (null when its trainer reported none). */
  rows: number | null;
  /** The verifier's gradient was computed at exactly the trainer's parameters (null: unknown). */
  sameParams: boolean | null;
  /** The step of the trainer's previous result (null: its first). */
  previousStep: number | null;
}

/**
 * A verifier whose own verification is honest: every client but the other-batch cheater, whose shifted data
 * source feeds its verification too (its verdicts are reported apart).
 */
export function verifiesHonestly(m: Member): boolean {
  return m.role !== 'other-batch';
}

export function collectVerdicts(members: readonly Member[]): VerdictRecord[] {
  const byId = new Map(members.map((m) => [m.peer.id, m]));
  const out: VerdictRecord[] = [];
  for (const verifier of members)
    for (const [index, e] of verifier.peer.events.entries()) {
      if (e.type !== 'verified') continue;
      const trainer = byId.get(e.trainer);
      if (!trainer) continue;
      const fabricated =
        trainer.role !== 'honest' && trainer.sent.some((s) => s.step === e.step && s.fabricated);
      const at = trainer.peer.events.findIndex((x) => x.type === 'trained' && x.step === e.step);
      const trained = trainer.peer.events[at];
      const rows = trained?.type === 'trained' ? trained.batch.end - trained.batch.start + 1 : null;
      const trainedAt = at >= 0 ? paramsBefore(trainer.loads, at) : null;
      const verifiedAt = paramsBefore(verifier.loads, index);
      const before = trainer.peer.events
        .slice(0, Math.max(0, at))
        .flatMap((x) => (x.type === 'trained' ? [x.step] : []));
      out.push({
        step: e.step,
        verifier,
        trainer,
        fabricated,
        pass: e.pass,
        fingerprintAgreement: e.fingerprintAgreement,
        updateAgreement: e.updateAgreement,
        rows,
        sameParams: trainedAt === null || verifiedAt === null ? null : trainedAt === verifiedAt,
        previousStep: before.length ? (before[before.length - 1] as number) : null,
      });
    }
  return out;
}

export interface Range {
  min: number;
  mean: number;
  max: number;
}

function range(xs: number[]): Range | null {
  if (xs.length === 0) return null;
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (const x of xs) {
    min = Math.min(min, x);
    max = Math.max(max, x);
    sum += x;
  }
  return { min: round(min), mean: round(sum / xs.length), max: round(max) };
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

export interface AgreementSummary {
  verdicts: number;
  failed: number;
  /** failed / verdicts. */
  fail_rate: number | null;
  fingerprint_agreement: Range | null;
  update_agreement: Range | null;
  /** Sequences per verified result. */
  rows: Range | null;
  /** Verdicts whose verifier computed its gradient at other parameters than the trainer did. */
  other_parameters: number;
}

export function summarize(records: readonly VerdictRecord[]): AgreementSummary {
  const failed = records.filter((r) => !r.pass).length;
  return {
    verdicts: records.length,
    failed,
    fail_rate: records.length ? round(failed / records.length) : null,
    fingerprint_agreement: range(records.map((r) => r.fingerprintAgreement)),
    update_agreement: range(records.map((r) => r.updateAgreement)),
    rows: range(records.flatMap((r) => (r.rows === null ? [] : [r.rows]))),
    other_parameters: records.filter((r) => r.sameParams === false).length,
  };
}

/** The verified results in `records` (one per trainer and step), each with its verdicts. */
export function byResult(records: readonly VerdictRecord[]): VerdictRecord[][] {
  const groups = new Map<string, VerdictRecord[]>();
  for (const r of records) {
    const key = `${r.trainer.peer.id}:${r.step}`;
    const g = groups.get(key);
    if (g) g.push(r);
    else groups.set(key, [r]);
  }
  return [...groups.values()];
}

/** Agreement ranges per (verifier device, trainer device), e.g. "webgpu verifies cpu". */
export function byDevicePair(records: readonly VerdictRecord[]): Record<string, AgreementSummary> {
  const pairs = new Map<string, VerdictRecord[]>();
  for (const r of records) {
    const key = `${r.verifier.device} verifies ${r.trainer.device}`;
    pairs.set(key, [...(pairs.get(key) ?? []), r]);
  }
  return Object.fromEntries(
    [...pairs].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, summarize(v)]),
  );
}

/** Wilson score interval's lower end for `k` successes in `n` trials (z = 1.96: 95%, two-sided). */
export function wilsonLower(k: number, n: number, z = 1.96): number {
  if (n === 0) return 0;
  const p = k / n;
  const z2 = z * z;
  const centre = p + z2 / (2 * n);
  const spread = z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  return Math.max(0, (centre - spread) / (1 + z2 / n));
}

/**
 * What a sampled fabricated result does to its trainer (core's confirmation rule, coordinator/verification.ts):
 * with probability `conclusive` both verifiers fail it conclusively (confirmed at once), with probability
 * `strike` both fail it otherwise (CONFIRMING_STRIKES of them confirm).
 */
export interface SampledOutcome {
  conclusive: number;
  strike: number;
}

/**
 * The chance that a cheater whose every result is fabricated is ejected within `rounds` rounds it trains in:
 * each result is sampled with probability `percent`/100 (from the next round's seed, independently); it is
 * caught by one conclusive result or CONFIRMING_STRIKES strikes. Every verified result of such a cheater is
 * fabricated, so its strikes always fall within STRIKE_WINDOW verified results.
 */
export function caughtWithin(percent: number, q: SampledOutcome, rounds: number): number {
  const p = percent / 100;
  const a = p * q.conclusive;
  const b = p * q.strike;
  // P(no conclusive result and fewer than CONFIRMING_STRIKES strikes): a binomial sum, in logs for large R.
  let missed = 0;
  const none = Math.log1p(-Math.min(1, a + b));
  for (let j = 0; j < CONFIRMING_STRIKES && j <= rounds; j++) {
    if (j > 0 && b === 0) break;
    const rest = rounds - j === 0 ? 0 : (rounds - j) * none;
    missed += Math.exp(logChoose(rounds, j) + (j > 0 ? j * Math.log(b) : 0) + rest);
  }
  return Math.max(0, Math.min(1, 1 - missed));
}

function logChoose(n: number, k: number): number {
  let out = 0;
  for (let i = 0; i < k; i++) out += Math.log(n - i) - Math.log(i + 1);
  return out;
}

/** The least verification percentage at which `rounds` rounds of cheating are caught with probability ≥ `target`. */
export function percentFor(target: number, q: SampledOutcome, rounds: number): number | null {
  if (caughtWithin(100, q, rounds) < target) return null;
  let lo = 0;
  let hi = 100;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (caughtWithin(mid, q, rounds) >= target) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** Rounds of cheating after which the cheater is ejected with probability ≥ `target` (null: not within 10^6). */
export function roundsFor(target: number, percent: number, q: SampledOutcome): number | null {
  if ((percent / 100) * (q.conclusive + q.strike) <= 0) return null;
  let lo = 1;
  let hi = 1;
  while (caughtWithin(percent, q, hi) < target) {
    if (hi > 1e6) return null;
    lo = hi + 1;
    hi *= 2;
  }
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (caughtWithin(percent, q, mid) >= target) hi = mid;
    else lo = mid + 1;
  }
  return hi;
}

/** The `n` verdicts lowest in update agreement, with what they judged: where a threshold's margin is thinnest. */
export function lowest(records: readonly VerdictRecord[], n: number) {
  return [...records]
    .sort((a, b) => a.updateAgreement - b.updateAgreement)
    .slice(0, n)
    .map((r) => ({
      step: r.step,
      trainer: `${r.trainer.role} ${r.trainer.device} ${r.trainer.peer.id.slice(0, 8)}`,
      verifier: `${r.verifier.role} ${r.verifier.device} ${r.verifier.peer.id.slice(0, 8)}`,
      rows: r.rows,
      trainer_previous_step: r.previousStep,
      same_parameters: r.sameParams,
      pass: r.pass,
      fingerprint_agreement: round(r.fingerprintAgreement),
      update_agreement: round(r.updateAgreement),
    }));
}

/**
 * Every step at which a verifier failed an honest result, with the round's context: how many honest results
 * were judged there and how many every verifier failed, the epoch, the epoch's first trained step, and how many
 * clients trained that step (honest and not) with their mean loss — what tells a round on which all honest
 * results score low (a property of the shared parameters) from one trainer's bad luck.
 */
export function failedRounds(records: readonly VerdictRecord[], members: readonly Member[]) {
  const trained = members.flatMap((m) =>
    m.peer.events.flatMap((e) =>
      e.type === 'trained' ? [{ m, step: e.step, epoch: e.epoch, loss: e.loss }] : [],
    ),
  );
  const firstOfEpoch = new Map<number, number>();
  for (const t of trained) firstOfEpoch.set(t.epoch, Math.min(firstOfEpoch.get(t.epoch) ?? t.step, t.step));
  const steps = [...new Set(records.filter((r) => !r.pass).map((r) => r.step))].sort((a, b) => a - b);
  return steps.map((step) => {
    const results = byResult(records.filter((r) => r.step === step));
    const here = trained.filter((t) => t.step === step);
    const honest = here.filter((t) => t.m.role === 'honest');
    const epoch = here[0]?.epoch ?? null;
    return {
      ...eventsBefore(honest[0]?.m ?? null, step),
      step,
      epoch,
      epoch_first_step: epoch === null ? null : (firstOfEpoch.get(epoch) ?? null),
      honest_results_judged: results.length,
      failed_by_all: results.filter((g) => g.every((r) => !r.pass)).length,
      update_agreements: results.map((g) => round(Math.min(...g.map((r) => r.updateAgreement)))),
      trainers: here.length,
      honest_trainers: honest.length,
      honest_mean_loss: honest.length ? round(honest.reduce((a, t) => a + t.loss, 0) / honest.length) : null,
    };
  });
}

/**
 * What `m` saw between its previous train step and the one of `step`: the rounds it applied (results each,
 * batches skipped), replays without a confirmed cheater's results, and models installed.
 */
function eventsBefore(m: Member | null, step: number) {
  if (!m) return {};
  const ev = m.peer.events;
  const at = ev.findIndex((e) => e.type === 'trained' && e.step === step);
  let from = at - 1;
  while (from >= 0 && ev[from]?.type !== 'trained') from--;
  const between = ev.slice(from + 1, Math.max(0, at));
  return {
    seen_by: m.peer.id.slice(0, 8),
    applied_before: between.flatMap((e) =>
      e.type === 'applied' ? [{ step: e.step, results: e.results, skipped: e.skipped }] : [],
    ),
    replayed_before: between.flatMap((e) =>
      e.type === 'replayed' ? [{ height: e.height, rounds: e.rounds, excluded: e.excluded }] : [],
    ),
    models_before: between.flatMap((e) => (e.type === 'model' ? [{ source: e.source, step: e.step }] : [])),
  };
}
