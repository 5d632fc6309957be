// Light replicas (docs/protocol.md "Round outcomes and light replicas"): a replica that follows the
// coordinator without the per-result evidence. The host turns each event it applied into the light events that take the summary of
// its state before to the summary after (`lightEventsFor`), and a light replica applies them with `lightTick`.
// Timers, membership and shell events pass through unchanged and run core's own `tick`; a tick that ends a
// round carries the host's round outcome (coordinator/round-outcome.ts) instead of the evidence it was judged
// from; an accepted witness becomes its roster index; what an evidence event decided (a cheat confirmed, a
// client dropped or ejected) becomes one `retire` event. A full replica that receives the same outcome judges
// the evidence itself and refuses an outcome that differs from its own (OutcomeMismatch).
import { CoordinatorError } from '../coordinator/errors.ts';
import type { CoordinatorEffect, CoordinatorEvent, TickResult } from '../coordinator/events.ts';
import { eject, retireClients } from '../coordinator/membership.ts';
import { currentRound, resultRoundByStep, roundAtHeight, withRound } from '../coordinator/queries.ts';
import type { RoundOutcome } from '../coordinator/round-outcome.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { tickIn } from '../coordinator/tick.ts';
import type { Ctx } from '../coordinator/context.ts';
import { witnessSeen } from '../coordinator/witnessing.ts';
import { roundListAddress, withListAddress } from './admitted-lists.ts';
import { isHex32 } from '../crypto/bytes.ts';

/** A round outcome as a light replica receives it: with the address of the ended round's admitted list. */
export type LightOutcome = RoundOutcome & { admitted_list: string };

/** Events that carry evidence: only the host and full replicas apply them. */
export type EvidenceEvent = Extract<
  CoordinatorEvent,
  { type: 'witness' | 'result_admitted' | 'verdict' | 'health_check' }
>;

export type LightEvent =
  | Exclude<CoordinatorEvent, EvidenceEvent | { type: 'tick' }>
  /** A timer tick; `outcome` when it ends a round. */
  | { type: 'tick'; entropy?: string; outcome?: LightOutcome }
  /** The host accepted the witness at roster index `index` of the open round (step `step`). */
  | { type: 'witness_seen'; step: number; index: number }
  /** The host has admitted a result for every assignment of the open round (step `step`). */
  | { type: 'round_filled'; step: number }
  /**
   * What an evidence event decided: cheats confirmed (appended to the epoch's), epoch clients dropped, and
   * clients (or members) ejected, applied in that order as the host applied them.
   */
  | {
      type: 'retire';
      cheats: { client_index: number; height: number }[];
      dropped: number[];
      ejected: string[];
    };

const EVIDENCE = new Set<string>(['witness', 'result_admitted', 'verdict', 'health_check']);
const RETIRING = new Set<string>(['ClientDropped', 'ClientEjected', 'CheatConfirmed']);

/**
 * The light events for one event the host applied to `before` with result `after` (the state and effects
 * `tick` returned). Empty when the event changed only evidence.
 */
export function lightEventsFor(
  before: CoordinatorState,
  event: CoordinatorEvent,
  after: TickResult,
): LightEvent[] {
  if (after.state === before) return [];
  if (!EVIDENCE.has(event.type)) {
    if (event.type !== 'tick') return [event as LightEvent];
    const ended = after.effects.find(
      (e): e is Extract<CoordinatorEffect, { type: 'RoundEnded' }> => e.type === 'RoundEnded',
    );
    const light: LightEvent = {
      type: 'tick',
      ...(event.entropy !== undefined ? { entropy: event.entropy } : {}),
    };
    return ended ? [{ ...light, outcome: recordedOutcome(after.state, ended.height) }] : [light];
  }
  const out: LightEvent[] = [];
  for (const e of after.effects)
    if (e.type === 'WitnessAccepted') out.push({ type: 'witness_seen', step: e.step, index: e.index });
    else if (e.type === 'ResultAdmitted') {
      const round = currentRound(after.state);
      if (round?.filled === true && round.step === e.step && currentRound(before)?.filled !== true)
        out.push({ type: 'round_filled', step: e.step });
    }
  // Every drop, ejection and confirmed cheat announces itself in an effect; the common evidence event (a
  // result admitted) has none, so the O(clients) comparison runs only when something was decided.
  if (after.effects.some((e) => RETIRING.has(e.type))) {
    const retire = retiredBetween(before, after.state);
    if (retire) out.push(retire);
  }
  return out;
}

/** The outcome endRound recorded for the round at `height` (and the one before it) in `state`. */
function recordedOutcome(state: CoordinatorState, height: number): LightOutcome {
  const ended = roundAtHeight(state, height);
  const address = ended ? roundListAddress(state.run_id, ended) : undefined;
  if (!ended || ended.admitted_bits === undefined || address === undefined)
    throw new Error(`round ${height} ended without a recorded outcome`);
  return {
    height,
    admitted_bits: ended.admitted_bits,
    admitted_list: address,
    accepted_bits: roundAtHeight(state, height - 1)?.accepted_bits ?? null,
    alive_bits: roundAtHeight(state, height - 1)?.alive_bits ?? null,
    ...(ended.qualified !== undefined && roundAtHeight(state, height - 1)
      ? {
          vetted_bits: roundAtHeight(state, height - 1)?.vetted_bits ?? null,
          struck_bits: roundAtHeight(state, height - 1)?.struck_bits ?? null,
        }
      : {}),
  };
}

function retiredBetween(
  before: CoordinatorState,
  after: CoordinatorState,
): Extract<LightEvent, { type: 'retire' }> | null {
  const cheats = (after.epoch.cheats ?? []).slice((before.epoch.cheats ?? []).length);
  const dropped: number[] = [];
  after.epoch.clients.forEach((c, i) => {
    if (c.state === 'Dropped' && before.epoch.clients[i]?.state === 'Healthy') dropped.push(i);
  });
  const ejected = after.ejected.slice(before.ejected.length);
  if (cheats.length === 0 && dropped.length === 0 && ejected.length === 0) return null;
  return {
    type: 'retire',
    cheats: cheats.map((c) => ({ client_index: c.client_index, height: c.height })),
    dropped,
    ejected,
  };
}

/** A light replica's `tick`: the light events of one host event, in order. */
export function lightTick(state: CoordinatorState, event: LightEvent, now: number): TickResult {
  const refuse = (error: CoordinatorError): TickResult => ({ state, effects: [], error });
  if (typeof event !== 'object' || event === null)
    return refuse(new CoordinatorError('BadEvent', 'event must be an object'));
  if (EVIDENCE.has(event.type))
    return refuse(new CoordinatorError('BadEvent', `a light replica takes no ${event.type} events`));
  if (event.type === 'witness_seen' || event.type === 'retire' || event.type === 'round_filled') {
    const effects: CoordinatorEffect[] = [];
    const ctx: Ctx = { now, effects, light: true };
    const next =
      event.type === 'witness_seen'
        ? witnessSeen(state, event.step, event.index, ctx)
        : event.type === 'retire'
          ? retire(state, event, ctx)
          : roundFilled(state, event.step);
    return next instanceof CoordinatorError ? refuse(next) : { state: next, effects };
  }
  const outcome = event.type === 'tick' ? event.outcome : undefined;
  if (outcome && !isHex32(String((outcome as Partial<LightOutcome>).admitted_list)))
    return refuse(new CoordinatorError('BadEvent', 'admitted_list must be 64 lowercase hex digits'));
  const plain: CoordinatorEvent =
    event.type === 'tick'
      ? { type: 'tick', ...(event.entropy !== undefined ? { entropy: event.entropy } : {}) }
      : event;
  const result = tickIn(state, plain, now, { light: true, ...(outcome ? { outcome } : {}) });
  return outcome && !result.error ? withRecordedAddress(result, outcome) : result;
}

/** The ended round of a tick that applied `outcome`, named by the list address the outcome carries. */
function withRecordedAddress(result: TickResult, outcome: LightOutcome): TickResult {
  const ended = roundAtHeight(result.state, outcome.height);
  if (!ended || ended.admitted_bits === undefined) return result;
  return { ...result, state: withRound(result.state, withListAddress(ended, outcome.admitted_list)) };
}

function roundFilled(state: CoordinatorState, step: number): CoordinatorState | CoordinatorError {
  const round = resultRoundByStep(state, step);
  if (!round)
    return new CoordinatorError('StaleRound', `round_filled is for step ${String(step)}, not the open round`);
  if (round.filled === true) return new CoordinatorError('BadEvent', 'the round is already filled');
  return withRound(state, { ...round, filled: true });
}

function retire(
  state: CoordinatorState,
  e: Extract<LightEvent, { type: 'retire' }>,
  ctx: Ctx,
): CoordinatorState | CoordinatorError {
  const clients = state.epoch.clients.length;
  const index = (i: unknown): i is number =>
    Number.isInteger(i) && (i as number) >= 0 && (i as number) < clients;
  if (
    !Array.isArray(e.cheats) ||
    !Array.isArray(e.dropped) ||
    !Array.isArray(e.ejected) ||
    !e.cheats.every((c) => index(c?.client_index) && Number.isInteger(c.height) && c.height >= 0) ||
    !e.dropped.every(index) ||
    !e.ejected.every(isHex32)
  )
    return new CoordinatorError(
      'BadEvent',
      'retire names epoch client indices, cheat heights and client ids',
    );
  let next = state;
  if (e.cheats.length > 0) {
    const cheats = [...(next.epoch.cheats ?? []), ...e.cheats.map((c) => ({ ...c }))];
    next = { ...next, epoch: { ...next.epoch, cheats } };
    for (const c of e.cheats)
      ctx.effects.push({
        type: 'CheatConfirmed',
        id: next.epoch.clients[c.client_index]!.id,
        step: roundAtHeight(next, c.height)?.step ?? next.progress.step,
      });
  }
  if (e.dropped.length > 0) {
    next = retireClients(next, e.dropped, 'Dropped');
    for (const i of e.dropped)
      ctx.effects.push({
        type: 'ClientDropped',
        id: next.epoch.clients[i]!.id,
        reason: 'dropped by the host',
      });
  }
  for (const id of e.ejected) next = eject(next, id, 'ejected by the host', ctx);
  return next;
}
