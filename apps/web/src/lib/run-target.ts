// What the training worker needs to know about a run, read from the relay's parse of its config (the relay
// serves this page, so its reply is as trusted as the page's own code).
import type { RunDetail } from './api.ts';
import type { RunTarget } from '../worker/protocol.ts';

export function runTargetOf(detail: RunDetail, relayUrl: string): RunTarget {
  const p = detail.config.parsed;
  return {
    runId: detail.run.run_id,
    relayUrl,
    preset: p?.meshtrain.preset ?? null,
    seqLen: p?.model.LLM.max_seq_len ?? 128,
    microBatchSize: p?.meshtrain.micro_batch_size ?? 1,
  };
}

export function seqLenOf(detail: RunDetail): number {
  return detail.config.parsed?.model.LLM.max_seq_len ?? 0;
}
