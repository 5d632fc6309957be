// The relay's public HTTP API (apps/relay/PROTOCOL.md), typed as far as the pages use it.

export interface RoundSummary {
  height: number;
  step: number;
  witnesses: number;
  witness_count: number;
}

export interface RunSummary {
  run_id: string;
  run_state: string;
  run_state_index: number;
  pending_pause: boolean;
  epoch: number;
  step: number;
  total_steps: number;
  round: RoundSummary | null;
  members: number;
  epoch_clients: number;
  healthy_clients: number;
  connected: number;
  permissioned: boolean;
  main_authority: string;
  join_authority: string;
  created_at: number;
  seq: number;
  param_hash: { epoch: number; hash: string } | null;
}

export interface ClientInfo {
  id: string;
  device_kind: string;
  p2p_id: string;
  first_seen: number;
  last_seen: number;
  points: number;
  connected: boolean;
  member: boolean;
  epoch_state: string | null;
}

export interface RoundRecord {
  step: number;
  epoch: number;
  height: number;
  random_seed: string;
  data_index: number;
  batch_size: number;
  training: boolean;
  clients: number;
  /** Unix seconds (the coordinator's clock), unlike the other timestamps (ms). */
  started_at: number;
  ended_at: number | null;
  witnesses: number | null;
  quorum: number | null;
  quorum_reached: boolean | null;
  accepted: unknown;
  loss: number | null;
}

export interface GrantInfo {
  grantee: string;
  grantor: string;
  active: boolean;
  delegates: string[];
  updated_at: number;
}

export interface ParamHashEpoch {
  epoch: number;
  majority: string | null;
  reports: number;
  mismatched: string[];
}

export interface RunDetail {
  run: RunSummary;
  config: { toml: string; parsed: unknown };
  clients: ClientInfo[];
  rounds: RoundRecord[];
  grants: GrantInfo[];
  param_hashes: ParamHashEpoch[];
  transitions: { seq: number; at: number; event: unknown; effects: unknown }[];
}

export interface CheckpointInfo {
  step: number;
  epoch: number;
  paramHash: string | null;
  files: Record<string, string>;
}

/** A relay reply that was not 2xx, with the relay's `{error: {code, message}}` when it sent one. */
export class RelayHttpError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: unknown;
  constructor(status: number, code: string, message: string, body: unknown) {
    super(`${status} ${code}: ${message}`);
    this.name = 'RelayHttpError';
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** Reads a reply body as JSON when it is JSON, else as text. */
export async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export function errorOf(status: number, body: unknown): RelayHttpError {
  const e = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const code = typeof e?.code === 'string' ? e.code : 'http_error';
  const message =
    typeof e?.message === 'string'
      ? e.message
      : typeof body === 'string'
        ? body.slice(0, 300)
        : 'request failed';
  return new RelayHttpError(status, code, message, body);
}

export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, { headers: { accept: 'application/json' }, ...(signal ? { signal } : {}) });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new Error(`cannot reach the relay (${path}): ${(e as Error).message}`, { cause: e });
  }
  const body = await readBody(res);
  if (!res.ok) throw errorOf(res.status, body);
  return body as T;
}

export const listRuns = (signal?: AbortSignal) =>
  getJson<{ runs: RunSummary[] }>('/api/runs', signal).then((r) => r.runs);

export const getRun = (runId: string, signal?: AbortSignal) =>
  getJson<RunDetail>(`/api/runs/${encodeURIComponent(runId)}`, signal);

export const getCheckpoint = (runId: string, signal?: AbortSignal) =>
  getJson<CheckpointInfo>(`/api/runs/${encodeURIComponent(runId)}/checkpoint`, signal);

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
