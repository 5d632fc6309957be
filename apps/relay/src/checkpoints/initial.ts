// The initial checkpoint of a fresh run: packages/model's deterministic init from the run's preset (+
// `[meshtrain.model]` overrides) and `meshtrain.seed`, stored like any other checkpoint so a joiner can
// download the exact start weights (and check them against their hash) instead of trusting its own init.
import { modelConfigForRun, RunModelError } from '@meshtrain/model';
import type { RunConfig } from '@meshtrain/core';
import { runCheckpointJob } from './off-thread.ts';
import type { CheckpointMeta, CheckpointStore } from './store.ts';

/** Step of a fresh coordinator (core's create.ts starts `progress.step` at 1, Psyche's 1-based rounds). */
export const INITIAL_STEP = 1;

/**
 * Ensures a run whose model starts fresh (`checkpoint = "Ephemeral"` or `Dummy`) has its seeded initial
 * checkpoint in the store, at `INITIAL_STEP`, epoch 0. Call it at run creation; it is a no-op (returning
 * the newest stored checkpoint) when the run already has one, e.g. after a relay restart. Runs that start
 * from a Hub/GCS checkpoint are refused: the relay cannot fetch those, and silently training from random
 * weights instead would be worse. The weights are drawn and encoded in a worker thread: for a large model that
 * is seconds of work the event loop must not wait through.
 */
export async function ensureInitialCheckpoint(
  store: CheckpointStore,
  runId: string,
  run: RunConfig,
): Promise<CheckpointMeta> {
  const existing = await store.latest(runId);
  if (existing !== undefined) return existing;
  const source = run.model.LLM.checkpoint;
  if (source !== 'Ephemeral' && !(typeof source === 'object' && 'Dummy' in source))
    throw new RunModelError(
      `checkpoint ${JSON.stringify(source)}: the relay can only start runs from fresh weights ("Ephemeral")`,
    );
  const config = modelConfigForRun(run);
  const encoded = await runCheckpointJob({ kind: 'init', config, seed: run.meshtrain.seed });
  const { meta } = await store.saveEncoded({
    runId,
    step: INITIAL_STEP,
    epoch: 0,
    source: 'init',
    ...encoded,
  });
  return meta;
}
