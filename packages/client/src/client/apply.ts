// The apply step (docs/protocol.md "The two-round apply lag"): for each round, core's acceptedCommitments
// names the result of every batch that a quorum of the next round's witnesses saw; those results, fetched and
// checked, are applied in batch-id order with packages/distro's exact integer aggregate + apply (DisTrO) or
// exact outer step (SparseLoCo, sparseloco-apply.ts), so every replica stays bit-identical. A round that
// cannot be judged or an accepted result that cannot be had means this replica would diverge: ResyncNeeded,
// never a silent skip.
import {
  acceptedCommitments,
  bytesToHex,
  excludedClients,
  replayExclusions,
  roundAtHeight,
  speculativeCommitments,
  verificationActive,
  type AcceptedCommitment,
  type CoordinatorState,
  type DistroResult,
  type Round,
} from '@meshtrain/core';
import { applyResults } from '@meshtrain/distro';
import { fromWire } from '../convert.ts';
import { learningRateAt, type AppliedRound, type ClientContext, type EpochProgress } from './context.ts';
import { ResyncNeeded } from './errors.ts';
import { applySparseLoCo } from './sparseloco-apply.ts';

/** Applies rounds `epoch.appliedThrough`+1 .. `height`, each with the lr of the round `applying` them. */
export async function applyThrough(
  ctx: ClientContext,
  epoch: EpochProgress,
  s: CoordinatorState,
  height: number,
  applying: Round,
): Promise<void> {
  const verifying = verificationActive(s);
  for (let h = epoch.appliedThrough + 1; h <= height; h++) {
    const exclusions = replayExclusions(s, h);
    if (exclusions) await replayWithout(ctx, epoch, exclusions, h);
    const got = await acceptedResults(ctx, s, h);
    await applyRound(ctx, epoch, h, learningRateAt(ctx.schedule, applying.step, s), got, verifying);
  }
}

/** Applies one round's fetched results, records it (and logs it when `log`), and says so. */
async function applyRound(
  ctx: ClientContext,
  epoch: EpochProgress,
  height: number,
  lr: number,
  { step, results, skipped }: { step: number; results: AppliedRound['results']; skipped: number },
  log: boolean,
): Promise<void> {
  apply(
    ctx,
    results.map((r) => r.tensors),
    lr,
  );
  await ctx.o.distro.finish();
  epoch.appliedThrough = height;
  if (log) epoch.applied.push({ height, lr, results });
  ctx.stats.resultsApplied += results.length;
  ctx.emit({ type: 'applied', step, height, results: results.length, skipped });
}

/** SparseLoCo runs apply each round's admitted results as soon as it ends (lag 0); DisTrO runs keep lag 2. */
export function appliesAtOnce(ctx: ClientContext): boolean {
  return ctx.optimizer.kind === 'sparseloco';
}

/**
 * Lag 0 (SparseLoCo; docs/protocol.md "Speculative apply (SparseLoCo)"). Rounds through `finalThrough` have
 * a final accepted set by now: each applied one is compared with it (and every earlier one with the cheats
 * confirmed since), and if anything applied is no longer accepted the replica rebuilds from the epoch's start
 * with the final sets. Rounds after `finalThrough` through `specThrough` are applied at once with everything
 * the host admitted (core's speculativeCommitments), so the next round trains on them; rounds applied beyond
 * `specThrough` (Cooldown after an early end: they are retrained next epoch) are removed. Every input was
 * frozen when its round ended, so replicas stay bit-identical after every call.
 */
export async function settleThrough(
  ctx: ClientContext,
  epoch: EpochProgress,
  s: CoordinatorState,
  finalThrough: number,
  specThrough: number,
  applying: Round,
): Promise<void> {
  const removed = settleApplied(s, epoch, finalThrough, specThrough);
  if (removed > 0) await rebuild(ctx, epoch, finalThrough + 1, removed);
  const lr = learningRateAt(ctx.schedule, applying.step, s);
  for (let h = epoch.appliedThrough + 1; h <= specThrough; h++) {
    const final = h <= finalThrough;
    let got;
    if (final) got = await acceptedResults(ctx, s, h);
    else {
      const r = roundAtHeight(s, h);
      const named = speculativeCommitments(s, h);
      if (!r || !named)
        throw new ResyncNeeded(`round ${h} left the coordinator's ring before this client applied it`);
      got = await fetchNamed(ctx, s, r, named);
    }
    await applyRound(ctx, epoch, h, lr, got, true);
    if (final) epoch.settledThrough = h;
  }
}

/**
 * Brings the log of applied rounds to what is final through `finalThrough` (and empty past `specThrough`);
 * returns how many applied results that removed. Pure bookkeeping: the caller rebuilds the parameters.
 */
function settleApplied(
  s: CoordinatorState,
  epoch: EpochProgress,
  finalThrough: number,
  specThrough: number,
): number {
  let removed = 0;
  const keepOnly = (round: AppliedRound, keep: (r: AppliedRound['results'][number]) => boolean): void => {
    const kept = round.results.filter(keep);
    removed += round.results.length - kept.length;
    round.results = kept;
  };
  // Cheats confirmed by the end of round finalThrough+1 lose every result of the epoch.
  const excluded = excludedClients(s, finalThrough);
  for (const round of epoch.applied) {
    if (round.height <= epoch.settledThrough) keepOnly(round, (r) => !excluded.has(r.clientIndex));
    else if (round.height <= finalThrough) {
      const accepted = acceptedCommitments(s, round.height);
      if (!accepted)
        throw new ResyncNeeded(
          `round ${round.height} cannot be judged: neither its outcome nor its witnesses are in the state`,
        );
      const keep = new Set(accepted.flatMap((a) => (a.commitment ? [bytesToHex(a.commitment)] : [])));
      keepOnly(round, (r) => keep.has(r.commitment));
      // The accepted set is a subset of the admitted one this replica applied; anything else is divergence.
      if (round.results.length !== keep.size)
        throw new ResyncNeeded(`round ${round.height}: an accepted result was not applied`);
      epoch.settledThrough = round.height;
    } else if (round.height > specThrough) keepOnly(round, () => false);
  }
  return removed;
}

/** Rebuilds the parameters from the epoch's start by re-applying the (settled) log. */
async function rebuild(
  ctx: ClientContext,
  epoch: EpochProgress,
  height: number,
  removed: number,
): Promise<void> {
  if (epoch.applied.length !== epoch.appliedThrough + 1 || !ctx.replica.restoreEpochStart())
    throw new ResyncNeeded(`applied results must be removed, but this replica lacks the epoch's start`);
  for (const round of epoch.applied)
    apply(
      ctx,
      round.results.map((r) => r.tensors),
      round.lr,
    );
  await ctx.o.distro.finish();
  ctx.emit({ type: 'replayed', height, rounds: epoch.applied.length, excluded: removed });
}

/** One round's accepted results (as received, in batch-id order) applied to the replica's parameters. */
function apply(ctx: ClientContext, results: DistroResult[][], lr: number): void {
  const opt = ctx.optimizer;
  ctx.replica.version++;
  if (opt.kind === 'sparseloco')
    return applySparseLoCo(ctx.o.distro, ctx.replica.params, results, opt.config);
  applyResults(
    ctx.o.distro,
    ctx.replica.params,
    results.map((r) => r.map(fromWire)),
    { lr, weightDecay: opt.config.weight_decay ?? 0 },
  );
}

/**
 * A cheat was confirmed while some of its results were already applied: rebuild the parameters from the
 * epoch's start, re-applying every round applied so far without the excluded clients' results. Every replica
 * does this at the same point (before applying round `height`) with the same exclusions, so they stay
 * bit-identical. Without the epoch's start or its log this replica cannot, and re-syncs.
 */
async function replayWithout(
  ctx: ClientContext,
  epoch: EpochProgress,
  excluded: ReadonlySet<number>,
  height: number,
): Promise<void> {
  if (epoch.applied.length !== epoch.appliedThrough + 1 || !ctx.replica.restoreEpochStart())
    throw new ResyncNeeded(
      `a confirmed cheat's results must be removed, but this replica lacks the epoch's start`,
    );
  for (const round of epoch.applied) {
    round.results = round.results.filter((r) => !excluded.has(r.clientIndex));
    apply(
      ctx,
      round.results.map((r) => r.tensors),
      round.lr,
    );
  }
  await ctx.o.distro.finish();
  ctx.emit({ type: 'replayed', height, rounds: epoch.applied.length, excluded: excluded.size });
}

/**
 * The accepted results of the round at `height`, in batch-id order (the same on every peer, whatever order
 * they arrived in), each checked to be the assignee's result for that batch; `skipped`: batches with none.
 */
async function acceptedResults(
  ctx: ClientContext,
  s: CoordinatorState,
  height: number,
): Promise<{ step: number; results: AppliedRound['results']; skipped: number }> {
  const r = roundAtHeight(s, height);
  if (!r) throw new ResyncNeeded(`round ${height} left the coordinator's ring before this client applied it`);
  const accepted = acceptedCommitments(s, height);
  if (!accepted)
    throw new ResyncNeeded(
      `round ${height} cannot be judged: neither its outcome nor its witnesses are in the state`,
    );
  return fetchNamed(ctx, s, r, accepted);
}

/** The results `named` names (a commitment per batch, or null), fetched and checked, in batch-id order. */
async function fetchNamed(
  ctx: ClientContext,
  s: CoordinatorState,
  r: Round,
  named: readonly AcceptedCommitment[],
): Promise<{ step: number; results: AppliedRound['results']; skipped: number }> {
  const idOf = (clientIndex: number) => s.epoch.clients[clientIndex]?.id ?? '';
  const ordered = named.flatMap((a) => (a.commitment ? [{ ...a, commitment: a.commitment }] : []));
  ordered.sort((a, b) => a.batch.start - b.batch.start);
  const results: AppliedRound['results'] = [];
  for (const a of ordered) {
    const assignee = idOf(a.client_index);
    const held = await ctx.fetcher.obtain(a.commitment, assignee);
    if (!held)
      throw new ResyncNeeded(
        `accepted result ${bytesToHex(a.commitment).slice(0, 16)}… of step ${r.step} could not be fetched`,
      );
    const { result } = held;
    if (
      held.from !== assignee ||
      result.step !== r.step ||
      result.batch.start !== a.batch.start ||
      result.batch.end !== a.batch.end
    )
      throw new ResyncNeeded(
        `accepted commitment of step ${r.step} names a result for another batch or sender`,
      );
    results.push({
      clientIndex: a.client_index,
      commitment: bytesToHex(a.commitment),
      tensors: result.tensors,
    });
  }
  return { step: r.step, results, skipped: named.length - ordered.length };
}
