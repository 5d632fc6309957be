// Joining, leaving and ejection. Ids are Ed25519 public keys in hex; a client is a member (registered for
// the next epoch) and, while an epoch runs, possibly an epoch client with a health state.
import { CoordinatorError } from './errors.ts';
import type { Ctx } from './context.ts';
import { currentRound, withRound } from '../state/rounds.ts';
import type { CoordinatorState, EpochClient } from '../state/coordinator-state.ts';
import { isWitness } from './queries.ts';
import { withoutTrust } from './trust.ts';
import { isHex32 } from '../crypto/bytes.ts';

/**
 * Invalid witness submissions (bad proof, not a witness, malformed attestation) and refuted accusations
 * (coordinator/verification.ts) before a client is ejected.
 */
export const MAX_STRIKES = 3;

const ORIGIN = /^[0-9a-f]{16}$/;

export function checkId(id: unknown): CoordinatorError | null {
  return isHex32(id)
    ? null
    : new CoordinatorError('BadEvent', 'client id must be an Ed25519 public key as 64 lowercase hex digits');
}

export function join(
  state: CoordinatorState,
  id: string,
  p2pId: string,
  ctx: Ctx,
  origin?: string,
  verifierOnly?: true,
): CoordinatorState | CoordinatorError {
  const bad = checkId(id);
  if (bad) return bad;
  if (origin !== undefined && (typeof origin !== 'string' || !ORIGIN.test(origin)))
    return new CoordinatorError('BadEvent', 'origin must be 16 lowercase hex digits');
  if (verifierOnly !== undefined && verifierOnly !== true)
    return new CoordinatorError('BadEvent', 'verifier_only is true or absent');
  if (typeof p2pId !== 'string' || p2pId.length === 0 || p2pId.length > 256) {
    return new CoordinatorError('BadEvent', 'p2p_id must be a non-empty string of at most 256 characters');
  }
  if (state.run_state === 'Finished')
    return new CoordinatorError('WrongPhase', 'the run has finished; it takes no new members');
  if (state.ejected.includes(id))
    return new CoordinatorError(
      'Ejected',
      `client ${id.slice(0, 12)}… was ejected from this run and cannot rejoin`,
    );
  if (state.members.some((m) => m.id === id))
    return new CoordinatorError('AlreadyMember', `client ${id.slice(0, 12)}… has already joined`);
  // FIX (Psyche): Psyche caps clients at 256 and its Solana registry never frees slots; here the registry is
  // bounded by config.max_clients and leaving frees a slot.
  if (state.members.length >= state.config.max_clients) {
    return new CoordinatorError(
      'RunFull',
      `the run already has config.max_clients = ${state.config.max_clients} members; try again later`,
    );
  }
  ctx.effects.push({ type: 'ClientJoined', id });
  const member = {
    id,
    p2p_id: p2pId,
    ...(origin !== undefined ? { origin } : {}),
    ...(verifierOnly ? { verifier_only: true as const } : {}),
  };
  return { ...state, members: [...state.members, member] };
}

export function leave(state: CoordinatorState, id: string, ctx: Ctx): CoordinatorState | CoordinatorError {
  const bad = checkId(id);
  if (bad) return bad;
  const memberIndex = state.members.findIndex((m) => m.id === id);
  const clientIndex = state.epoch.clients.findIndex((c) => c.id === id && c.state === 'Healthy');
  if (memberIndex < 0 && clientIndex < 0)
    return new CoordinatorError('UnknownClient', `client ${id.slice(0, 12)}… is not a member of this run`);
  let next = clientIndex >= 0 ? retireClients(state, [clientIndex], 'Withdrawn') : state;
  if (next.members.some((m) => m.id === id))
    next = { ...next, members: next.members.filter((m) => m.id !== id) };
  ctx.effects.push({ type: 'ClientLeft', id, state: 'Withdrawn' });
  return next;
}

/**
 * Ejected: out of the epoch and the member list, and banned (Psyche never assigns it;
 * docs/protocol.md "Health checks and client removal").
 */
export function eject(state: CoordinatorState, id: string, reason: string, ctx: Ctx): CoordinatorState {
  let next = state;
  const clientIndex = next.epoch.clients.findIndex((c) => c.id === id);
  if (clientIndex >= 0 && next.epoch.clients[clientIndex]?.state !== 'Ejected') {
    const clients = next.epoch.clients.slice();
    const c = clients[clientIndex]!;
    clients[clientIndex] = {
      ...c,
      state: 'Ejected',
      exited_height: c.state === 'Healthy' ? currentHeight(next) : c.exited_height,
    };
    next = { ...next, epoch: { ...next.epoch, clients } };
    if (c.state === 'Healthy') next = withDepartedWitnesses(next, [clientIndex]);
  }
  if (next.members.some((m) => m.id === id))
    next = { ...next, members: next.members.filter((m) => m.id !== id) };
  if (!next.ejected.includes(id)) next = { ...next, ejected: [...next.ejected, id] };
  if (Object.hasOwn(next.strikes, id)) {
    const strikes = { ...next.strikes };
    delete strikes[id];
    next = { ...next, strikes };
  }
  next = withoutTrust(next, id);
  ctx.effects.push({ type: 'ClientEjected', id, reason });
  return next;
}

export function isKnown(state: CoordinatorState, id: string): boolean {
  return state.members.some((m) => m.id === id) || state.epoch.clients.some((c) => c.id === id);
}

/** Records one provably invalid submission by `id`; the MAX_STRIKES-th ejects it. */
export function strike(state: CoordinatorState, id: string, reason: string, ctx: Ctx): CoordinatorState {
  const count = (Object.hasOwn(state.strikes, id) ? (state.strikes[id] as number) : 0) + 1;
  if (count >= MAX_STRIKES) return eject(state, id, `${MAX_STRIKES} strikes; last: ${reason}`, ctx);
  return { ...state, strikes: { ...state.strikes, [id]: count } };
}

/** Healthy clients that take part in rounds (verify-only clients count in no quorum or min_clients). */
export function healthyCount(state: CoordinatorState): number {
  let n = 0;
  for (const c of state.epoch.clients) if (c.state === 'Healthy' && c.verifier_only !== true) n++;
  return n;
}

export function currentHeight(state: CoordinatorState): number {
  return currentRound(state)?.height ?? 0;
}

/** Sets the state of the given epoch clients (only Healthy ones change) and unregisters them as members. */
export function retireClients(
  state: CoordinatorState,
  clientIndices: readonly number[],
  to: Exclude<EpochClient['state'], 'Healthy'>,
): CoordinatorState {
  if (clientIndices.length === 0) return state;
  const clients = state.epoch.clients.slice();
  const ids = new Set<string>();
  const retired: number[] = [];
  const height = currentHeight(state);
  for (const i of clientIndices) {
    const c = clients[i];
    if (!c || c.state !== 'Healthy') continue;
    clients[i] = { ...c, state: to, exited_height: height };
    ids.add(c.id);
    retired.push(i);
  }
  const members = ids.size > 0 ? state.members.filter((m) => !ids.has(m.id)) : state.members;
  return withDepartedWitnesses({ ...state, members, epoch: { ...state.epoch, clients } }, retired);
}

/**
 * Records on the open round those of `clientIndices` (just retired or ejected) that are its selected witnesses
 * and had not submitted: they never can now, so the round stops waiting for them and leaves them out of its
 * quorum (queries.ts `liveWitnessCount`). A round is open until its outcome is recorded (admitted_bits), so
 * the silent witnesses endRound drops after judging a round change nothing it decided.
 */
function withDepartedWitnesses(state: CoordinatorState, clientIndices: readonly number[]): CoordinatorState {
  if (clientIndices.length === 0) return state;
  if (state.run_state !== 'RoundTrain' && state.run_state !== 'RoundWitness') return state;
  const round = currentRound(state);
  if (!round || round.admitted_bits !== undefined) return state;
  const departed = [...(round.departed ?? [])];
  for (const clientIndex of clientIndices) {
    const index = round.roster.indexOf(clientIndex);
    if (!isWitness(state, index, round) || departed.includes(index)) continue;
    if (round.witnesses.some((w) => w.index === index)) continue;
    departed.push(index);
  }
  if (departed.length === (round.departed?.length ?? 0)) return state;
  // Ascending, whatever order the departures came in: a light replica retires in its own order.
  return withRound(state, { ...round, departed: departed.sort((a, b) => a - b) });
}
