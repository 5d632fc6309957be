// ParamHash: a client's SHA-256 over all its parameters at an epoch end (or when the relay asks), so the
// relay can find the majority hash and flag replicas that diverged
// (docs/architecture.md "Numerics contract"). It travels on the client's authenticated coordinator
// connection, so it carries no signature of its own.
//
// | field  | encoding                                 |
// |--------|------------------------------------------|
// | header | "MT" ‖ version ‖ type 0x32               |
// | runId  | string, 1..64 bytes                      |
// | epoch  | varint u32: the epoch that just ended    |
// | step   | varint u32: progress.step at the hash    |
// | hash   | 32 B SHA-256                             |
import type { ByteReader } from './codec.ts';
import { readRunId, writeRunId } from './common.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export const PARAM_HASH_BYTES = 32;

export interface ParamHash {
  runId: string;
  epoch: number;
  step: number;
  hash: Uint8Array;
}

export function encodeParamHash(p: ParamHash, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('paramHash', limits);
  writeRunId(w, p.runId);
  w.u32(p.epoch, 'epoch');
  w.u32(p.step, 'step');
  w.fixed(p.hash, PARAM_HASH_BYTES, 'hash');
  return w.finish();
}

export function readParamHashPayload(r: ByteReader): ParamHash {
  const runId = readRunId(r);
  const epoch = r.u32('epoch');
  const step = r.u32('step');
  const hash = r.fixed(PARAM_HASH_BYTES, 'hash');
  return { runId, epoch, step, hash };
}

export function decodeParamHash(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): ParamHash {
  const r = openFrameOf('paramHash', bytes, limits);
  const p = readParamHashPayload(r);
  r.end('paramHash');
  return p;
}
