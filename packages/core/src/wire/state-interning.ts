// The StateSnapshot's compact spelling of a coordinator state. Its JSON names every client several times (a
// member, an epoch client, keys of `strikes` and `verified`), each time as 64 hex digits, and most clients'
// libp2p PeerId is derived from that same Ed25519 key (52 more characters). A snapshot is what each joiner
// downloads, so at N clients a burst of N joins costs O(N²) bytes: halving a snapshot halves the burst.
//
// Interning replaces, anywhere in the JSON value (object keys included):
//   - a string of exactly 64 lowercase hex digits by "~i", where i indexes a table of 32-byte values;
//   - a string that is the base58btc PeerId of an Ed25519 key (identity multihash of its protobuf public key,
//     "12D3KooW…") by "~pi", the key being table entry i;
//   - any other string that starts with "~" by the same string with one more "~" in front.
// Table entries appear in the order the text first refers to them, and every entry is referred to, so a state
// has exactly one interned spelling (frames are canonical). Only string tokens of the JSON text change, and
// decoding turns each back into its original spelling, so the decoded text is the relay's exact JSON and the
// state hash is unchanged.
import { base58btc } from 'multiformats/bases/base58';
import { bytesToHex, hexToBytes, isHex32 } from '../crypto/bytes.ts';
import { WireError } from './errors.ts';

export const INTERNED_VALUE_BYTES = 32;

const REF = /^~(p?)(0|[1-9][0-9]*)$/;
/** Identity multihash (0x00, length 36) of a libp2p protobuf PublicKey { Type: Ed25519, Data: 32 bytes }. */
const PEER_ID_PREFIX = Uint8Array.from([0x00, 0x24, 0x08, 0x01, 0x12, 0x20]);
const PEER_ID_BYTES = PEER_ID_PREFIX.length + INTERNED_VALUE_BYTES;
/** base58btc of PEER_ID_BYTES bytes starting with PEER_ID_PREFIX is always 52 characters "12D3KooW…". */
const PEER_ID_CHARS = 52;

export interface InternedState {
  /** 32-byte values in first-reference order. */
  table: Uint8Array[];
  /** Canonical JSON (JSON.stringify) of the value with its strings replaced. */
  text: string;
}

/**
 * base58 costs tens of microseconds per PeerId, and a relay encodes a snapshot naming the same clients at every
 * broadcast that has joiners: both directions are memoized, in tables cleared when full so they stay bounded.
 */
const MEMO_LIMIT = 1 << 16;
const keyOfPeer = new Map<string, string | null>();
const peerOfKey = new Map<string, string>();
function memo<V>(m: Map<string, V>, k: string, v: V): V {
  if (m.size >= MEMO_LIMIT) m.clear();
  m.set(k, v);
  return v;
}

/** The Ed25519 key hex a PeerId string encodes, or null when it is not such a PeerId. */
function ed25519KeyOfPeerId(s: string): string | null {
  if (s.length !== PEER_ID_CHARS || !s.startsWith('12D3KooW')) return null;
  const known = keyOfPeer.get(s);
  return known !== undefined ? known : memo(keyOfPeer, s, decodePeerId(s));
}

function decodePeerId(s: string): string | null {
  let bytes: Uint8Array;
  try {
    bytes = base58btc.baseDecode(s);
  } catch {
    return null;
  }
  if (bytes.length !== PEER_ID_BYTES) return null;
  for (let i = 0; i < PEER_ID_PREFIX.length; i++) if (bytes[i] !== PEER_ID_PREFIX[i]) return null;
  // Only the canonical spelling of those bytes counts; anything else stays a literal string.
  const key = bytes.subarray(PEER_ID_PREFIX.length);
  return peerIdOfKey(key) === s ? bytesToHex(key) : null;
}

/**
 * The libp2p PeerId string of an Ed25519 public key: what node-trainer and the tab announce, since both derive
 * their libp2p key from the identity key.
 */
export function peerIdOfKey(key: Uint8Array): string {
  return peerIdOfHex(bytesToHex(key), key);
}

function peerIdOfHex(hex: string, key: Uint8Array): string {
  const known = peerOfKey.get(hex);
  if (known !== undefined) return known;
  const bytes = new Uint8Array(PEER_ID_BYTES);
  bytes.set(PEER_ID_PREFIX);
  bytes.set(key, PEER_ID_PREFIX.length);
  return memo(peerOfKey, hex, base58btc.baseEncode(bytes));
}

/**
 * `text` with each JSON string token's contents (keys included) passed through `f`. Outside strings JSON has no
 * quote, so scanning from the start visits exactly the string tokens; a quote inside one is escaped (preceded
 * by an odd run of backslashes). Contents are handed over as spelled, escapes included: none of the spellings
 * interned here contains one.
 */
function mapStrings(text: string, f: (contents: string) => string | null): string {
  // Only contents of 64 or 52 characters or starting with "~" are handed to `f` (the rules below need no others).
  const parts: string[] = [];
  let from = 0;
  let pos = 0;
  for (;;) {
    const open = text.indexOf('"', pos);
    if (open < 0) break;
    let close = text.indexOf('"', open + 1);
    for (;;) {
      if (close < 0) return bad('unterminated string');
      let slashes = 0;
      while (text.charCodeAt(close - 1 - slashes) === 0x5c) slashes++;
      if (slashes % 2 === 0) break;
      close = text.indexOf('"', close + 1);
    }
    // Most tokens are keys and short values none of the rules applies to: skip them without a slice.
    const len = close - open - 1;
    const out =
      len === 64 || len === PEER_ID_CHARS || text.charCodeAt(open + 1) === 0x7e
        ? f(text.slice(open + 1, close))
        : null;
    if (out !== null) {
      parts.push(text.slice(from, open + 1), out);
      from = close;
    }
    pos = close + 1;
  }
  if (from === 0) return text;
  parts.push(text.slice(from));
  return parts.join('');
}

function bad(why: string): never {
  throw new WireError('inconsistent', 'state', why);
}

export function internState(value: unknown): InternedState {
  const index = new Map<string, number>();
  const table: Uint8Array[] = [];
  const ref = (hex: string): number => {
    let i = index.get(hex);
    if (i === undefined) {
      i = table.length;
      index.set(hex, i);
      table.push(hexToBytes(hex));
    }
    return i;
  };
  const text = mapStrings(JSON.stringify(value), (s) => {
    if (s.length === 64 && isHex32(s)) return `~${ref(s)}`;
    if (s.length === PEER_ID_CHARS) {
      const key = ed25519KeyOfPeerId(s);
      if (key !== null) return `~p${ref(key)}`;
    }
    return s.charCodeAt(0) === 0x7e ? `~${s}` : null;
  });
  return { table, text };
}

/**
 * The value an interned state spells. Throws WireError('inconsistent') unless the spelling is the one
 * internState produces: canonical JSON, no literal that should have been a reference, references in
 * first-use order, every table entry used.
 */
export function externState(table: readonly Uint8Array[], text: string): unknown {
  const hexes = table.map((b) => {
    if (b.length !== INTERNED_VALUE_BYTES)
      throw new WireError('inconsistent', 'state.table', 'interned values are 32 bytes');
    return bytesToHex(b);
  });
  if (new Set(hexes).size !== hexes.length)
    throw new WireError('inconsistent', 'state.table', 'an interned value appears twice');
  let used = 0;
  const plain = mapStrings(text, (s) => {
    if (s.charCodeAt(0) !== 0x7e) {
      if (s.length === 64 && isHex32(s)) bad('a 64-hex-digit string must be interned');
      if (s.length === PEER_ID_CHARS && ed25519KeyOfPeerId(s) !== null)
        bad('an Ed25519 PeerId must be interned');
      return null;
    }
    if (s.charCodeAt(1) === 0x7e) return s.slice(1);
    const m = REF.exec(s);
    if (!m) return bad(`'${s.slice(0, 16)}' is neither a reference nor an escaped string`);
    const i = Number(m[2]);
    if (i > used) bad('interned values must be referenced in table order');
    if (i === used) {
      if (i >= hexes.length) bad(`reference ~${i} is past the table (${hexes.length} values)`);
      used++;
    }
    const hex = hexes[i] as string;
    return m[1] === 'p' ? peerIdOfHex(hex, table[i] as Uint8Array) : hex;
  });
  if (used !== hexes.length) bad(`${hexes.length - used} interned values are never referenced`);
  let value: unknown;
  try {
    value = JSON.parse(plain);
  } catch {
    throw new WireError('inconsistent', 'state', 'state is not valid JSON');
  }
  if (JSON.stringify(value) !== plain)
    throw new WireError('inconsistent', 'state', 'state JSON is not in canonical JSON.stringify form');
  return value;
}
