// Coordinator events and transitions in their wire form (wire/transition.ts) and back. The wire form names
// clients by their index in a state (refs), so each direction takes the state the event applies to; replay.ts
// feeds the expanded events to `tick`.
import { currentRound, roundAssignments, roundAtHeight } from '../coordinator/queries.ts';
import type { CoordinatorConfig } from '../state/coordinator-config.ts';
import type { CoordinatorEffect, CoordinatorEvent } from '../coordinator/events.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { bytesToHex, hexToBytes } from '../crypto/index.ts';
import { WireError } from '../wire/errors.ts';
import type { WireTransition } from '../wire/state-delta.ts';
import type { ClientRef, WireEvent } from '../wire/transition.ts';
import { ORIGIN_BYTES } from '../wire/transition.ts';
import { isHex32 } from '../crypto/bytes.ts';

/** A transition in the coordinator's terms: `entropy` (hex) fed as an `entropy` event, then `event`, at `now`. */
export interface AppliedTransition {
  now: number;
  entropy?: string;
  event: CoordinatorEvent;
}

/**
 * Whether a transition drew on the state's entropy: only a round start derives a seed from it
 * (coordinator/seed.ts). A host mixes fresh entropy into exactly those transitions, so every round seed is
 * unpredictable until the round starts, and other transitions carry no entropy at all.
 */
export function usesEntropy(effects: readonly CoordinatorEffect[]): boolean {
  return effects.some((e) => e.type === 'RoundStarted');
}

const clientIndexes = new WeakMap<readonly unknown[], Map<string, number>>();

/** `epoch.clients` index of `id` (memoised per clients array: it changes rarely within an epoch). */
function clientIndexOf(state: CoordinatorState, id: string): number {
  const clients = state.epoch.clients;
  let m = clientIndexes.get(clients);
  if (!m) {
    m = new Map();
    clients.forEach((c, i) => m!.set(c.id, i));
    clientIndexes.set(clients, m);
  }
  return m.get(id) ?? -1;
}

function keyOf(id: string, field: string): Uint8Array {
  if (!isHex32(id)) throw new WireError('inconsistent', field, 'client id must be 64 lowercase hex digits');
  return hexToBytes(id);
}

/** The shortest way `state` names `id`. */
export function refOf(state: CoordinatorState, id: string, field = 'who'): ClientRef {
  const c = clientIndexOf(state, id);
  if (c >= 0) return { client: c };
  const m = state.members.findIndex((x) => x.id === id);
  if (m >= 0) return { member: m };
  return { key: keyOf(id, field) };
}

/** The id a ref names in `state`; WireError('inconsistent') if `state` has no such client. */
export function resolveRef(state: CoordinatorState, ref: ClientRef, field = 'who'): string {
  if ('key' in ref) return bytesToHex(ref.key);
  const entry = 'client' in ref ? state.epoch.clients[ref.client] : state.members[ref.member];
  if (!entry) throw new WireError('inconsistent', field, 'the ref names no client of this state');
  return entry.id;
}

function hexBytes(hex: string | undefined, n: number, field: string): Uint8Array {
  if (typeof hex !== 'string' || hex.length !== 2 * n || !/^[0-9a-f]*$/.test(hex))
    throw new WireError('inconsistent', field, `expected ${n} bytes as lowercase hex`);
  return hexToBytes(hex);
}

function entropyBytes(hex: string, field: string): Uint8Array {
  if (typeof hex !== 'string' || hex.length % 2 !== 0 || hex.length > 128 || !/^[0-9a-f]*$/.test(hex))
    throw new WireError('inconsistent', field, 'entropy is lowercase hex of at most 64 bytes');
  return hexToBytes(hex);
}

/** Eject reasons are not part of the state; long ones are cut so the event always fits a frame. */
const MAX_REASON_CHARS = 256;

/** The wire form of an event `state` is about to take (refs into `state`). */
export function compactEvent(state: CoordinatorState, e: CoordinatorEvent): WireEvent {
  switch (e.type) {
    case 'tick':
    case 'pause':
    case 'resume':
      return { type: e.type };
    case 'entropy':
      return { type: 'entropy', entropy: entropyBytes(e.entropy, 'entropy') };
    case 'join':
      return {
        type: 'join',
        key: keyOf(e.id, 'key'),
        p2pId: e.p2p_id === e.id ? null : e.p2p_id,
        ...(e.origin !== undefined ? { origin: hexBytes(e.origin, ORIGIN_BYTES, 'origin') } : {}),
        ...(e.verifier_only === true ? { verifierOnly: true as const } : {}),
      };
    case 'leave':
      return { type: 'leave', who: refOf(state, e.id) };
    case 'eject':
      return { type: 'eject', who: refOf(state, e.id), reason: String(e.reason).slice(0, MAX_REASON_CHARS) };
    case 'warmup_witness':
      return { type: 'warmupWitness', who: refOf(state, e.id) };
    case 'witness':
      return {
        type: 'witness',
        who: refOf(state, e.id),
        step: e.step,
        proof: e.proof,
        attested: e.attested,
        broadcastMerkle:
          e.broadcast_merkle === undefined ? null : hexBytes(e.broadcast_merkle, 32, 'broadcastMerkle'),
      };
    case 'result_admitted': {
      const commitment = hexBytes(e.commitment, 32, 'commitment');
      const cur = currentRound(state);
      if (cur && cur.step === e.step) {
        const slot = roundAssignments(state, cur).findIndex(
          (a) => a.id === e.id && a.batch.start === e.batch.start && a.batch.end === e.batch.end,
        );
        if (slot >= 0) return { type: 'admitted', slot, commitment };
      }
      const batch = { start: e.batch.start, end: e.batch.end };
      return { type: 'resultAdmitted', who: refOf(state, e.id), step: e.step, batch, commitment };
    }
    case 'verdict': {
      const cur = currentRound(state);
      const judged = cur ? roundAtHeight(state, cur.height - 1) : null;
      if (judged && judged.step === e.step) {
        const slot = roundAssignments(state, judged).findIndex(
          (a) => a.batch.start === e.batch.start && a.batch.end === e.batch.end,
        );
        if (slot >= 0)
          return { type: 'verdictSlot', who: refOf(state, e.id), slot, pass: e.pass, ...conclusiveOf(e) };
      }
      const batch = { start: e.batch.start, end: e.batch.end };
      return {
        type: 'verdict',
        who: refOf(state, e.id),
        step: e.step,
        batch,
        pass: e.pass,
        ...conclusiveOf(e),
      };
    }
    case 'health_check':
      return {
        type: 'healthCheck',
        who: refOf(state, e.id),
        checks: e.checks.map((c, i) => ({ who: refOf(state, c.id, `checks[${i}].who`), proof: c.proof })),
      };
    case 'update_config':
      return { type: 'updateConfig', config: JSON.stringify(e.config) };
  }
}

/** The coordinator event a wire event names in `state`; WireError('inconsistent') if its refs do not resolve. */
export function expandEvent(state: CoordinatorState, w: WireEvent): CoordinatorEvent {
  switch (w.type) {
    case 'tick':
    case 'pause':
    case 'resume':
      return { type: w.type };
    case 'entropy':
      return { type: 'entropy', entropy: bytesToHex(w.entropy) };
    case 'join': {
      const id = bytesToHex(w.key);
      return {
        type: 'join',
        id,
        p2p_id: w.p2pId ?? id,
        ...(w.origin !== undefined ? { origin: bytesToHex(w.origin) } : {}),
        ...(w.verifierOnly === true ? { verifier_only: true as const } : {}),
      };
    }
    case 'leave':
      return { type: 'leave', id: resolveRef(state, w.who) };
    case 'eject':
      return { type: 'eject', id: resolveRef(state, w.who), reason: w.reason };
    case 'warmupWitness':
      return { type: 'warmup_witness', id: resolveRef(state, w.who) };
    case 'witness': {
      const e: Extract<CoordinatorEvent, { type: 'witness' }> = {
        type: 'witness',
        id: resolveRef(state, w.who),
        step: w.step,
        proof: w.proof,
        attested: w.attested,
      };
      if (w.broadcastMerkle !== null) e.broadcast_merkle = bytesToHex(w.broadcastMerkle);
      return e;
    }
    case 'admitted':
      return expandAdmitted(state, w);
    case 'resultAdmitted':
      return {
        type: 'result_admitted',
        id: resolveRef(state, w.who),
        step: w.step,
        batch: { start: w.batch.start, end: w.batch.end },
        commitment: bytesToHex(w.commitment),
      };
    case 'verdictSlot':
      return expandVerdictSlot(state, w);
    case 'verdict':
      return {
        type: 'verdict',
        id: resolveRef(state, w.who),
        step: w.step,
        batch: { start: w.batch.start, end: w.batch.end },
        pass: w.pass,
        ...conclusiveOf(w),
      };
    case 'healthCheck':
      return {
        type: 'health_check',
        id: resolveRef(state, w.who),
        checks: w.checks.map((c, i) => ({
          id: resolveRef(state, c.who, `checks[${i}].who`),
          proof: c.proof,
        })),
      };
    case 'updateConfig':
      return { type: 'update_config', config: parseConfig(w.config) };
  }
}

/** A result named by its slot in the open round. */
function expandAdmitted(
  state: CoordinatorState,
  w: Extract<WireEvent, { type: 'admitted' }>,
): CoordinatorEvent {
  const cur = currentRound(state);
  const a = cur ? roundAssignments(state, cur)[w.slot] : undefined;
  if (!cur || !a) throw new WireError('inconsistent', 'slot', 'no such slot in the open round');
  return {
    type: 'result_admitted',
    id: a.id,
    step: cur.step,
    batch: { start: a.batch.start, end: a.batch.end },
    commitment: bytesToHex(w.commitment),
  };
}

/** A verdict named by its slot in the round before the open one. */
function expandVerdictSlot(
  state: CoordinatorState,
  w: Extract<WireEvent, { type: 'verdictSlot' }>,
): CoordinatorEvent {
  const cur = currentRound(state);
  const judged = cur ? roundAtHeight(state, cur.height - 1) : null;
  const a = judged ? roundAssignments(state, judged)[w.slot] : undefined;
  if (!judged || !a) throw new WireError('inconsistent', 'slot', 'no such slot in the judged round');
  return {
    type: 'verdict',
    id: resolveRef(state, w.who),
    step: judged.step,
    batch: { start: a.batch.start, end: a.batch.end },
    pass: w.pass,
    ...conclusiveOf(w),
  };
}

function parseConfig(text: string): CoordinatorConfig {
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch {
    throw new WireError('inconsistent', 'config', 'not JSON');
  }
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    throw new WireError('inconsistent', 'config', 'not a config object');
  return config as CoordinatorConfig;
}

/**
 * The wire form of a transition `state` is about to take. A timer tick that carries its own entropy is sent
 * as that entropy followed by a plain tick: `tick` treats the two alike (the entropy is set, then the timer
 * runs), so the replayed state is the same.
 */
export function compactTransition(state: CoordinatorState, t: AppliedTransition): WireTransition {
  let entropy = t.entropy;
  let event = t.event;
  if (event.type === 'tick' && event.entropy !== undefined) {
    entropy = event.entropy;
    event = { type: 'tick' };
  }
  return {
    now: t.now,
    entropy: entropy === undefined ? null : entropyBytes(entropy, 'entropy'),
    event: compactEvent(state, event),
  };
}

export function expandTransition(state: CoordinatorState, w: WireTransition): AppliedTransition {
  const t: AppliedTransition = { now: w.now, event: expandEvent(state, w.event) };
  if (w.entropy !== null) t.entropy = bytesToHex(w.entropy);
  return t;
}

/**
 * A verdict's `conclusive` field and its evidence, only where set (events without them compare and print as
 * before).
 */
function conclusiveOf(e: { conclusive?: boolean; evidence?: [number, number] }): {
  conclusive?: true;
  evidence?: [number, number];
} {
  if (e.conclusive !== true) return {};
  return e.evidence !== undefined
    ? { conclusive: true, evidence: [e.evidence[0], e.evidence[1]] }
    : { conclusive: true };
}
