// The figures witnesses measure and report with their attestations (tokens/s, bandwidth; run-host's
// recordWitnessMetadata stores them as metric samples labelled with step and client), gathered for the run
// detail: the means per step and each client's newest report. Pure: samples in, rows out.
import type { StepReports, WitnessReport } from '@meshtrain/client/relay-api';

/** Metric samples as the store returns them, newest first. */
export interface MetricSample {
  at: number;
  value: number;
  labels: unknown;
}

/**
 * Samples of each figure a run detail reads: with 32 witnesses a round (core's default max_witnesses), the last
 * 60-odd rounds; clients without a report among them show none (the table is bounded per run anyway).
 */
export const REPORT_SAMPLES = 2000;

function labelsOf(labels: unknown): { step: number; client: string } | null {
  const l = labels as { step?: unknown; client?: unknown } | null;
  if (typeof l?.step !== 'string' || typeof l.client !== 'string' || !/^\d{1,15}$/.test(l.step)) return null;
  return { step: Number(l.step), client: l.client };
}

/**
 * Joins the two figures by (step, client) — a witness reports both at once — and returns the per-step means,
 * newest step first, and each client's report of its newest step.
 */
export function witnessReports(
  tokensPerSec: readonly MetricSample[],
  bandwidth: readonly MetricSample[],
): { steps: StepReports[]; latest: Map<string, WitnessReport> } {
  const bw = new Map<string, number>();
  for (const s of bandwidth) {
    const k = labelsOf(s.labels);
    const key = k && `${k.step} ${k.client}`;
    if (key && !bw.has(key)) bw.set(key, s.value);
  }
  const seen = new Set<string>();
  const perStep = new Map<number, { reports: number; tokens: number; bandwidth: number }>();
  const latest = new Map<string, WitnessReport>();
  for (const s of tokensPerSec) {
    const k = labelsOf(s.labels);
    if (!k) continue;
    const key = `${k.step} ${k.client}`;
    const b = bw.get(key);
    if (b === undefined || seen.has(key)) continue;
    seen.add(key);
    const sum = perStep.get(k.step) ?? { reports: 0, tokens: 0, bandwidth: 0 };
    sum.reports++;
    sum.tokens += s.value;
    sum.bandwidth += b;
    perStep.set(k.step, sum);
    const prev = latest.get(k.client);
    if (!prev || prev.step < k.step)
      latest.set(k.client, { step: k.step, tokens_per_sec: s.value, bandwidth: b });
  }
  const steps = [...perStep]
    .sort((a, b) => b[0] - a[0])
    .map(([step, s]) => ({
      step,
      reports: s.reports,
      tokens_per_sec: s.tokens / s.reports,
      bandwidth: s.bandwidth / s.reports,
    }));
  return { steps, latest };
}
