import { isPeerId } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import type { Multiaddr } from '@multiformats/multiaddr';
import { Circuit, WebRTC } from '@multiformats/multiaddr-matcher';
import type { AbortOptions, Connection, DialTarget, Libp2p, PeerId, Stream } from '@libp2p/interface';
import { DialError } from './errors.ts';

/** What our protocol services need from a libp2p node: a narrow slice, so any node (relay, peer) can host them. */
export type ProtocolHost = Pick<Libp2p, 'handle' | 'unhandle' | 'dial' | 'getConnections'>;

/** A peer to fetch from: its PeerId (when already known/connected) or multiaddr(s) to dial. */
export type PeerTarget = DialTarget;

export function describeTarget(target: PeerTarget): string {
  if (isPeerId(target)) return target.toString();
  if (Array.isArray(target)) return target.map((m) => m.toString()).join(',');
  return target.toString();
}

/** The peer id a target names, if any (the last /p2p/ component of a multiaddr: the circuit's far end). */
export function targetPeerId(target: PeerTarget): PeerId | undefined {
  if (isPeerId(target)) return target;
  const addrs: Multiaddr[] = Array.isArray(target) ? target : [target];
  for (const ma of addrs) {
    const p2p = ma.getComponents().filter((c) => c.name === 'p2p');
    const last = p2p[p2p.length - 1];
    if (last?.value !== undefined) {
      try {
        return peerIdFromString(last.value);
      } catch {
        // malformed id: let dial() report it
      }
    }
  }
  return undefined;
}

function onlyPlainCircuit(target: Multiaddr | Multiaddr[]): boolean {
  const addrs = Array.isArray(target) ? target : [target];
  return addrs.length > 0 && addrs.every((ma) => Circuit.matches(ma) && !WebRTC.matches(ma));
}

export interface OpenStreamOptions extends AbortOptions {
  /**
   * Allow streams over a relayed ("limited") connection. Our relay raises its limits so relayed transfers of
   * a few MiB complete; callers that only want the direct path set this to false.
   */
  allowLimited?: boolean;
}

/**
 * Opens a protocol stream to `target`, preferring an existing unlimited (direct) connection: after a WebRTC
 * upgrade both the relayed and the direct connection to a peer are open, and data must take the direct one.
 * Dials are always caught: a failed WebSocket dial on Node 22+ rejects with a non-Error ErrorEvent.
 */
export async function openProtocolStream(
  host: ProtocolHost,
  target: PeerTarget,
  protocol: string,
  options: OpenStreamOptions = {},
): Promise<{ stream: Stream; connection: Connection }> {
  const allowLimited = options.allowLimited ?? true;
  const peer = targetPeerId(target);
  let connection: Connection | undefined;
  if (peer !== undefined) {
    const open = host.getConnections(peer).filter((c) => c.status === 'open');
    connection = open.find((c) => c.limits === undefined);
    // Reuse a relayed connection only when the caller gave no address to try for a direct one: a PeerId, or
    // only plain `/p2p-circuit` addresses, whose dial can only give another relayed connection. Re-dialling
    // those per request is not just wasteful: with several requests in flight to one peer (checkpoint
    // pieces) the extra circuit dials were seen failing ("Remote closed connection during opening").
    if (connection === undefined && allowLimited && (isPeerId(target) || onlyPlainCircuit(target))) {
      connection = open[0];
    }
  }
  if (connection === undefined) {
    try {
      connection = await host.dial(target, { signal: options.signal });
    } catch (err) {
      throw new DialError(describeTarget(target), err);
    }
  }
  try {
    const stream = await connection.newStream(protocol, {
      signal: options.signal,
      runOnLimitedConnection: allowLimited,
    });
    return { stream, connection };
  } catch (err) {
    throw new DialError(`${describeTarget(target)} (${protocol})`, err);
  }
}
