// WarmupWitness: "my model for this epoch is loaded". Its own frame, not a Witness with empty blooms, so a
// round witness that arrives late (after the epoch ended and the next one is warming up) can never be read
// as a warmup witness, and each message says what it is. It travels on the client's authenticated
// coordinator connection, so it carries no signature of its own.
//
// | field  | encoding                                  |
// |--------|-------------------------------------------|
// | header | "MT" ‖ version ‖ type 0x12                |
// | runId  | string, 1..64 bytes                       |
// | epoch  | varint u32: the epoch that is warming up  |
import type { ByteReader } from './codec.ts';
import { readRunId, writeRunId } from './common.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';

export interface WarmupWitness {
  runId: string;
  epoch: number;
}

export function encodeWarmupWitness(m: WarmupWitness, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('warmupWitness', limits);
  writeRunId(w, m.runId);
  w.u32(m.epoch, 'epoch');
  return w.finish();
}

export function readWarmupWitnessPayload(r: ByteReader): WarmupWitness {
  const runId = readRunId(r);
  const epoch = r.u32('epoch');
  return { runId, epoch };
}

export function decodeWarmupWitness(
  bytes: Uint8Array,
  limits: WireLimits = DEFAULT_WIRE_LIMITS,
): WarmupWitness {
  const r = openFrameOf('warmupWitness', bytes, limits);
  const m = readWarmupWitnessPayload(r);
  r.end('warmupWitness');
  return m;
}
