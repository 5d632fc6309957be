// Checks of the peer channel's messages (protocol.ts: PeerHostRequest, PeerHostReply). Both ends run this
// app's code, but a message is still only data of some shape: a bug or a stale build on one side must give a
// dropped message and a log line on the other, never a thrown TypeError deep in libp2p or an unbounded
// allocation. Pure (no libp2p, no DOM), unit-tested in Node.
import { MESH_STAT_KEYS } from '@meshtrain/client/mesh-stats';
import { MAX_DIRECTORY_CLIENTS, MAX_LISTED_PEERS } from './protocol.ts';
import type { PeerDirectoryMessage, PeerHostReply, PeerHostRequest, PeerStatsMessage } from './protocol.ts';
import { isHex32 } from '@meshtrain/core';

/** Largest SignedResult / TrainingResult frame the channel carries (MeshNetwork fetches at most this). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;
/** Largest shared blob (an admitted list: 33 B per result; MeshNetwork fetches at most 16 MiB). */
export const MAX_BLOB_BYTES = 16 * 1024 * 1024;
/** Largest encoded Announce (a few hundred bytes in practice). */
export const MAX_ANNOUNCE_BYTES = 4096;
/** Most parameters of a model, and most float32 values of all of them together (2 GiB). */
export const MAX_PARAMETERS = 4096;
export const MAX_PARAM_FLOATS = 2 ** 29;
/** Most relay addresses and hint ids a request carries. */
export const MAX_RELAY_ADDRS = 16;
export const MAX_HINTS = 16;

/** A libp2p PeerId as text (base58btc or base32 CID); or a hex client id, which the relay uses when a client has none. */
const PEER_ID = /^[A-Za-z0-9]{1,128}$/;

type Obj = Record<string, unknown>;

const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null;
const isCount = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
const isAmount = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x) && x >= 0;
const isBuffer = (x: unknown, max: number): x is ArrayBuffer =>
  x instanceof ArrayBuffer && x.byteLength <= max;
const isHash = (x: unknown): x is ArrayBuffer => x instanceof ArrayBuffer && x.byteLength === 32;

function stringList(x: unknown, max: number, ok: (s: string) => boolean): string[] | null {
  if (!Array.isArray(x) || x.length > max) return null;
  return x.every((s) => typeof s === 'string' && ok(s)) ? (x as string[]) : null;
}

function directory(x: unknown): PeerDirectoryMessage | null {
  if (!isObj(x)) return null;
  const list = (v: unknown) => {
    if (!Array.isArray(v) || v.length > MAX_DIRECTORY_CLIENTS) return null;
    const out: { id: string; p2p_id: string }[] = [];
    for (const c of v) {
      if (!isObj(c) || typeof c.id !== 'string' || typeof c.p2p_id !== 'string') return null;
      if (!isHex32(c.id) || !(c.p2p_id === '' || PEER_ID.test(c.p2p_id))) return null;
      out.push({ id: c.id, p2p_id: c.p2p_id });
    }
    return out;
  };
  const epochClients = list(x.epochClients);
  const members = list(x.members);
  return epochClients && members ? { epochClients, members } : null;
}

/** A request from the worker as the page's peer host accepts it, or null. */
export function parseHostRequest(x: unknown): PeerHostRequest | null {
  if (!isObj(x)) return null;
  switch (x.type) {
    case 'open': {
      const announced = stringList(x.announced, MAX_RELAY_ADDRS, (s) => s.length <= 1024);
      return announced ? { type: 'open', announced } : null;
    }
    case 'peers': {
      const d = directory(x.directory);
      return d ? { type: 'peers', directory: d } : null;
    }
    case 'publish':
      if (!isCount(x.id) || !isBuffer(x.announce, MAX_ANNOUNCE_BYTES) || !isBuffer(x.frame, MAX_FRAME_BYTES))
        return null;
      return { type: 'publish', id: x.id, announce: x.announce, frame: x.frame };
    case 'fetch': {
      const hints = stringList(x.hints, MAX_HINTS, isHex32);
      if (!isCount(x.id) || !isHash(x.commitment) || !hints) return null;
      return { type: 'fetch', id: x.id, commitment: x.commitment, hints };
    }
    case 'fetchParams': {
      if (!isCount(x.id) || !isHash(x.paramHash)) return null;
      const sizes = paramSizes(x.sizes);
      return sizes ? { type: 'fetchParams', id: x.id, paramHash: x.paramHash, sizes } : null;
    }
    case 'shareCheckpoint': {
      const { id, step, epoch, paramHash, params } = x;
      if (!isCount(id) || !isCount(step) || !isCount(epoch) || !isHash(paramHash)) return null;
      const names = stringList(x.names, MAX_PARAMETERS, (s) => s.length > 0 && s.length <= 256);
      const lengths = x.lengths;
      if (!names || !Array.isArray(lengths) || lengths.length !== names.length) return null;
      if (!lengths.every(isCount) || new Set(names).size !== names.length) return null;
      const floats = (lengths as number[]).reduce((a, b) => a + b, 0);
      if (floats > MAX_PARAM_FLOATS || !(params instanceof ArrayBuffer) || params.byteLength !== 4 * floats)
        return null;
      return {
        type: 'shareCheckpoint',
        id,
        step,
        epoch,
        paramHash,
        names,
        lengths: lengths as number[],
        params,
      };
    }
    case 'shareBlob':
      if (!isCount(x.id) || !isBuffer(x.bytes, MAX_BLOB_BYTES)) return null;
      return { type: 'shareBlob', id: x.id, bytes: x.bytes };
    case 'fetchBlob':
      if (!isCount(x.id) || !isHash(x.address)) return null;
      return { type: 'fetchBlob', id: x.id, address: x.address };
    case 'close':
      return { type: 'close' };
    default:
      return null;
  }
}

/** [name, float count] pairs: distinct names, counts that fit MAX_PARAM_FLOATS together. */
function paramSizes(x: unknown): [string, number][] | null {
  if (!Array.isArray(x) || x.length > MAX_PARAMETERS) return null;
  const names = new Set<string>();
  let floats = 0;
  for (const e of x) {
    if (!Array.isArray(e) || e.length !== 2) return null;
    const [name, count] = e as unknown[];
    if (typeof name !== 'string' || name.length === 0 || name.length > 256 || names.has(name)) return null;
    if (!isCount(count)) return null;
    names.add(name);
    floats += count;
  }
  return floats <= MAX_PARAM_FLOATS ? (x as [string, number][]) : null;
}

function stats(x: unknown): PeerStatsMessage | null {
  if (!isObj(x)) return null;
  const keys = MESH_STAT_KEYS;
  const webrtcPeers = stringList(x.webrtcPeers, MAX_LISTED_PEERS, (s) => PEER_ID.test(s));
  if (!webrtcPeers || !keys.every((k) => isAmount(x[k]))) return null;
  const out = { webrtcPeers } as Partial<PeerStatsMessage>;
  for (const k of keys) out[k] = x[k] as number;
  return out as PeerStatsMessage;
}

/** A message from the page's peer host as the worker accepts it, or null. */
export function parseHostReply(x: unknown): PeerHostReply | null {
  if (!isObj(x)) return null;
  switch (x.type) {
    case 'opened':
      return typeof x.peerId === 'string' && PEER_ID.test(x.peerId)
        ? { type: 'opened', peerId: x.peerId }
        : null;
    case 'unavailable':
      if (typeof x.reason !== 'string' || typeof x.fallback !== 'boolean') return null;
      return { type: 'unavailable', reason: x.reason.slice(0, 500), fallback: x.fallback };
    case 'reply': {
      if (!isCount(x.id)) return null;
      const bytes = x.bytes;
      if (bytes !== null && !isBuffer(bytes, 4 * MAX_PARAM_FLOATS)) return null;
      if (x.error !== undefined && typeof x.error !== 'string') return null;
      return {
        type: 'reply',
        id: x.id,
        bytes,
        ...(typeof x.error === 'string' ? { error: x.error.slice(0, 500) } : {}),
      };
    }
    case 'stats': {
      const s = stats(x.stats);
      return s ? { type: 'stats', stats: s } : null;
    }
    case 'announce':
      return isBuffer(x.announce, MAX_ANNOUNCE_BYTES) ? { type: 'announce', announce: x.announce } : null;
    default:
      return null;
  }
}
