// Challenge: the relay's first frame on every coordinator WebSocket (apps/relay/PROTOCOL.md). The client
// signs `challenge` into its Join (membership.ts), which proves it holds its identity key on this very
// connection: a recorded Join answers a different challenge and is refused.
//
// | field      | encoding                                                 |
// |------------|----------------------------------------------------------|
// | header     | "MT" ‖ version ‖ type 0x22                               |
// | runId      | string, 1..64 bytes: the run this connection is for      |
// | challenge  | 32 B, fresh random bytes per connection                  |
// | serverTime | varint ≤ 2^53−1: the relay's clock, unix milliseconds    |
// | powBits    | u8 ≤ MAX_JOIN_POW_BITS: the join puzzle's difficulty      |
// serverTime lets a client estimate its clock offset; nothing is signed with it. powBits > 0 asks the Join to
// carry a proof of work over this challenge and the joining key (crypto/join-pow.ts).
import type { ByteReader } from './codec.ts';
import { readRunId, writeRunId } from './common.ts';
import { frameWriter, openFrameOf } from './frame.ts';
import type { WireLimits } from './limits.ts';
import { DEFAULT_WIRE_LIMITS } from './limits.ts';
import { JOIN_CHALLENGE_BYTES } from './membership.ts';
import { MAX_JOIN_POW_BITS } from '../crypto/join-pow.ts';
import { WireError } from './errors.ts';

export interface Challenge {
  runId: string;
  challenge: Uint8Array;
  /** Unix milliseconds on the relay when it sent the challenge. */
  serverTime: number;
  /** Leading zero bits the Join's proof of work must reach (0: none asked). */
  powBits: number;
}

export function encodeChallenge(c: Challenge, limits: WireLimits = DEFAULT_WIRE_LIMITS): Uint8Array {
  const w = frameWriter('challenge', limits);
  writeRunId(w, c.runId);
  w.fixed(c.challenge, JOIN_CHALLENGE_BYTES, 'challenge');
  w.u53(c.serverTime, 'serverTime');
  if (!Number.isInteger(c.powBits) || c.powBits < 0 || c.powBits > MAX_JOIN_POW_BITS)
    throw new WireError('inconsistent', 'powBits', `must be 0..${MAX_JOIN_POW_BITS}`);
  w.u8(c.powBits, 'powBits');
  return w.finish();
}

export function readChallengePayload(r: ByteReader): Challenge {
  const runId = readRunId(r);
  const challenge = r.fixed(JOIN_CHALLENGE_BYTES, 'challenge');
  const serverTime = r.u53('serverTime');
  const powBits = r.u8('powBits');
  if (powBits > MAX_JOIN_POW_BITS)
    throw new WireError('inconsistent', 'powBits', `must be 0..${MAX_JOIN_POW_BITS}`);
  return { runId, challenge, serverTime, powBits };
}

export function decodeChallenge(bytes: Uint8Array, limits: WireLimits = DEFAULT_WIRE_LIMITS): Challenge {
  const r = openFrameOf('challenge', bytes, limits);
  const c = readChallengePayload(r);
  r.end('challenge');
  return c;
}
