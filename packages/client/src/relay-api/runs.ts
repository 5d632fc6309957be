// The relay's run routes, typed: the run list, one run in detail (and its config parsed by core), and the
// checkpoint summary of a step.
import { parseRunConfig, type RunConfig } from '@meshtrain/core';
import { RelayApiError } from './errors.ts';
import { get, getJson, jsonOf, runPath, type RequestOptions } from './request.ts';
import { CheckpointSummarySchema, RunDetailSchema, RunListSchema } from './schemas.ts';
import type { CheckpointSummary, RunDetail, RunList } from './types.ts';

/** GET /api/runs. */
export function fetchRunList(relayUrl: string, o: RequestOptions = {}): Promise<RunList> {
  return getJson(relayUrl, '/api/runs', RunListSchema, o);
}

export interface RunInfoOptions extends RequestOptions {
  /** Ask for the full coordinator state too (`?state=1`): the detail's `state`. */
  withState?: boolean;
}

/**
 * GET /api/runs/:id. Throws RelayApiError: `unknown_run` (404) for a run the relay does not have,
 * `unreachable`, or `bad_response` for a reply that is not a run's detail.
 */
export function fetchRunInfo(relayUrl: string, runId: string, o: RunInfoOptions = {}): Promise<RunDetail> {
  const path = `${runPath(runId)}${o.withState ? '?state=1' : ''}`;
  return getJson(relayUrl, path, RunDetailSchema, o.signal ? { signal: o.signal } : {});
}

/** A run's detail and its config as core parses it: what a trainer needs before it joins. */
export async function fetchRunConfig(
  relayUrl: string,
  runId: string,
  o: RequestOptions = {},
): Promise<{ detail: RunDetail; config: RunConfig }> {
  const detail = await fetchRunInfo(relayUrl, runId, o);
  try {
    return { detail, config: parseRunConfig(detail.config.toml).config };
  } catch (e) {
    throw new RelayApiError(
      {
        status: 200,
        code: 'bad_response',
        message: `the config of run '${runId}' does not parse here: ${(e as Error).message}`,
        body: detail.config.toml,
        request: `GET ${runPath(runId)}`,
      },
      { cause: e },
    );
  }
}

/**
 * GET /api/runs/:id/checkpoint (the newest) or `?step=S`: null when the relay has none for it (404); throws
 * RelayApiError on other failures.
 */
export async function fetchCheckpointSummary(
  relayUrl: string,
  runId: string,
  step?: number,
  o: RequestOptions = {},
): Promise<CheckpointSummary | null> {
  const path = `${runPath(runId)}/checkpoint${step === undefined ? '' : `?step=${step}`}`;
  const res = await get(relayUrl, path, o);
  if (res.status === 404) {
    await res.body?.cancel();
    return null;
  }
  return jsonOf(res, path, CheckpointSummarySchema);
}
