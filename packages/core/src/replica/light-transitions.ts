// Light events (light-replica.ts) in their wire form (wire/light-delta.ts) and back: the host turns each
// transition it applied into the light transition a light replica applies, and the replica expands what it
// receives against its own state (docs/protocol.md "Round outcomes and light replicas").
import type { TickResult } from '../coordinator/events.ts';
import type { CoordinatorState } from '../state/coordinator-state.ts';
import { fromBase64, toBase64 } from '../coordinator/stored-attestation.ts';
import { tick } from '../coordinator/tick.ts';
import { bytesToHex, hexToBytes, PUBLIC_KEY_BYTES } from '../crypto/index.ts';
import { WireError } from '../wire/errors.ts';
import type { LightTransition, LightWireEvent } from '../wire/light-delta.ts';
import { lightEventsFor, lightTick, type LightEvent, type LightOutcome } from './light-replica.ts';
import { compactEvent, expandEvent, type AppliedTransition } from './wire-events.ts';

const ADDRESS_BYTES = 32;

/**
 * The light form of one transition the host applied to `prev` (`t`, with result `r`): null when it changed
 * nothing a light replica holds. A tick that carries entropy is split as compactTransition does.
 */
export function lightTransitionOf(
  prev: CoordinatorState,
  t: AppliedTransition,
  r: TickResult,
  seq: number,
): LightTransition | null {
  let entropy = t.entropy;
  let event = t.event;
  if (event.type === 'tick' && event.entropy !== undefined) {
    entropy = event.entropy;
    event = { type: 'tick' };
  }
  const base = entropy === undefined ? prev : tick(prev, { type: 'entropy', entropy }, t.now).state;
  const light = lightEventsFor(base, event, r);
  const entropyBytes = entropy === undefined || base === prev ? null : hexToBytes(entropy);
  if (light.length === 0 && entropyBytes === null) return null;
  let s = base;
  const events: LightWireEvent[] = [];
  for (const e of light) {
    events.push(compactLightEvent(s, e));
    s = lightTick(s, e, t.now).state;
  }
  return { seq, now: t.now, entropy: entropyBytes, events };
}

function bitsOf(text: string | null, field: string): Uint8Array | null {
  if (text === null) return null;
  try {
    return fromBase64(text);
  } catch {
    throw new WireError('inconsistent', field, 'not base64');
  }
}

/** The wire form of a light event `state` (a full or light state: their refs agree) is about to take. */
export function compactLightEvent(state: CoordinatorState, e: LightEvent): LightWireEvent {
  switch (e.type) {
    case 'witness_seen':
      return { type: 'witnessSeen', step: e.step, index: e.index };
    case 'round_filled':
      return { type: 'roundFilled', step: e.step };
    case 'retire':
      return {
        type: 'retire',
        cheats: e.cheats.map((c) => ({ client: c.client_index, height: c.height })),
        dropped: [...e.dropped],
        ejected: e.ejected.map((id) => hexToBytes(id, PUBLIC_KEY_BYTES)),
      };
    case 'tick':
      if (e.outcome)
        return {
          type: 'outcome',
          outcome: {
            height: e.outcome.height,
            admittedBits: bitsOf(e.outcome.admitted_bits, 'admittedBits')!,
            admittedList: hexToBytes(e.outcome.admitted_list, ADDRESS_BYTES),
            acceptedBits: bitsOf(e.outcome.accepted_bits, 'acceptedBits'),
            aliveBits: bitsOf(e.outcome.alive_bits, 'aliveBits'),
            ...(typeof e.outcome.vetted_bits === 'string' && typeof e.outcome.struck_bits === 'string'
              ? {
                  vettedBits: bitsOf(e.outcome.vetted_bits, 'vettedBits')!,
                  struckBits: bitsOf(e.outcome.struck_bits, 'struckBits')!,
                }
              : {}),
          },
        };
      return { type: 'plain', event: { type: 'tick' } };
    default:
      return { type: 'plain', event: compactEvent(state, e) };
  }
}

/** The light event a wire event names in `state`; WireError('inconsistent') if it does not resolve. */
export function expandLightEvent(state: CoordinatorState, w: LightWireEvent): LightEvent {
  switch (w.type) {
    case 'witnessSeen':
      return { type: 'witness_seen', step: w.step, index: w.index };
    case 'roundFilled':
      return { type: 'round_filled', step: w.step };
    case 'retire':
      return {
        type: 'retire',
        cheats: w.cheats.map((c) => ({ client_index: c.client, height: c.height })),
        dropped: [...w.dropped],
        ejected: w.ejected.map(bytesToHex),
      };
    case 'outcome': {
      const o = w.outcome;
      const outcome: LightOutcome = {
        height: o.height,
        admitted_bits: toBase64(o.admittedBits),
        admitted_list: bytesToHex(o.admittedList),
        accepted_bits: o.acceptedBits === null ? null : toBase64(o.acceptedBits),
        alive_bits: o.aliveBits === null ? null : toBase64(o.aliveBits),
        ...(o.vettedBits && o.struckBits
          ? { vetted_bits: toBase64(o.vettedBits), struck_bits: toBase64(o.struckBits) }
          : {}),
      };
      return { type: 'tick', outcome };
    }
    case 'plain': {
      const e = expandEvent(state, w.event);
      if (
        e.type === 'witness' ||
        e.type === 'result_admitted' ||
        e.type === 'verdict' ||
        e.type === 'health_check'
      )
        throw new WireError('inconsistent', 'event', `a light replica takes no ${e.type} events`);
      return e;
    }
  }
}
