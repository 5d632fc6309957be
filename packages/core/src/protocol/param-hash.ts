// Parameter-hash agreement at an epoch's end, and what it allows: the run's advertised hash, who must re-sync,
// which checkpoint the host may store and who uploads it.
//
// Every Healthy client of an epoch applies the same accepted results with exact arithmetic, so at Cooldown
// they all hold bit-identical parameters and report the same SHA-256. A hash counts only when:
//  - the coordinator actually reached that epoch's end: reports are taken while the run is in that epoch's
//    Cooldown (the host records `epochEndOf(state)` then), for exactly its epoch number and step;
//  - it comes from a voter: a client that was Healthy in the epoch at its end (one vote each);
//  - more than half of the voters reported it. One reporter, or any minority of the epoch's clients, can
//    never choose the run's hash, and neither can anyone outside the epoch.
// The host stores a checkpoint only for an epoch end with an agreed hash, and only with that hash.
import type { CoordinatorState } from '../state/coordinator-state.ts';
import type { ParamHash } from '../wire/param-hash.ts';
import { ProtocolRefusal } from './refusal.ts';

/** One epoch's end as the coordinator reached it: its number, the step the next epoch starts at, its voters. */
export interface EpochEnd {
  epoch: number;
  step: number;
  /** Ids of the epoch's clients that were Healthy at its end, in epoch order (the upload order). */
  voters: string[];
}

/** The epoch end the run is at (in Cooldown), or null. */
export function epochEndOf(state: CoordinatorState): EpochEnd | null {
  if (state.run_state !== 'Cooldown') return null;
  return {
    epoch: state.progress.epoch,
    step: state.progress.step,
    voters: state.epoch.clients.filter((c) => c.state === 'Healthy').map((c) => c.id),
  };
}

/** Whether `sender`'s ParamHash may be recorded for `end` (the host's latest recorded epoch end). */
export function admitParamHash(
  runId: string,
  end: EpochEnd | null,
  sender: string,
  p: ParamHash,
): ProtocolRefusal | null {
  if (p.runId !== runId)
    return new ProtocolRefusal('wrong_run', `the message names run '${p.runId}', this is '${runId}'`);
  if (!end || p.epoch !== end.epoch || p.step !== end.step)
    return new ProtocolRefusal(
      'stale',
      end
        ? `parameter hashes are taken for epoch ${end.epoch} at step ${end.step}, not epoch ${p.epoch} step ${p.step}`
        : 'no epoch has ended yet',
      false,
    );
  if (!end.voters.includes(sender))
    return new ProtocolRefusal(
      'not_a_client',
      `only clients Healthy at the end of epoch ${end.epoch} vote on its hash`,
    );
  return null;
}

export interface ParamHashVerdict {
  /** The hash (hex) more than half of the voters reported, or null while there is none. */
  agreed: string | null;
  /** Voters whose report differs from the agreed hash: their replicas diverged, they must re-sync. */
  mismatched: string[];
  /** Reports counted (voters only, one each). */
  reports: number;
  /** Agreeing reports an agreed hash needs: a strict majority of the voters. */
  needed: number;
}

export function paramHashVerdict(
  end: EpochEnd,
  reports: ReadonlyArray<{ client: string; hash: string }>,
): ParamHashVerdict {
  const voters = new Set(end.voters);
  const byClient = new Map<string, string>();
  for (const r of reports) if (voters.has(r.client)) byClient.set(r.client, r.hash);
  const needed = Math.floor(end.voters.length / 2) + 1;
  const counts = new Map<string, number>();
  for (const h of byClient.values()) counts.set(h, (counts.get(h) ?? 0) + 1);
  let agreed: string | null = null;
  for (const [h, n] of counts) if (n >= needed) agreed = h;
  const mismatched = agreed === null ? [] : [...byClient].filter(([, h]) => h !== agreed).map(([c]) => c);
  return { agreed, mismatched, reports: byClient.size, needed };
}

/** The refusal a voter gets when its hash (hex) is not the agreed one: its replica diverged. */
export function paramHashMismatch(
  epoch: number,
  verdict: ParamHashVerdict,
  hash: string,
): ProtocolRefusal | null {
  if (verdict.agreed === null || verdict.agreed === hash) return null;
  return new ProtocolRefusal(
    'param_hash_mismatch',
    `your parameters differ from the agreed hash of epoch ${epoch} (${verdict.agreed.slice(0, 16)}…); re-sync from the checkpoint or peers`,
    false,
  );
}

/** An epoch end with its agreed hash: what the host may store a checkpoint for. */
export interface AgreedEpoch {
  epoch: number;
  step: number;
  /** Hex. */
  hash: string;
}

/** Whether a checkpoint upload for (epoch, step) with `paramHash` (hex) matches an agreed epoch end. */
export function admitCheckpoint(
  agreed: readonly AgreedEpoch[],
  upload: { epoch: number; step: number; paramHash: string },
): ProtocolRefusal | null {
  const match = agreed.find((a) => a.epoch === upload.epoch && a.step === upload.step);
  if (!match)
    return new ProtocolRefusal(
      'stale',
      `no agreed parameter hash for epoch ${upload.epoch} at step ${upload.step}; checkpoints are taken only for epoch ends the run reached`,
    );
  if (match.hash !== upload.paramHash)
    return new ProtocolRefusal(
      'bad_result',
      `these parameters hash to ${upload.paramHash.slice(0, 16)}…, the epoch's agreed hash is ${match.hash.slice(0, 16)}…`,
    );
  return null;
}

/**
 * Where `id` stands in the epoch end's upload order: 0 uploads at once, rank r only if the checkpoint is still
 * missing after r waits (so a designated uploader that vanishes does not leave joiners without parameters).
 * −1 for non-voters, who never upload.
 */
export function checkpointUploaderRank(end: EpochEnd, id: string): number {
  return end.voters.indexOf(id);
}
