// Frame header shared by every message. Transports (WebSocket messages, length-prefixed libp2p streams,
// content-addressed blobs) delimit frames; the frame itself carries no length, and any byte after the
// message is an error.
//
// | offset | size | field                                      |
// |--------|------|--------------------------------------------|
// | 0      | 2    | magic "MT" (0x4d 0x54)                     |
// | 2      | 1    | version (u8) = WIRE_VERSION                |
// | 3      | 1    | message type (u8), see MESSAGE_TYPE        |
// | 4      | …    | payload, layout per message module         |
import { ByteReader, ByteWriter } from './codec.ts';
import { WireError } from './errors.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export const WIRE_MAGIC = new Uint8Array([0x4d, 0x54]);
export const WIRE_VERSION = 1;
export const FRAME_HEADER_BYTES = 4;

/** Stable numeric ids. Never reuse a retired id; add new ones. */
export const MESSAGE_TYPE = {
  trainingResult: 0x01,
  signedResult: 0x02,
  announce: 0x03,
  witness: 0x10,
  healthCheck: 0x11,
  warmupWitness: 0x12,
  verdict: 0x13,
  join: 0x20,
  leave: 0x21,
  challenge: 0x22,
  coordinatorState: 0x30,
  stateSnapshot: 0x31,
  paramHash: 0x32,
  stateDelta: 0x33,
  resyncRequest: 0x34,
  lightDelta: 0x35,
  admittedList: 0x36,
  error: 0x70,
  ack: 0x71,
} as const;

export type MessageKind = keyof typeof MESSAGE_TYPE;
export type MessageTypeId = (typeof MESSAGE_TYPE)[MessageKind];

const KIND_BY_ID = new Map<number, MessageKind>(
  (Object.keys(MESSAGE_TYPE) as MessageKind[]).map((k) => [MESSAGE_TYPE[k], k]),
);

/** Message kind for a type byte, or undefined. */
export function messageKindOf(typeId: number): MessageKind | undefined {
  return KIND_BY_ID.get(typeId);
}

/** A writer with the header for `kind` already written. */
export function frameWriter(kind: MessageKind, limits: WireLimits = DEFAULT_WIRE_LIMITS): ByteWriter {
  const w = new ByteWriter(limits);
  w.raw(WIRE_MAGIC);
  w.u8(WIRE_VERSION, 'version');
  w.u8(MESSAGE_TYPE[kind], 'type');
  return w;
}

/**
 * Check size, magic and version, and return the message kind plus a reader positioned on the payload.
 * The size check comes first so an oversized frame costs nothing to refuse.
 */
export function openFrame(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): { kind: MessageKind; reader: ByteReader } {
  if (!(bytes instanceof Uint8Array)) throw new WireError('inconsistent', 'frame', 'not a Uint8Array');
  if (bytes.length > limits.maxFrameBytes) {
    throw new WireError(
      'oversized',
      'frame',
      `${bytes.length} bytes exceeds maxFrameBytes ${limits.maxFrameBytes}`,
    );
  }
  const r = new ByteReader(bytes, limits);
  r.need(2, 'magic');
  if (bytes[0] !== WIRE_MAGIC[0] || bytes[1] !== WIRE_MAGIC[1])
    throw new WireError('bad_magic', 'magic', 'not a meshtrain frame');
  r.pos = 2;
  const version = r.u8('version');
  if (version !== WIRE_VERSION)
    throw new WireError('bad_version', 'version', `version ${version}, this codec speaks ${WIRE_VERSION}`);
  const typeId = r.u8('type');
  const kind = messageKindOf(typeId);
  if (kind === undefined)
    throw new WireError('unknown_type', 'type', `unknown message type 0x${typeId.toString(16)}`);
  return { kind, reader: r };
}

/** Like openFrame, but the frame must be of `kind`. */
export function openFrameOf(
  kind: MessageKind,
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): ByteReader {
  const f = openFrame(bytes, limits);
  if (f.kind !== kind) throw new WireError('unknown_type', 'type', `expected ${kind}, got ${f.kind}`);
  return f.reader;
}
