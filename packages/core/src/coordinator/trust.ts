// Who may vouch for whose work (docs/protocol.md "Trust: anchors, verified history and probation"). A run's
// creator names trusted verifier keys in its config; their verdicts are final. Any other identity earns a
// verified history only by results that a qualified verifier (a trusted one, or one with a verified history
// of its own) passed, so trust flows from the anchor and cheap identities cannot vouch for each other. Until
// then an identity is on probation: every result of it is sampled, only a qualified verifier's pass lets one
// be applied, and probation results take a bounded share of a round's applied results.
//
// Decisions read a round's frozen `qualified` list (set when the round opens, from `state.trust`), never the
// live record, so every replica derives the same verification tasks and acceptance whenever it asks. The
// record changes only when a round ends, from the round outcome's vetted/struck bits, which a light replica
// receives with the outcome (coordinator/round-outcome.ts).
import type { CoordinatorState, Round } from '../state/coordinator-state.ts';

/** Qualified judgements per identity that `state.trust` remembers (1 passed, 0 failed), oldest first. */
export const TRUST_WINDOW = 8;
/**
 * Results in a row passed by a qualified verifier that give an identity a record: a full window, so a cheater
 * that fabricates a share r of its results leaves probation with probability (1 − r)^8 (docs/protocol.md).
 */
export const QUALIFYING_PASSES = TRUST_WINDOW;
/**
 * Probation results applied per round: at most max(1, ⌊n / 3⌋) for n applied results of identities with a
 * record, so probation results are at most a quarter of a round's applied results once n ≥ 3.
 */
export const PROBATION_SHARE_DIVISOR = 3;
/** Trusted verifier keys a run may name (each one is compared on every verdict). */
export const MAX_TRUSTED_VERIFIERS = 64;
/** Raised sampling for an identity with a failed judgement in its window: verification_percent × this, ≤ 100. */
export const STRUCK_SAMPLING_FACTOR = 4;

/** The run names at least one trusted verifier: trust is anchored and probation applies. */
export function anchored(state: CoordinatorState): boolean {
  return (state.config.trusted_verifiers?.length ?? 0) > 0;
}

export function isTrusted(state: CoordinatorState, id: string): boolean {
  return state.config.trusted_verifiers?.includes(id) === true;
}

/** Whether `id` has a verified history now (the live record; rounds read their frozen list instead). */
export function hasRecord(state: CoordinatorState, id: string): boolean {
  const record = state.trust && Object.hasOwn(state.trust, id) ? state.trust[id]! : [];
  let passes = 0;
  for (const o of record) {
    if (o === 0) return false;
    passes++;
  }
  return passes >= QUALIFYING_PASSES;
}

/** A failed qualified judgement in `id`'s window: its results are sampled more often. */
export function recentlyStruck(state: CoordinatorState, id: string): boolean {
  return state.trust && Object.hasOwn(state.trust, id) ? state.trust[id]!.includes(0) : false;
}

/**
 * The `epoch.clients` indices, ascending, that a round opening now treats as qualified verifiers (trusted,
 * or with a verified history), and those whose sampling is raised; both undefined in a run without anchor.
 */
export function frozenTrust(state: CoordinatorState): { qualified: number[]; struck: number[] } | undefined {
  if (!anchored(state)) return undefined;
  const qualified: number[] = [];
  const struck: number[] = [];
  state.epoch.clients.forEach((c, i) => {
    if (isTrusted(state, c.id) || hasRecord(state, c.id)) qualified.push(i);
    if (recentlyStruck(state, c.id)) struck.push(i);
  });
  return { qualified, struck };
}

/** Whether epoch client `clientIndex` was a qualified verifier when `round` opened. */
export function qualifiedIn(round: Round, clientIndex: number): boolean {
  return round.qualified?.includes(clientIndex) === true;
}

/** Whether epoch client `clientIndex` was on probation when `round` opened (only in an anchored run). */
export function onProbationIn(round: Round, clientIndex: number): boolean {
  return round.qualified !== undefined && !round.qualified.includes(clientIndex);
}

/**
 * `state.trust` with `outcome` (1 passed, 0 failed by a qualified verifier) appended to `id`'s record (its last
 * TRUST_WINDOW kept). As with `state.verified`, the least recently judged ids are forgotten beyond max_clients.
 */
export function withTrust(state: CoordinatorState, id: string, outcome: 0 | 1): CoordinatorState {
  const old = state.trust ?? {};
  const record = [...(Object.hasOwn(old, id) ? (old[id] as number[]) : []), outcome].slice(-TRUST_WINDOW);
  const ids = Object.keys(old).filter((k) => k !== id);
  const keep = ids.slice(Math.max(0, ids.length + 1 - Math.max(1, state.config.max_clients)));
  const trust: Record<string, number[]> = {};
  for (const k of keep) trust[k] = old[k] as number[];
  trust[id] = record;
  return { ...state, trust };
}

/** `state` without `id`'s record (it was ejected). */
export function withoutTrust(state: CoordinatorState, id: string): CoordinatorState {
  if (!state.trust || !Object.hasOwn(state.trust, id)) return state;
  const trust = { ...state.trust };
  delete trust[id];
  return { ...state, trust };
}

/**
 * A run-level warning, or null: identities without a verified record could control the results it applies.
 * Without a trusted verifier nothing anchors trust, so a majority of cheap identities can verify its own
 * results (docs/protocol.md "Threat model").
 */
export function trustWarning(state: CoordinatorState): string | null {
  if (!anchored(state))
    return 'no trusted verifier: the run names none, so identities without a verified record decide which results are applied; it may be attacker-controlled';
  const healthy = state.epoch.clients.filter((c) => c.state === 'Healthy');
  const live = state.run_state === 'RoundTrain' || state.run_state === 'RoundWitness';
  if (live && healthy.length > 0 && !healthy.some((c) => isTrusted(state, c.id) || hasRecord(state, c.id)))
    return 'no trusted verifier or identity with a verified record is taking part: no result can leave probation';
  return null;
}
