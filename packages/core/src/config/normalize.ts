// From the validated TOML document to a RunConfig: converts the older rounds_per_epoch, fills the keys Psyche's
// own documented example omits, and our limits. Every conversion or Psyche default is returned as a note so the
// user sees what the file was taken to mean.
//
// The document may hold unknown values (keys that failed the schema, see unknown.ts); a value derived from one
// is unknown too, and so is a value this step rejects, so the cross-key rules can still run on the rest.
import { DEFAULT_LIMITS } from '../state/coordinator-config.ts';
import type { ConfigIssue } from './errors.ts';
import type { RunConfigDocument } from './schema.ts';
import { withSparseLoCoDefaults } from './sparseloco.ts';
import type { ConfigNote, DataLocation, Optimizer, RunConfig } from './types.ts';
import { knownOr, unknownValue } from './unknown.ts';

/** Psyche's documented values for keys its book example leaves out (docs/protocol.md "Run configuration"). */
export const PSYCHE_DEFAULTS = { waiting_for_members_extra_time: 3, cold_start_warmup_steps: 0 } as const;
export const DEFAULT_MICRO_BATCH_SIZE = 1;
export const DEFAULT_SEED = 0;

export interface Normalized {
  /** Complete only when `issues` is empty (and the document had no unknown values): see unknown.ts. */
  run: RunConfig;
  notes: ConfigNote[];
  issues: ConfigIssue[];
}

function epochTimeOf(c: RunConfigDocument['config'], notes: ConfigNote[], issues: ConfigIssue[]): number {
  if (c.epoch_time !== undefined && c.rounds_per_epoch !== undefined) {
    issues.push({
      path: 'config.rounds_per_epoch',
      message: 'give either config.epoch_time or the older config.rounds_per_epoch, not both',
    });
    return unknownValue();
  }
  if (c.epoch_time !== undefined) return c.epoch_time;
  if (c.rounds_per_epoch === undefined) {
    issues.push({
      path: 'config.epoch_time',
      message: 'required key is missing (or give the older rounds_per_epoch)',
    });
    return unknownValue();
  }
  const rounds = c.rounds_per_epoch;
  // Psyche replaced the round count by a wall-clock epoch length (docs/protocol.md "Run configuration"). A
  // round lasts at most max_round_train_time + round_witness_time, so this epoch_time fits at least the
  // configured rounds; rounds that end early through opportunistic witnessing make the epoch hold more of them.
  return knownOr(() => {
    const roundTime = c.max_round_train_time + c.round_witness_time;
    const epochTime = rounds * roundTime;
    notes.push({
      path: 'config.rounds_per_epoch',
      reason:
        `converted to epoch_time = ${rounds} × (max_round_train_time ${c.max_round_train_time} + ` +
        `round_witness_time ${c.round_witness_time}) = ${epochTime} s; rounds that finish early fit more per epoch`,
    });
    return epochTime;
  });
}

function dataLocationOf(
  d: RunConfigDocument['model']['LLM']['data_location'],
  notes: ConfigNote[],
): DataLocation {
  if (typeof d === 'object' && 'Relay' in d) {
    const relay = d.Relay;
    if (relay.token_size_in_bytes === undefined)
      notes.push({
        path: 'model.LLM.data_location.Relay.token_size_in_bytes',
        reason: 'not set; using TwoBytes',
      });
    if (relay.shuffle === undefined)
      notes.push({
        path: 'model.LLM.data_location.Relay.shuffle',
        reason: 'not set; using DontShuffle (the training split in corpus order)',
      });
    return {
      Relay: {
        dataset: relay.dataset,
        token_size_in_bytes: relay.token_size_in_bytes ?? 'TwoBytes',
        shuffle: relay.shuffle ?? 'DontShuffle',
      },
    };
  }
  return d;
}

/** The optimizer table, SparseLoCo's omitted keys filled in (one note names them). */
function optimizerOf(
  o: Exclude<RunConfigDocument['model']['LLM']['optimizer'], 'Dummy'>,
  notes: ConfigNote[],
): Optimizer {
  return knownOr(() => {
    if (!('SparseLoCo' in o)) return o as Optimizer;
    const { optimizer, defaulted } = withSparseLoCoDefaults(o.SparseLoCo);
    if (defaulted.length > 0)
      notes.push({
        path: 'model.LLM.optimizer.SparseLoCo',
        reason: `not set, so meshtrain's defaults: ${defaulted.map((k) => `${k} = ${JSON.stringify(optimizer[k])}`).join(', ')}`,
      });
    return { SparseLoCo: optimizer };
  });
}

export function normalize(doc: RunConfigDocument): Normalized {
  const notes: ConfigNote[] = [];
  const issues: ConfigIssue[] = [];
  const c = doc.config;
  const llm = doc.model.LLM;

  const epoch_time = epochTimeOf(c, notes, issues);
  if (c.waiting_for_members_extra_time === undefined)
    notes.push({
      path: 'config.waiting_for_members_extra_time',
      reason: `not set; using Psyche's ${PSYCHE_DEFAULTS.waiting_for_members_extra_time} s`,
    });
  if (llm.cold_start_warmup_steps === undefined)
    notes.push({
      path: 'model.LLM.cold_start_warmup_steps',
      reason: 'not set; using 0 (no cold-start ramp)',
    });
  if (doc.meshtrain?.seed === undefined)
    notes.push({ path: 'meshtrain.seed', reason: `not set; using ${DEFAULT_SEED}` });
  if (llm.optimizer === 'Dummy')
    issues.push({
      path: 'model.LLM.optimizer',
      message:
        '"Dummy" cannot train (Psyche\'s Model::check rejects it too); use [model.LLM.optimizer.Distro] or [model.LLM.optimizer.SparseLoCo]',
    });
  const optimizer = llm.optimizer === 'Dummy' ? unknownValue<Optimizer>() : optimizerOf(llm.optimizer, notes);

  const run: RunConfig = {
    ...(doc.run_id === undefined ? {} : { run_id: doc.run_id }),
    config: {
      warmup_time: c.warmup_time,
      cooldown_time: c.cooldown_time,
      epoch_time,
      max_round_train_time: c.max_round_train_time,
      round_witness_time: c.round_witness_time,
      min_clients: c.min_clients,
      init_min_clients: c.init_min_clients,
      verification_percent: c.verification_percent,
      witness_nodes: c.witness_nodes,
      global_batch_size_start: c.global_batch_size_start,
      global_batch_size_end: c.global_batch_size_end,
      global_batch_size_warmup_tokens: c.global_batch_size_warmup_tokens,
      total_steps: c.total_steps,
      waiting_for_members_extra_time:
        c.waiting_for_members_extra_time ?? PSYCHE_DEFAULTS.waiting_for_members_extra_time,
      max_clients: c.max_clients ?? DEFAULT_LIMITS.max_clients,
      max_witnesses: c.max_witnesses ?? DEFAULT_LIMITS.max_witnesses,
      ...(c.trusted_verifiers === undefined ? {} : { trusted_verifiers: c.trusted_verifiers }),
    },
    model: {
      LLM: {
        architecture: llm.architecture,
        data_type: llm.data_type,
        max_seq_len: llm.max_seq_len,
        cold_start_warmup_steps: llm.cold_start_warmup_steps ?? PSYCHE_DEFAULTS.cold_start_warmup_steps,
        checkpoint: llm.checkpoint,
        data_location: knownOr(() => dataLocationOf(llm.data_location, notes)),
        lr_schedule: llm.lr_schedule,
        optimizer,
      },
    },
    meshtrain: {
      ...(doc.meshtrain?.preset === undefined ? {} : { preset: doc.meshtrain.preset }),
      seed: doc.meshtrain?.seed ?? DEFAULT_SEED,
      micro_batch_size: doc.meshtrain?.micro_batch_size ?? DEFAULT_MICRO_BATCH_SIZE,
      ...(doc.meshtrain?.model === undefined ? {} : { model: doc.meshtrain.model }),
    },
  };
  return { run, notes, issues };
}
