// Round seeds. Psyche takes them from Solana slot hashes or the server's RNG (docs/protocol.md "Round seed");
// core has no randomness, so the seed is a hash of what the shell fed in:
//   random_seed = u64_le(SHA-256("meshtrain/round-seed/v1" ‖ run_seed (32 B) ‖ epoch u32 LE ‖ step u32 LE
//                                 ‖ entropy bytes)[0..8])
// `entropy` is the latest value carried by a `tick` or `entropy` event (empty if none): a relay that wants
// unpredictable committees feeds fresh randomness there; replaying the same events replays the same seeds.
import { sha256 } from '@noble/hashes/sha2.js';
import { bigIntToSeed, leBytesToBigInt } from '../selection/hex.ts';
import { hexToBytes } from '../crypto/bytes.ts';

const DOMAIN = new TextEncoder().encode('meshtrain/round-seed/v1');

function u32le(v: number): Uint8Array {
  return new Uint8Array([v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff]);
}

export function deriveRoundSeed(runSeed: string, epoch: number, step: number, entropy: string): string {
  const parts = [DOMAIN, hexToBytes(runSeed), u32le(epoch), u32le(step), hexToBytes(entropy)];
  const msg = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    msg.set(p, o);
    o += p.length;
  }
  return bigIntToSeed(leBytesToBigInt(sha256(msg), 0, 8));
}
