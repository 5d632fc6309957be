// The generic entry points: one discriminated union over every message, `encodeMessage` and
// `decodeFrame`. Transports call decodeFrame on every inbound frame and switch on `kind`.
import { encodeAdmittedList, readAdmittedListPayload, type AdmittedList } from './admitted-list.ts';
import { encodeLightDelta, readLightDeltaPayload, type LightDelta } from './light-delta.ts';
import type { Announce } from './announce.ts';
import { encodeAnnounce, readAnnouncePayload } from './announce.ts';
import type { ByteReader } from './codec.ts';
import type { SignedResult } from './commitment.ts';
import { encodeSignedResult, readSignedResultPayload } from './commitment.ts';
import type { Challenge } from './challenge.ts';
import { encodeChallenge, readChallengePayload } from './challenge.ts';
import type { Ack, ControlError } from './control.ts';
import { encodeAck, encodeControlError, readAckPayload, readControlErrorPayload } from './control.ts';
import type { CoordinatorStateBroadcast } from './coordinator-state.ts';
import { encodeCoordinatorState, readCoordinatorStatePayload } from './coordinator-state.ts';
import { WireError } from './errors.ts';
import type { MessageKind } from './frame.ts';
import { openFrame } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import type { Join, Leave } from './membership.ts';
import { encodeJoin, encodeLeave, readJoinPayload, readLeavePayload } from './membership.ts';
import type { ParamHash } from './param-hash.ts';
import { encodeParamHash, readParamHashPayload } from './param-hash.ts';
import type { ResyncRequest, StateDelta } from './state-delta.ts';
import {
  encodeResyncRequest,
  encodeStateDelta,
  readResyncRequestPayload,
  readStateDeltaPayload,
} from './state-delta.ts';
import type { StateSnapshot } from './state-snapshot.ts';
import { encodeStateSnapshot, readStateSnapshotPayload } from './state-snapshot.ts';
import type { TrainingResult } from './training-result.ts';
import { encodeTrainingResult, readTrainingResultPayload } from './training-result.ts';
import type { HealthCheck, WitnessMessage } from './witness.ts';
import type { WarmupWitness } from './warmup-witness.ts';
import { encodeWarmupWitness, readWarmupWitnessPayload } from './warmup-witness.ts';
import type { Verdict } from './verdict.ts';
import { encodeVerdict, readVerdictPayload } from './verdict.ts';
import { encodeHealthCheck, encodeWitness, readHealthCheckPayload, readWitnessPayload } from './witness.ts';

export type WireMessage =
  | { kind: 'trainingResult'; message: TrainingResult }
  | { kind: 'signedResult'; message: SignedResult }
  | { kind: 'announce'; message: Announce }
  | { kind: 'witness'; message: WitnessMessage }
  | { kind: 'healthCheck'; message: HealthCheck }
  | { kind: 'warmupWitness'; message: WarmupWitness }
  | { kind: 'verdict'; message: Verdict }
  | { kind: 'join'; message: Join }
  | { kind: 'leave'; message: Leave }
  | { kind: 'challenge'; message: Challenge }
  | { kind: 'coordinatorState'; message: CoordinatorStateBroadcast }
  | { kind: 'stateSnapshot'; message: StateSnapshot }
  | { kind: 'stateDelta'; message: StateDelta }
  | { kind: 'resyncRequest'; message: ResyncRequest }
  | { kind: 'lightDelta'; message: LightDelta }
  | { kind: 'admittedList'; message: AdmittedList }
  | { kind: 'paramHash'; message: ParamHash }
  | { kind: 'error'; message: ControlError }
  | { kind: 'ack'; message: Ack };

// Compile-time check that the union names exactly the registered kinds.
type _KindsMatch = [MessageKind] extends [WireMessage['kind']]
  ? [WireMessage['kind']] extends [MessageKind]
    ? true
    : never
  : never;
const _kindsMatch: _KindsMatch = true;
void _kindsMatch;

export function encodeMessage(m: WireMessage, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  switch (m.kind) {
    case 'trainingResult':
      return encodeTrainingResult(m.message, limits);
    case 'signedResult':
      return encodeSignedResult(m.message, limits);
    case 'announce':
      return encodeAnnounce(m.message, limits);
    case 'witness':
      return encodeWitness(m.message, limits);
    case 'healthCheck':
      return encodeHealthCheck(m.message, limits);
    case 'warmupWitness':
      return encodeWarmupWitness(m.message, limits);
    case 'verdict':
      return encodeVerdict(m.message, limits);
    case 'join':
      return encodeJoin(m.message, limits);
    case 'leave':
      return encodeLeave(m.message, limits);
    case 'challenge':
      return encodeChallenge(m.message, limits);
    case 'coordinatorState':
      return encodeCoordinatorState(m.message, limits);
    case 'stateSnapshot':
      return encodeStateSnapshot(m.message, limits);
    case 'stateDelta':
      return encodeStateDelta(m.message, limits);
    case 'resyncRequest':
      return encodeResyncRequest(m.message, limits);
    case 'lightDelta':
      return encodeLightDelta(m.message, limits);
    case 'admittedList':
      return encodeAdmittedList(m.message, limits);
    case 'paramHash':
      return encodeParamHash(m.message, limits);
    case 'error':
      return encodeControlError(m.message, limits);
    case 'ack':
      return encodeAck(m.message, limits);
    default: {
      const never: never = m;
      throw new WireError(
        'unknown_type',
        'kind',
        `unknown message kind ${String((never as { kind: unknown }).kind)}`,
      );
    }
  }
}

function readPayload(kind: MessageKind, r: ByteReader): WireMessage {
  switch (kind) {
    case 'trainingResult':
      return { kind, message: readTrainingResultPayload(r) };
    case 'signedResult':
      return { kind, message: readSignedResultPayload(r) };
    case 'announce':
      return { kind, message: readAnnouncePayload(r) };
    case 'witness':
      return { kind, message: readWitnessPayload(r) };
    case 'healthCheck':
      return { kind, message: readHealthCheckPayload(r) };
    case 'warmupWitness':
      return { kind, message: readWarmupWitnessPayload(r) };
    case 'verdict':
      return { kind, message: readVerdictPayload(r) };
    case 'join':
      return { kind, message: readJoinPayload(r) };
    case 'leave':
      return { kind, message: readLeavePayload(r) };
    case 'challenge':
      return { kind, message: readChallengePayload(r) };
    case 'coordinatorState':
      return { kind, message: readCoordinatorStatePayload(r) };
    case 'stateSnapshot':
      return { kind, message: readStateSnapshotPayload(r) };
    case 'stateDelta':
      return { kind, message: readStateDeltaPayload(r) };
    case 'resyncRequest':
      return { kind, message: readResyncRequestPayload(r) };
    case 'lightDelta':
      return { kind, message: readLightDeltaPayload(r) };
    case 'admittedList':
      return { kind, message: readAdmittedListPayload(r) };
    case 'paramHash':
      return { kind, message: readParamHashPayload(r) };
    case 'error':
      return { kind, message: readControlErrorPayload(r) };
    case 'ack':
      return { kind, message: readAckPayload(r) };
  }
}

/**
 * Decode any frame. Structure and invariants are checked; signatures are not (use verifySignedResult,
 * verifyAnnounce, verifyJoin). Throws only WireError.
 */
export function decodeFrame(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): WireMessage {
  const { kind, reader } = openFrame(bytes, limits);
  const m = readPayload(kind, reader);
  reader.end(kind);
  return m;
}
