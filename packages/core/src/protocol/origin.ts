// Origin tags: which network a join came from, without the address (docs/protocol.md "Trust"). The host
// hashes the IPv4 /24 or IPv6 /64 of the connection with a salt of its own, and puts the first 8 bytes in
// the join event; the coordinator keeps the tag per client so that no identity verifies another of the same
// origin. Deterministic for a given salt, so every replica replaying the log agrees; the salt keeps the
// network from being read back by whoever sees the state.
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '../crypto/bytes.ts';

const TAG = new TextEncoder().encode('meshtrain/origin/v1');

/** The network prefix an address belongs to ("v4:a.b.c", "v6:xxxx:…" of 4 groups), or null if unparsable. */
export function originNetwork(address: string): string | null {
  let a = address.trim();
  if (a.startsWith('[') && a.includes(']')) a = a.slice(1, a.indexOf(']'));
  const zone = a.indexOf('%');
  if (zone >= 0) a = a.slice(0, zone);
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a);
  if (mapped) a = mapped[1] as string;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(a);
  if (v4) {
    const parts = v4.slice(1, 4).map(Number);
    if (parts.some((p) => p > 255) || Number(v4[4]) > 255) return null;
    return `v4:${parts.join('.')}`;
  }
  if (!a.includes(':') || !/^[0-9a-f:.]+$/i.test(a)) return null;
  const halves = a.toLowerCase().split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  // An embedded IPv4 tail counts as two groups; only the first four groups matter here.
  const groups = head.length + tail.length + tail.filter((g) => g.includes('.')).length;
  if (groups > 8 || (halves.length === 1 && groups !== 8)) return null;
  const fill = halves.length === 2 ? Array<string>(8 - groups).fill('0') : [];
  const all = [...head, ...fill, ...tail];
  if (!all.slice(0, 4).every((g) => /^[0-9a-f]{1,4}$/.test(g))) return null;
  return `v6:${all
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}`;
}

/**
 * The origin tag (16 hex digits) of `address` under `salt`; undefined when the address is unknown or loopback
 * (processes on the relay's own machine — a local testnet, the host's own trainer — are not told apart).
 */
export function originTag(address: string | undefined, salt: Uint8Array): string | undefined {
  if (address === undefined) return undefined;
  const net = originNetwork(address);
  if (net === null || net.startsWith('v4:127.') || net === 'v6:0:0:0:0') return undefined;
  const text = new TextEncoder().encode(net);
  const m = new Uint8Array(TAG.length + salt.length + text.length);
  m.set(TAG, 0);
  m.set(salt, TAG.length);
  m.set(text, TAG.length + salt.length);
  return bytesToHex(sha256(m).subarray(0, 8));
}
