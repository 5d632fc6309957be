// What bench:integrity makes of the verifiers' reports: every `verified` event of every client, labelled with
// who trained the result (honest peer or which cheater), whether that result was fabricated, and on which
// device each side ran; then detection and false-positive rates, agreement ranges per device pair, and the
// chance that sampling catches a cheater within a run.
import type { NetPeer } from './in-process-network.ts';
import type { FabricatedKind } from './integrity-config.ts';
import type { SentResult } from './integrity-cheaters.ts';
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
 * The chance that a cheater whose every result is fabricated is ejected within `rounds` rounds it trains in:
 * each result is sampled with probability `percent`/100 (from the next round's seed, independently), and a
 * sampled fabricated result ejects it when both verifiers fail it (probability `bothFail`).
 */
export function caughtWithin(percent: number, bothFail: number, rounds: number): number {
  const perRound = (percent / 100) * bothFail;
  return 1 - Math.pow(1 - perRound, rounds);
}

/** The least verification percentage at which `rounds` rounds of cheating are caught with probability ≥ `target`. */
export function percentFor(target: number, bothFail: number, rounds: number): number | null {
  if (bothFail <= 0) return null;
  return Math.min(100, (100 * (1 - Math.pow(1 - target, 1 / rounds))) / bothFail);
}

/** Rounds of cheating after which the cheater is ejected with probability ≥ `target` (null: never). */
export function roundsFor(target: number, percent: number, bothFail: number): number | null {
  const perRound = (percent / 100) * bothFail;
  if (perRound <= 0) return null;
  if (perRound >= 1) return 1;
  return Math.ceil(Math.log(1 - target) / Math.log(1 - perRound));
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
