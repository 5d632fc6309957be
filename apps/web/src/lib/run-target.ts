// What the training worker needs to know about a run, read from the relay's parse of its config (the relay
// serves this page, so its reply is as trusted as the page's own code).
import type { RunDetail } from './api.ts';
import type { RunTarget } from '../worker/protocol.ts';

export function runTargetOf(detail: RunDetail, relayUrl: string): RunTarget {
  const p = detail.config.parsed;
  const runId = detail.run.run_id;
  // A config the relay could not parse names no preset: the device probe then runs one sequence per pass
  // and reads neither length, and the worker takes the model from the coordinator's state.
  if (!p) return { runId, relayUrl, preset: null, seqLen: 0, microBatchSize: 1 };
  return {
    runId,
    relayUrl,
    preset: p.meshtrain.preset ?? null,
    seqLen: p.model.LLM.max_seq_len,
    microBatchSize: p.meshtrain.micro_batch_size ?? 1,
  };
}

export function seqLenOf(detail: RunDetail): number {
  return detail.config.parsed?.model.LLM.max_seq_len ?? 0;
}
