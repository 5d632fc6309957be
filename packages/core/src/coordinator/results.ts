// result_admitted: the host's record of the results it stored and delivers. The coordinator keeps one
// commitment per assignment of the round in progress; that record is what peers apply (queries.acceptedCommitments),
// so a result the host refused can never be accepted, and a trainer cannot get two results for one batch
// counted. A second, different commitment for the same assignment is equivocation: the host holds both
// signed results as evidence, and the sender is ejected as a confirmed cheat.
import { CoordinatorError } from './errors.ts';
import { eject } from './membership.ts';
import { resultRoundByStep, roundAdmitted, roundAssignments, withRound } from './queries.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import type { Ctx } from './context.ts';
import { isHex32 } from '../crypto/bytes.ts';

export interface AdmittedResult {
  id: string;
  step: number;
  batch: { start: number; end: number };
  commitment: string;
}

export function resultAdmitted(
  state: CoordinatorState,
  r: AdmittedResult,
  ctx: Ctx,
): { state: CoordinatorState; error?: CoordinatorError } {
  const refuse = (error: CoordinatorError) => ({ state, error });
  if (!isHex32(r.commitment))
    return refuse(new CoordinatorError('BadEvent', 'commitment must be 64 lowercase hex digits'));
  if (!Number.isSafeInteger(r.step) || typeof r.batch !== 'object' || r.batch === null)
    return refuse(new CoordinatorError('BadEvent', 'result_admitted needs a step and a batch'));
  const round = resultRoundByStep(state, r.step);
  if (!round)
    return refuse(
      new CoordinatorError(
        'RoundClosed',
        `step ${r.step} is not the round in progress (a round takes results until it ends)`,
      ),
    );
  const assignments = roundAssignments(state, round);
  const slot = assignments.findIndex(
    (a) => a.id === r.id && a.batch.start === r.batch.start && a.batch.end === r.batch.end,
  );
  if (slot < 0)
    return refuse(
      new CoordinatorError(
        'NotAssignee',
        `batch ${r.batch.start}..${r.batch.end} of step ${r.step} is not assigned to ${r.id.slice(0, 12)}…`,
      ),
    );
  const client = state.epoch.clients[assignments[slot]!.client_index];
  if (client?.state !== 'Healthy')
    return refuse(new CoordinatorError('NotHealthy', `client ${r.id.slice(0, 12)}… is ${client?.state}`));
  const admitted = roundAdmitted(round);
  const existing = admitted[slot] ?? null;
  if (existing === r.commitment)
    return refuse(new CoordinatorError('DuplicateResult', 'this result was already admitted'));
  if (existing !== null) {
    // Two signed results for one batch are proof on their own: a confirmed cheat like a failed verification,
    // so its results of this epoch (the first one of this batch included) are excluded and replayed away.
    const reason = `equivocation: two results for batch ${r.batch.start}..${r.batch.end} of step ${r.step}`;
    const cheats = [
      ...(state.epoch.cheats ?? []),
      { client_index: assignments[slot]!.client_index, height: round.height },
    ];
    const marked: CoordinatorState = { ...state, epoch: { ...state.epoch, cheats } };
    const next = eject(marked, r.id, reason, ctx);
    ctx.effects.push({ type: 'CheatConfirmed', id: r.id, step: r.step });
    return { state: next, error: new CoordinatorError('Equivocation', reason) };
  }
  const next = assignments.map((_, i) => (i === slot ? r.commitment : (admitted[i] ?? null)));
  ctx.effects.push({ type: 'ResultAdmitted', step: r.step, id: r.id, commitment: r.commitment });
  const filled = next.every((c) => c !== null);
  return {
    state: withRound(state, { ...round, admitted: next, ...(filled ? { filled: true as const } : {}) }),
  };
}
