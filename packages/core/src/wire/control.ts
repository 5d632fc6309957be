// Relay ↔ client control envelopes. `requestId` correlates a reply with the request that caused it
// (0 = unsolicited), so a client can match errors and acks on one WebSocket without extra framing.
//
// Error frame: header (type 0x70) ‖ requestId varint u32 ‖ code string ≤ 64 B ‖ message string ≤ limits.maxStringBytes
// Ack frame:   header (type 0x71) ‖ requestId varint u32
import type { ByteReader } from './codec.ts';
import { WireError } from './errors.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export const ERROR_CODE_MAX_BYTES = 64;

export interface ControlError {
  requestId: number;
  /** Machine-readable, e.g. "not_in_run", "bad_signature". */
  code: string;
  /** Human-readable; says what to do. */
  message: string;
}

export interface Ack {
  requestId: number;
}

export function encodeControlError(e: ControlError, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('error', limits);
  w.u32(e.requestId, 'requestId');
  if (e.code === '') throw new WireError('inconsistent', 'code', 'error code is empty');
  w.string(e.code, ERROR_CODE_MAX_BYTES, 'code');
  w.string(e.message, limits.maxStringBytes, 'message');
  return w.finish();
}

export function readControlErrorPayload(r: ByteReader): ControlError {
  const requestId = r.u32('requestId');
  const code = r.string(ERROR_CODE_MAX_BYTES, 'code');
  if (code === '') throw new WireError('inconsistent', 'code', 'error code is empty');
  const message = r.string(r.limits.maxStringBytes, 'message');
  return { requestId, code, message };
}

export function decodeControlError(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): ControlError {
  const r = openFrameOf('error', bytes, limits);
  const e = readControlErrorPayload(r);
  r.end('error');
  return e;
}

export function encodeAck(a: Ack, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('ack', limits);
  w.u32(a.requestId, 'requestId');
  return w.finish();
}

export function readAckPayload(r: ByteReader): Ack {
  return { requestId: r.u32('requestId') };
}

export function decodeAck(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): Ack {
  const r = openFrameOf('ack', bytes, limits);
  const a = readAckPayload(r);
  r.end('ack');
  return a;
}
