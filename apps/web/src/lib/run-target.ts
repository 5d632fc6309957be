// What the training worker needs to know about a run, read from the relay's parsed config.
import type { RunDetail } from './api.ts';
import type { RunTarget } from '../worker/protocol.ts';

interface ParsedShape {
  model?: { LLM?: { max_seq_len?: unknown } };
  meshtrain?: { preset?: unknown; micro_batch_size?: unknown };
}

export function runTargetOf(detail: RunDetail, relayUrl: string): RunTarget {
  const p = (detail.config.parsed ?? {}) as ParsedShape;
  const seqLen = p.model?.LLM?.max_seq_len;
  const mbs = p.meshtrain?.micro_batch_size;
  const preset = p.meshtrain?.preset;
  return {
    runId: detail.run.run_id,
    relayUrl,
    preset: typeof preset === 'string' ? preset : null,
    seqLen: typeof seqLen === 'number' ? seqLen : 128,
    microBatchSize: typeof mbs === 'number' ? mbs : 1,
  };
}

export function seqLenOf(detail: RunDetail): number {
  const v = (detail.config.parsed as ParsedShape | null)?.model?.LLM?.max_seq_len;
  return typeof v === 'number' ? v : 0;
}
