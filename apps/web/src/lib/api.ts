// The relay's public HTTP API as the pages use it: @meshtrain/client/relay-api's typed requests (the relay's
// route handlers are typed against the same shapes), against the page's own origin, where the relay serves
// this app.
import { fetchCheckpointSummary, fetchRunInfo, fetchRunList } from '@meshtrain/client/relay-api';
import type { CheckpointSummary, RunDetail, RunSummary } from '@meshtrain/client/relay-api';

export type {
  ClientRow,
  CheckpointSummary,
  DelegatesRequest,
  GrantRequest,
  GrantRow,
  ParamHashReport,
  RoundRow,
  RunDetail,
  RunSummary,
  StepReports,
  WitnessReport,
} from '@meshtrain/client/relay-api';
export { RelayApiError } from '@meshtrain/client/relay-api';

/** '' addresses the page's origin. */
const SAME_ORIGIN = '';

export const listRuns = (signal?: AbortSignal): Promise<RunSummary[]> =>
  fetchRunList(SAME_ORIGIN, { signal }).then((r) => r.runs);

export const getRun = (runId: string, signal?: AbortSignal): Promise<RunDetail> =>
  fetchRunInfo(SAME_ORIGIN, runId, { signal });

/** The newest checkpoint, or null when the run has none yet. */
export const getCheckpoint = (runId: string, signal?: AbortSignal): Promise<CheckpointSummary | null> =>
  fetchCheckpointSummary(SAME_ORIGIN, runId, undefined, { signal });

/** GET /metrics as text (Prometheus exposition format). */
export async function getMetricsText(signal?: AbortSignal): Promise<string> {
  const res = await fetch('/metrics', signal ? { signal } : {});
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}

/** Prometheus samples: metric name → [{labels, value}]. Enough for counters and gauges. */
export function parsePrometheus(
  text: string,
): Map<string, { labels: Record<string, string>; value: number }[]> {
  const out = new Map<string, { labels: Record<string, string>; value: number }[]>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m?.[1] || m[4] === undefined) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      if (l[1] !== undefined) labels[l[1]] = l[2] ?? '';
    const list = out.get(m[1]) ?? [];
    list.push({ labels, value: Number(m[4]) });
    out.set(m[1], list);
  }
  return out;
}
