// Fields StateDelta and LightDelta share: times as zigzag steps from the previous transition, and the
// optional state hash and parameter hash that close a frame.
import type { ByteReader, ByteWriter } from './codec.ts';
import { WireError } from './errors.ts';
import { PARAM_HASH_BYTES } from './param-hash.ts';
import type { SnapshotParamHash } from './state-snapshot.ts';
import { STATE_HASH_BYTES } from './state-hash.ts';

/** Largest |dNow| a transition may carry (keeps the zigzag varint within 2^53). */
export const MAX_NOW_STEP = 2 ** 51;

export function zigzag(d: number): number {
  return d >= 0 ? 2 * d : -2 * d - 1;
}

export function unzigzag(z: number): number {
  return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
}

/** An option tag: u8 0 (absent) or 1 (present); anything else is a second spelling. */
export function readOptionTag(r: ByteReader, field: string): boolean {
  const t = r.u8(field);
  if (t > 1) throw new WireError('inconsistent', field, `option tag must be 0 or 1, got ${t}`);
  return t === 1;
}

/** `stateHash` then `paramHash`, each u8 0/1 and its bytes (the paramHash with its epoch). */
export function writeFrameHashes(
  w: ByteWriter,
  stateHash: Uint8Array | undefined,
  paramHash: SnapshotParamHash | undefined,
): void {
  if (stateHash === undefined) w.u8(0, 'stateHash');
  else {
    w.u8(1, 'stateHash');
    w.fixed(stateHash, STATE_HASH_BYTES, 'stateHash');
  }
  if (paramHash === undefined) w.u8(0, 'paramHash');
  else {
    w.u8(1, 'paramHash');
    w.u32(paramHash.epoch, 'paramHash.epoch');
    w.fixed(paramHash.hash, PARAM_HASH_BYTES, 'paramHash.hash');
  }
}

export function readFrameHashes(r: ByteReader): { stateHash?: Uint8Array; paramHash?: SnapshotParamHash } {
  const out: { stateHash?: Uint8Array; paramHash?: SnapshotParamHash } = {};
  if (readOptionTag(r, 'stateHash')) out.stateHash = r.fixed(STATE_HASH_BYTES, 'stateHash');
  if (readOptionTag(r, 'paramHash')) {
    const epoch = r.u32('paramHash.epoch');
    out.paramHash = { epoch, hash: r.fixed(PARAM_HASH_BYTES, 'paramHash.hash') };
  }
  return out;
}
